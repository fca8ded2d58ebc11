"""The minimal baseline broker: the ceiling of this machine for a Python produce path.

It speaks just enough of Kafka's protocol for a librdkafka producer (ApiVersions, Metadata,
InitProducerId for an idempotent one, Produce) and does only the work no broker can skip: for each batch it checks the CRC-32C,
patches the base offset (one counter per partition) and appends the batch to one file with a
plain write on the event loop; then it answers. No validation of records, no indexes, no
producer state, no fsync: whatever tidelog does beyond this is what its figure costs.
``--file-per-partition`` writes each partition's batches to a file of its own instead, as
Kafka's layout needs (``baseline-files`` in bench/tail_latency.py): what that layout itself
costs a broker, apart from the rest of tidelog's work. ``--spin-us N`` busy-waits N us on
each Produce before answering it (on the monotonic clock, read without a system call: the
loop's CPU unless it is preempted meanwhile): the same broker made as slow as a heavier one,
to see what a broker's CPU per request alone does to the tails (``baseline+N`` in
bench/tail_latency.py).

    python bench/baseline_broker.py --port 9092 --file /tmp/baseline.log

Every topic asked for exists with ``--partitions`` partitions (default 1) led by this broker
(node 0). Run by bench/baseline.py, which loads it and tidelog alternately with the same
librdkafka load, and by bench/tail_latency.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import time
from typing import Any

from tidelog.protocol.codec import decode_request, encode_response, response_class
from tidelog.protocol.fast import ProducePartitionResult, encode_produce_response
from tidelog.protocol.kio_util import make, nested
from tidelog.records.batch import crc32c

try:
    import uvloop  # the event loop tidelog serve runs on when installed
except ImportError:
    uvloop = None

PRODUCE, FETCH, METADATA, API_VERSIONS, INIT_PRODUCER_ID = 0, 1, 3, 18, 22
# Fetch is advertised, never served: librdkafka writes v2 batches (MsgVersion 2) only to a
# broker that lists Fetch v4+ beside Produce v3+
# InitProducerId: an idempotent producer gets producer id 1 (sequences are not checked)
VERSIONS = {PRODUCE: (3, 8), FETCH: (4, 4), METADATA: (0, 12), API_VERSIONS: (0, 4),
            INIT_PRODUCER_ID: (0, 4)}
CORRUPT_MESSAGE = 2
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")


class Log:
    """One file for every partition's batches (``path``), or with ``per_partition`` a file
    per partition as Kafka lays them out (``path``'s folder, ``<topic>-<partition>/``, made
    when a Metadata request first names the topic); the next offset per partition."""

    def __init__(self, path: str, partitions: int = 1, per_partition: bool = False) -> None:
        self.dir = os.path.dirname(path)
        self.per_partition = per_partition
        self.fd = -1 if per_partition else os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.fds: dict[tuple[str, int], int] = {}  # (per partition: made at Metadata)
        self.partitions = partitions  # of every topic
        self.next: dict[tuple[str, int], int] = {}

    def fd_of(self, key: tuple[str, int]) -> int:
        """``key``'s file (per partition), opened or made on the first call."""
        fd = self.fds.get(key)
        if fd is None:
            folder = os.path.join(self.dir, f"{key[0]}-{key[1]}")
            os.makedirs(folder, exist_ok=True)
            fd = self.fds[key] = os.open(os.path.join(folder, "00000000000000000000.log"),
                                         os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return fd

    def append(self, key: tuple[str, int], records: memoryview) -> int:
        """CRC-check each batch, patch its base offset, write: the first offset, or -1.
        The bytes are not copied: each batch is written as its new base offset and the rest
        of the batch as received (one writev)."""
        base = offset = self.next.get(key, 0)
        pos, end = 0, len(records)
        parts: list[bytes | memoryview] = []
        while pos + 61 <= end:
            size = 12 + _I32.unpack_from(records, pos + 8)[0]
            if size < 61 or pos + size > end or records[pos + 16] != 2:
                return -1
            if crc32c(records[pos + 21:pos + size]) != _U32.unpack_from(records, pos + 17)[0]:
                return -1
            parts += (_I64.pack(offset), records[pos + 8:pos + size])
            offset += _I32.unpack_from(records, pos + 23)[0] + 1
            pos += size
        if pos != end:
            return -1
        # (one file: written as before, no call added to the floor's append)
        os.writev(self.fd if self.fd >= 0 else self.fd_of(key), parts)
        self.next[key] = offset
        return base


class Connection(asyncio.Protocol):
    def __init__(self, log: Log, port: int, spin_ns: int = 0) -> None:
        self.log, self.port, self.spin_ns = log, port, spin_ns
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        self.buf += data
        out: list[bytes] = []
        pos = 0
        while len(self.buf) - pos >= 4:
            size = _I32.unpack_from(self.buf, pos)[0]
            if len(self.buf) - pos - 4 < size:
                break
            with memoryview(self.buf) as view:
                frame = bytes(view[pos + 4:pos + 4 + size])  # the one copy of the bytes
            pos += 4 + size
            reply = self.handle(frame)
            if reply is not None:
                out.append(reply)
        del self.buf[:pos]
        if out and self.transport is not None:
            self.transport.writelines(out)

    def handle(self, frame: bytes) -> bytes | None:
        key, version, corr = _I16.unpack_from(frame, 0)[0], _I16.unpack_from(frame, 2)[0], \
            _I32.unpack_from(frame, 4)[0]
        if key == PRODUCE:
            if self.spin_ns:
                spin(self.spin_ns)
            return self.produce(corr, version, memoryview(frame))
        _, request = decode_request(frame)
        if key == METADATA:
            return encode_response(corr, self.metadata(version, request))
        if key == INIT_PRODUCER_ID:
            return encode_response(corr, make(response_class(key, version), throttle_time=0,
                                              error_code=0, producer_id=1, producer_epoch=0))
        return encode_response(corr, api_versions(version))

    def produce(self, corr: int, version: int, frame: memoryview) -> bytes | None:
        """Produce v3-v8 parsed by hand (header v1, then transactional id, acks, timeout,
        topics of partitions of records): the records stay views of the frame."""
        pos = 10 + max(0, _I16.unpack_from(frame, 8)[0])  # past the client id
        pos += 2 + max(0, _I16.unpack_from(frame, pos)[0])  # past the transactional id
        acks = _I16.unpack_from(frame, pos)[0]
        pos += 6
        topics = []
        for _ in range(_I32.unpack_from(frame, pos)[0]):
            n = _I16.unpack_from(frame, pos + 4)[0]
            name = bytes(frame[pos + 6:pos + 6 + n]).decode()
            pos += 6 + n
            parts = []
            for _ in range(_I32.unpack_from(frame, pos)[0]):
                index, size = _I32.unpack_from(frame, pos + 4)[0], _I32.unpack_from(frame, pos + 8)[0]
                pos += 12
                records = frame[pos:pos + max(size, 0)]
                pos += max(size, 0)
                base = self.log.append((name, index), records) if size > 0 else -1
                r = ProducePartitionResult(index)
                if base < 0:
                    r.error_code = CORRUPT_MESSAGE
                else:
                    r.base_offset = base
                parts.append(r)
            topics.append((name, parts))
        if acks == 0:
            return None
        return encode_produce_response(corr, version, topics)

    def metadata(self, version: int, request: Any) -> Any:
        cls = response_class(METADATA, version)
        tcls, pcls = nested(cls, "topics"), nested(nested(cls, "topics"), "partitions")
        parts = tuple(make(pcls, error_code=0, partition_index=i, leader_id=0, leader_epoch=0,
                           replica_nodes=(0,), isr_nodes=(0,), offline_replicas=())
                      for i in range(self.log.partitions))
        names = [t.name for t in request.topics or ()]
        if self.log.per_partition:  # made as a topic is first asked for, as
            for n in names:  # tidelog makes its logs at CreateTopics (before any produce)
                for i in range(self.log.partitions):
                    self.log.fd_of((n, i))
        topics = tuple(make(tcls, error_code=0, name=n, is_internal=False, partitions=parts,
                            topic_authorized_operations=-2147483648) for n in names)
        broker = make(nested(cls, "brokers"), node_id=0, host="127.0.0.1", port=self.port)
        return make(cls, throttle_time=0, brokers=(broker,), cluster_id="baseline",
                    controller_id=0, topics=topics, error_code=0,
                    cluster_authorized_operations=-2147483648)


def api_versions(version: int, versions: dict[int, tuple[int, int]] = VERSIONS) -> Any:
    """ApiVersions advertising ``versions`` (this broker's by default)."""
    cls = response_class(API_VERSIONS, version)
    kcls = nested(cls, "api_keys")
    keys = tuple(make(kcls, api_key=k, min_version=lo, max_version=hi)
                 for k, (lo, hi) in versions.items())
    return make(cls, error_code=0, api_keys=keys, throttle_time=0)


def spin(ns: int) -> None:
    """A busy wait of ``ns`` on the monotonic clock, read in user space (no system call): as
    much of the thread's CPU, less any time it is preempted meanwhile."""
    end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < end:
        pass


async def serve(port: int, path: str, partitions: int = 1, per_partition: bool = False,
                spin_us: int = 0) -> None:
    log = Log(path, partitions, per_partition)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Connection(log, port, spin_us * 1000),
                                      "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--partitions", type=int, default=1, help="of every topic")
    ap.add_argument("--file-per-partition", action="store_true",
                    help="a file per partition in --file's folder, as Kafka lays them out")
    ap.add_argument("--spin-us", type=int, default=0,
                    help="us busy-waited on each Produce before answering it")
    args = ap.parse_args()
    if args.spin_us < 0:
        ap.error("--spin-us must be 0 or more")
    (asyncio.run if uvloop is None else uvloop.run)(
        serve(args.port, args.file, args.partitions, args.file_per_partition, args.spin_us))


if __name__ == "__main__":
    main()
