"""Records of many MiB: read into one buffer of the frame's size (server/connection.py's
_LargeFrame), decoded from a view of it, and kept intact end to end."""

from __future__ import annotations

import socket
import struct
import sys
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

from tidelog.protocol.codec import InvalidRequestError, response_class
from tidelog.records import build_batch, iter_batches
from tidelog.server.connection import LARGE_FRAME
from tidelog.testing import EmbeddedBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from broker_wire import fetch_body, produce_body, recv_frame, request_frame

BIG = 12 * 1024 * 1024
CONFIG = {"message.max.bytes": str(BIG + (1 << 20)),
          "socket.request.max.bytes": str(BIG + (2 << 20)),
          "replica.fetch.max.bytes": str(BIG + (1 << 20))}


def _value(n: int) -> bytes:
    # not one repeated byte: a misplaced chunk would show
    return bytes((i * 7 + i // 4093) & 0xFF for i in range(n))


def _produce_frame(topic: str, batch: bytes, corr: int) -> bytes:
    return request_frame(0, 9, corr, body=produce_body(9, topic, {0: batch}, acks=-1))


def _decode(api_key: int, version: int, frame: bytes) -> Any:
    from kio.serial import entity_reader
    cls = response_class(api_key, version)
    return entity_reader(cls)(frame, 5 if cls.__header_schema__.__version__ >= 1 else 4)[0]


def test_large_frame_in_small_chunks_then_a_pipelined_request() -> None:
    """The large frame arrives a few KiB at a time and the next request follows in the
    same write as its last bytes: both are answered, the record comes back intact."""
    value = _value(3 * LARGE_FRAME + 12345)
    batch = build_batch([(1_700_000_000_000, b"k", value)])
    with EmbeddedBroker(CONFIG) as b:
        b.run(_create(b, "big"))
        produce = _produce_frame("big", batch, corr=1)
        versions = request_frame(18, 3, 2, client_software_name="t",
                                 client_software_version="1")
        data = produce + versions
        with socket.create_connection(("127.0.0.1", b.port), timeout=30) as s:
            for i in range(0, len(data), 7000):
                s.sendall(data[i : i + 7000])
            p = _decode(0, 9, recv_frame(s))
            v = _decode(18, 3, recv_frame(s))
            s.sendall(request_frame(1, 12, 3, body=fetch_body(
                12, "big", {0: 0}, max_bytes=BIG, partition_max_bytes=BIG)))
            f = _decode(1, 12, recv_frame(s))
    assert v.error_code == 0 and v.api_keys
    part = p.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (0, 0)
    records = f.responses[0].partitions[0].records
    got = [r.value for bt in iter_batches(records) for r in bt.iter_records()]
    assert got == [value]


async def _create(b: EmbeddedBroker, topic: str) -> None:
    b.broker.replica_manager.create_topic(topic, 1)


def test_confluent_kafka_round_trips_a_12_mib_record() -> None:
    value = _value(BIG - 1024)
    with EmbeddedBroker(CONFIG) as b:
        b.run(_create(b, "huge"))
        p = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap_servers,
                                      "message.max.bytes": BIG + (1 << 20),
                                      "compression.type": "none", "acks": "all"})
        delivered: list[Any] = []
        p.produce("huge", value, key=b"k", on_delivery=lambda e, m: delivered.append(e))
        assert p.flush(60) == 0
        assert delivered == [None]
        c = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap_servers,
                                      "group.id": "g", "auto.offset.reset": "earliest",
                                      "fetch.max.bytes": BIG + (2 << 20),
                                      "receive.message.max.bytes": BIG + (4 << 20),
                                      "max.partition.fetch.bytes": BIG + (1 << 20)})
        try:
            c.assign([confluent_kafka.TopicPartition("huge", 0, 0)])
            msg = None
            for _ in range(60):
                msg = c.poll(1.0)
                if msg is not None and msg.error() is None:
                    break
            assert msg is not None and msg.error() is None
            assert (msg.offset(), msg.key(), msg.value() == value) == (0, b"k", True)
        finally:
            c.close()


def test_frame_size_prefix_is_still_checked_for_large_frames() -> None:
    with EmbeddedBroker(CONFIG) as b, socket.create_connection(("127.0.0.1", b.port),
                                                               timeout=10) as s:
        s.sendall(struct.pack(">i", BIG + (3 << 20)) + b"\0" * 100)
        assert s.recv(1) == b""  # closed: over socket.request.max.bytes


@pytest.mark.parametrize("version", range(3, 14))
def test_in_place_produce_decoder_reads_what_kio_reads(version: int) -> None:
    import uuid

    from tidelog.protocol.codec import decode_request, request_class
    from tidelog.protocol.kio_util import make, nested
    from tidelog.protocol.produce_in_place import decode_produce_in_place

    cls = request_class(0, version)
    tcls = nested(cls, "topic_data")
    pcls = nested(tcls, "partition_data")
    batch = build_batch([(1_700_000_000_000, b"k", b"v" * 300)])
    topic = {"topic_id": uuid.uuid4()} if version >= 13 else {"name": "t\u00e9"}
    body = make(cls, transactional_id="tx" if version % 2 else None, acks=-1, timeout=1234,
                topic_data=[make(tcls, **topic, partition_data=[
                    make(pcls, index=0, records=batch), make(pcls, index=3, records=None)]),
                    make(tcls, **topic, partition_data=[])])
    frame = bytearray(request_frame(0, version, 7, body=body)[4:])
    want_header, want = decode_request(bytes(frame))
    header, got = decode_produce_in_place(memoryview(frame), version)
    assert header == want_header
    records = got.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and not records.readonly
    assert bytes(records) == batch
    as_bytes = [[(p.index, None if p.records is None else bytes(p.records))
                 for p in t.partition_data] for t in got.topic_data]
    assert as_bytes == [[(p.index, p.records) for p in t.partition_data] for t in want.topic_data]
    assert (got.transactional_id, got.acks, got.timeout) == (
        want.transactional_id, want.acks, want.timeout)
    assert [getattr(t, "name", None) or t.topic_id for t in got.topic_data] == [
        getattr(t, "name", None) or t.topic_id for t in want.topic_data]
    with pytest.raises(InvalidRequestError):
        decode_produce_in_place(memoryview(frame)[: len(frame) - 40], version)
