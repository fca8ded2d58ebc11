"""JSON Schema values into the table's Arrow columns, per value: the native core's strict pass
(iceberg/json_native.py, what a flush runs), pyarrow's JSON reader with the table's schema
(iceberg/json_bulk.py, what runs without the native core) and json.loads value by value (the
reference), over the values bench/iceberg.py produces (its JSON Order, in Confluent's
framing, written as confluent-kafka's JSONSerializer writes them). CPU time of this process,
paths in turn per repeat; ns per value as median [min .. max], and each path's ratio to the
native pass paired per repeat.

    .venv/bin/python bench/iceberg_json.py [--records 100000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import struct
import time
from collections.abc import Callable

import pyarrow as pa

from iceberg import JSON_ORDER  # bench/iceberg.py: the values it produces
from tidelog._native import core
from tidelog.iceberg import json_bulk, json_native
from tidelog.iceberg.columns import KAFKA, arrow_schema, table_schema
from tidelog.iceberg.json_values import JsonCodec
from tidelog.iceberg.value_codec import ValueCodec


def values(n: int) -> pa.Array:
    """bench/iceberg.py's JSON values: schema id 1, compact JSON."""
    rng = random.Random(7)
    head = b"\x00" + struct.pack(">I", 1)
    return pa.array([head + json.dumps(
        {"id": i, "customer": f"c{rng.randrange(10_000)}", "qty": rng.randrange(100),
         "price": rng.random() * 100, "note": None if i % 4 else "gift",
         "tags": ["a", "b"][: i % 3]}, separators=(",", ":")).encode() for i in range(n)],
        pa.binary())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    if core is None:
        raise SystemExit("the native core is not built (python setup.py build_ext --inplace)")
    codec = JsonCodec(JSON_ORDER)
    target = pa.struct([f for f in arrow_schema(table_schema(codec.fields)) if f.name != KAFKA])
    framed = values(args.records)
    paths: dict[str, Callable[[], object]] = {
        "native pass": lambda: codec.decode_column(framed, target, 5),
        "pyarrow reader": lambda: json_bulk.decode(framed, target, 5),
    }
    reference = framed.slice(0, max(1, args.records // 10))  # it is slow: a tenth of them
    paths["json.loads, value by value"] = lambda: ValueCodec.decode_column(
        codec, reference, target, 5)
    got, bad = codec.decode_column(framed, target, 5)
    assert not bad and got.equals(json_bulk.decode(framed, target, 5))
    assert json_native.available()
    print(f"load average {os.getloadavg()[0]:.2f}; {args.records:,} values, "
          f"{args.repeats} repeats (json.loads over {len(reference):,})")
    ns: dict[str, list[float]] = {name: [] for name in paths}
    for _ in range(args.repeats):
        for name, run in paths.items():
            count = len(reference) if name.startswith("json.loads") else args.records
            c0 = time.process_time()
            run()
            ns[name].append((time.process_time() - c0) * 1e9 / count)
    for name, xs in ns.items():
        ratios = [x / n for x, n in zip(xs, ns["native pass"], strict=True)]
        print(f"{name:28s} {statistics.median(xs):7,.0f} ns/value [{min(xs):,.0f} .. "
              f"{max(xs):,.0f}]  {statistics.median(ratios):5.1f}x the native pass "
              f"[{min(ratios):.1f} .. {max(ratios):.1f}]")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
