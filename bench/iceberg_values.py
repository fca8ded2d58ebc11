"""Protobuf and Avro values into the table's Arrow columns, per value, over the values
bench/iceberg.py produces (its Order, in Confluent's framing, as confluent-kafka's
ProtobufSerializer / AvroSerializer write them): what a flush runs (``decode_column``), its
parts, the paths a flush ran before the native passes (Protobuf: ptars after the runtime's
check or the native walk; Avro: Polars' reader) and the value-by-value reference over a
tenth of them. CPU time of this process, paths in turn
per repeat; ns per value as median [min .. max].

    .venv/bin/python bench/iceberg_values.py [--records 100000] [--repeats 7]
        [--codecs protobuf,avro]
"""

from __future__ import annotations

import argparse
import io
import os
import random
import statistics
import struct
import time
from collections.abc import Callable

import pyarrow as pa

from iceberg import ORDER, order_message_class  # bench/iceberg.py: the values it produces
from tidelog.iceberg import avro_bulk, protobuf_bulk
from tidelog.iceberg.avro_values import AvroCodec
from tidelog.iceberg.columns import KAFKA, arrow_schema, table_schema
from tidelog.iceberg.protobuf_values import ProtobufCodec
from tidelog.iceberg.value_codec import ValueCodec, strip_prefix, strip_prefix_py


def _orders(n: int) -> list[dict[str, object]]:
    rng = random.Random(7)
    return [{"id": i, "customer": f"c{rng.randrange(10_000)}", "qty": rng.randrange(100),
             "price": rng.random() * 100, "note": None if i % 4 else "gift",
             "tags": ["a", "b"][: i % 3]} for i in range(n)]


def protobuf_values(n: int) -> pa.Array:
    """bench/iceberg.py's Protobuf values: schema id 1, message indexes [0] (one byte 0)."""
    cls = order_message_class()
    head = b"\x00" + struct.pack(">I", 1) + b"\x00"
    return pa.array([head + cls(**{**o, "note": o["note"] or ""}).SerializeToString()
                     for o in _orders(n)], pa.binary())


def avro_values(n: int) -> pa.Array:
    import fastavro

    schema = fastavro.parse_schema(ORDER)
    head = b"\x00" + struct.pack(">I", 1)
    out = []
    for o in _orders(n):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, o)
        out.append(head + buf.getvalue())
    return pa.array(out, pa.binary())


def _target(fields: list) -> pa.StructType:  # type: ignore[type-arg]
    return pa.struct([f for f in arrow_schema(table_schema(fields)) if f.name != KAFKA])


def protobuf_paths(n: int) -> dict[str, tuple[Callable[[], object], int]]:
    from google.protobuf import descriptor_pb2, descriptor_pool

    cls = order_message_class()
    fdp = descriptor_pb2.FileDescriptorProto()
    cls.DESCRIPTOR.file.CopyToProto(fdp)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    codec = ProtobufCodec(pool.FindMessageTypeByName("bench.Order"))
    target = _target(codec.fields)
    framed = protobuf_values(n)
    bare = strip_prefix(framed, 6)
    bulk = codec._bulk
    assert bulk is not None
    got, bad = codec.decode_column(framed, target, 6)
    assert not bad and codec._bulk is not None
    ref = framed.slice(0, max(1, n // 10))
    walk = ProtobufCodec(pool.FindMessageTypeByName("bench.Order"))
    walk._plans[target] = None  # ptars, checked by the native walk
    old = ProtobufCodec(pool.FindMessageTypeByName("bench.Order"))
    old._plans[target] = None
    assert old._bulk is not None and codec._native_plan(target) is not None
    old._bulk.plan = None  # checked by the runtime's parse, as before the native walk
    assert walk.decode_column(framed, target, 6)[0].equals(got)
    return {
        "protobuf decode_column": (lambda: codec.decode_column(framed, target, 6), n),
        "protobuf ptars, native walk": (lambda: walk.decode_column(framed, target, 6), n),
        "protobuf before (ptars, runtime check, numpy)": (
            lambda: old.decode_column(strip_prefix_py(framed, 6), target), n),
        "protobuf strip framing": (lambda: strip_prefix(framed, 6), n),
        "protobuf strip (numpy)": (lambda: strip_prefix_py(framed, 6), n),
        "protobuf check (native)": (lambda: protobuf_bulk.check_wire(bulk, bare), n),
        "protobuf check (runtime)": (lambda: protobuf_bulk.check_wire_py(bulk, bare), n),
        "protobuf ptars": (lambda: bulk._handler.array_to_record_batch(bare), n),
        "protobuf value by value": (
            lambda: ValueCodec.decode_column(codec, ref, target, 6), len(ref)),
    }


def avro_paths(n: int) -> dict[str, tuple[Callable[[], object], int]]:
    codec = AvroCodec(ORDER)
    target = _target(codec.fields)
    framed = avro_values(n)
    got, bad = codec.decode_column(framed, target, 5)
    header = codec._bulk_header
    assert not bad and header is not None
    assert got.equals(avro_bulk.decode(header, framed, target, 5))
    ref = framed.slice(0, max(1, n // 10))
    paths: dict[str, tuple[Callable[[], object], int]] = {
        "avro decode_column": (lambda: codec.decode_column(framed, target, 5), n),
        "avro before (Polars' reader)": (
            lambda: avro_bulk.decode(header, framed, target, 5), n),
        "avro block": (lambda: avro_bulk.block(framed.cast(pa.binary()), 5), n),
        "avro value by value": (
            lambda: ValueCodec.decode_column(codec, ref, target, 5), len(ref)),
    }
    return paths


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--codecs", default="protobuf,avro")
    args = ap.parse_args()
    paths: dict[str, tuple[Callable[[], object], int]] = {}
    for name in args.codecs.split(","):
        paths.update({"protobuf": protobuf_paths, "avro": avro_paths}[name](args.records))
    print(f"load average {os.getloadavg()[0]:.2f}; {args.records:,} values, "
          f"{args.repeats} repeats")
    ns: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(args.repeats):
        for name, (run, count) in paths.items():
            c0 = time.process_time()
            run()
            ns[name].append((time.process_time() - c0) * 1e9 / count)
    for name, xs in ns.items():
        print(f"{name:46s} {statistics.median(xs):7,.0f} ns/value [{min(xs):,.0f} .. "
              f"{max(xs):,.0f}]")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
