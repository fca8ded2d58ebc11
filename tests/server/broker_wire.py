"""Raw-socket helpers for broker tests."""

from __future__ import annotations

import socket
import struct
import uuid

from tidelog.client.conn import BrokerConnection
from tidelog.protocol.codec import request_class
from tidelog.protocol.kio_util import make, nested
from tidelog.records.builder import RecordBatchBuilder
from tidelog.records.compression import CompressionType
from tidelog.testing import EmbeddedBroker


def request_frame(
    api_key: int, version: int, corr: int, body: object = None, **kw: object
) -> bytes:
    """A framed request built with kio (the request body encodes like a response body)."""
    import io

    from kio.serial import entity_writer

    cls = request_class(api_key, version)
    obj = body if body is not None else make(cls, **kw)
    hdr_cls = cls.__header_schema__
    buf = io.BytesIO()
    entity_writer(hdr_cls)(
        buf,
        hdr_cls(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=corr,
            client_id="test",
        ),
    )
    entity_writer(cls)(buf, obj)
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def recv_frame(sock: socket.socket) -> bytes:
    (n,) = struct.unpack(">i", recv_exact(sock, 4))
    return recv_exact(sock, n)


def connect(b: EmbeddedBroker) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
    return s


def decode_response(api_key: int, version: int, frame: bytes) -> object:
    from kio.serial import entity_reader

    from tidelog.protocol.codec import response_class

    cls = response_class(api_key, version)
    offset = 5 if cls.__header_schema__.__version__ >= 1 else 4
    obj, _ = entity_reader(cls)(frame, offset)
    return obj


def error_codes(obj: object) -> list[int]:
    """Every ``error_code`` anywhere in a decoded response, top level and per item."""
    import dataclasses

    out: list[int] = []
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            v = getattr(obj, f.name)
            is_code = f.name in ("error_code", "partition_error_code")
            out.extend([int(v)] if is_code else error_codes(v))
    elif isinstance(obj, tuple):
        for v in obj:
            out.extend(error_codes(v))
    return out


class Wire:
    """A raw connection that sends kio-built requests and decodes the responses."""

    def __init__(self, b: EmbeddedBroker) -> None:
        self.sock = connect(b)
        self.corr = 0

    def send(self, api_key: int, version: int, **kw: object) -> int:
        self.corr += 1
        self.sock.sendall(request_frame(api_key, version, self.corr, **kw))
        return self.corr

    def recv(self, api_key: int, version: int) -> object:
        return decode_response(api_key, version, recv_frame(self.sock))

    def call(self, api_key: int, version: int, **kw: object) -> object:
        self.send(api_key, version, **kw)
        return self.recv(api_key, version)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def produce_body(version: int, topic: str, parts: dict[int, bytes], acks: int = 1) -> object:
    cls = request_class(0, version)
    tcls = nested(cls, "topic_data")
    pcls = nested(tcls, "partition_data")
    return make(
        cls,
        transactional_id=None,
        acks=acks,
        timeout=30000,
        topic_data=(
            make(
                tcls,
                name=topic,
                partition_data=tuple(make(pcls, index=i, records=r) for i, r in parts.items()),
            ),
        ),
    )


def fetch_body(
    version: int,
    topic: str,
    offsets: dict[int, int],
    *,
    max_wait: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 << 20,
    partition_max_bytes: int = 1 << 20,
    isolation_level: int = 0,
) -> object:
    cls = request_class(1, version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    return make(
        cls,
        replica_id=-1,
        max_wait=max_wait,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=(),
        rack_id="",
        topics=(
            make(
                tcls,
                topic=topic,
                partitions=tuple(
                    make(
                        pcls,
                        partition=p,
                        fetch_offset=o,
                        partition_max_bytes=partition_max_bytes,
                        log_start_offset=-1,
                        current_leader_epoch=-1,
                        last_fetched_epoch=-1,
                    )
                    for p, o in offsets.items()
                ),
            ),
        ),
    )


def new_leader_epoch(broker: EmbeddedBroker, topic: str, tid: uuid.UUID, epoch: int) -> None:
    """A LeaderAndIsr keeping the broker sole leader of ``topic``-0 at a new leader epoch."""
    me = broker.broker.node_id
    conn = BrokerConnection("127.0.0.1", broker.port, client_id="controller", timeout_s=10)
    try:
        resp = conn.call(4, 7, {
            "controller_id": me, "controller_epoch": 1, "broker_epoch": -1, "type_": 0,
            "topic_states": [{"topic_name": topic, "topic_id": tid, "partition_states": [
                {"partition_index": 0, "controller_epoch": 1, "leader": me,
                 "leader_epoch": epoch, "isr": [me], "partition_epoch": epoch,
                 "replicas": [me]}]}],
            "live_leaders": [],
        })  # fmt: skip
    finally:
        conn.close()
    assert int(resp.topics[0].partition_errors[0].error_code) == 0


def produce_batch(producer_id: int = -1, epoch: int = -1, seq: int = -1, txn: bool = False,
                  n: int = 1, compression: CompressionType = CompressionType.NONE) -> bytes:
    """A client's batch of ``n`` records of 100 B (a producer's id, epoch and sequence)."""
    b = RecordBatchBuilder(compression, producer_id=producer_id, producer_epoch=epoch,
                           base_sequence=seq, is_transactional=txn)
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"k", b"v" * 100)
    return b.build()


def corrupt_batch() -> bytes:
    """A batch whose CRC no longer matches."""
    batch = bytearray(produce_batch())
    batch[-1] ^= 0xFF
    return bytes(batch)
