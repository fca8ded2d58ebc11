"""Pipelined produce of record batches built from one template, on tidelog's own sockets: the
engine of ``tidelog perf produce`` (its default ``--client tidelog``).

kafka-producer-perf-test.sh sends the same payload ``--num-records`` times. Every full batch
of such records is the same bytes but for its header (timestamps, sequence, CRC), so the
records are encoded once (:class:`BatchTemplate`) and each batch is the template's first
``k`` records behind a fresh 61-byte header: no Python work per record. Batches are sent as
Produce requests, up to ``max.in.flight.requests.per.connection`` unanswered per broker, and
each answer is read as soon as it is there, so a batch's latency (send to acknowledgement) is
that of every record in it.

The few requests are encoded here by hand (ApiVersions v0, Metadata v4, InitProducerId v0,
Produce v3-v8, all non-flexible): importing kio, which the general client uses, costs more
than the whole run of a 200,000-record test. Plain connections only (TLS and SASL live in
the general client and in librdkafka).
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections import deque

from tidelog.util.crc import load_crc32c

from .bootstrap import parse_bootstrap

Buffer = bytes | bytearray | memoryview

API_PRODUCE, API_METADATA, API_VERSIONS, API_INIT_PRODUCER_ID = 0, 3, 18, 22
PRODUCE_VERSIONS = (3, 8)  # RecordBatch v2 from 3; flexible (not written here) from 9
METADATA_VERSION = 4  # the first with allow_auto_topic_creation
RECORD_BATCH_OVERHEAD = 61
CRC_START = 21
# error codes this module names itself (the rest are named through kio only when they occur)
LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION = 5, 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")


crc32c = load_crc32c()


class ProduceError(Exception):
    """A broker's error code with what was being done; code -1 for a failure on this side
    (a connection refused or closed, a timeout)."""

    def __init__(self, code: int, context: str, message: str | None = None) -> None:
        self.code = code
        text = context if code == -1 else f"{context}: {error_name(code)}"
        super().__init__(text + (f": {message}" if message else ""))


def error_name(code: int) -> str:
    """Kafka's name of an error code, ``UPPER_CASE (n)``."""
    from kio.schema.errors import ErrorCode  # only on a failure: kio takes ~0.3 s to import

    try:
        return f"{ErrorCode(code).name.upper()} ({code})"
    except ValueError:
        return f"UNKNOWN_ERROR_CODE ({code})"


def _varint(v: int) -> bytes:
    """Zig-zag varint, as a record's fields are written."""
    z = (v << 1) ^ (v >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _string(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


class BatchTemplate:
    """Records ``0..max_records-1`` of one value (no key, no headers, timestamp delta 0)
    encoded once; the first ``k`` of them are the records of any ``k``-record batch."""

    def __init__(self, value: bytes, batch_num_messages: int, batch_size: int) -> None:
        tail = b"\x01" + _varint(len(value)) + value + b"\x00"  # null key, value, no headers
        parts: list[bytes] = []
        self.ends = [0]
        total = RECORD_BATCH_OVERHEAD
        for i in range(batch_num_messages):
            body = b"\x00\x00" + _varint(i) + tail  # attributes, timestamp delta, offset delta
            record = _varint(len(body)) + body
            if i and total + len(record) > batch_size:
                break  # librdkafka's batch.size: a batch holds at least one record
            total += len(record)
            parts.append(record)
            self.ends.append(self.ends[-1] + len(record))
        self.records = b"".join(parts)
        self.max_records = len(parts)

    def write(self, out: bytearray, at: int, k: int, timestamp: int, producer_id: int,
              producer_epoch: int, base_sequence: int) -> None:
        """Batch of the first ``k`` records into ``out[at:]`` (``batch_size(k)`` bytes)."""
        size = self.ends[k]
        _BATCH_HEADER.pack_into(out, at, 0, RECORD_BATCH_OVERHEAD - 12 + size, -1, 2, 0, 0,
                                k - 1, timestamp, timestamp, producer_id, producer_epoch,
                                base_sequence, k)  # fmt: skip
        start = at + RECORD_BATCH_OVERHEAD
        out[start : start + size] = memoryview(self.records)[:size]
        crc = crc32c(memoryview(out)[at + CRC_START : start + size])
        _CRC.pack_into(out, at + 17, crc)

    def batch_size(self, k: int) -> int:
        return RECORD_BATCH_OVERHEAD + self.ends[k]


class _Reader:
    """Big-endian fields of one response, front to back."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, st: struct.Struct) -> int:
        (v,) = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return int(v)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def boolean(self) -> bool:
        self.pos += 1
        return self.data[self.pos - 1] != 0

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        self.pos += n
        return self.data[self.pos - n : self.pos].decode()


class Sent:
    """One Produce request: its batch, when its first record was due, and its answer.
    (Plain classes here, not dataclasses: importing dataclasses is ~10 ms of start-up.)"""

    __slots__ = ("acked", "base_offset", "correlation", "created", "error", "message",
                 "partition", "records")  # fmt: skip

    def __init__(self, correlation: int, partition: int, records: int, created: float) -> None:
        self.correlation = correlation
        self.partition = partition
        self.records = records
        self.created = created
        self.acked = 0.0
        self.error = 0
        self.message: str | None = None
        self.base_offset = -1


class _Connection:
    """One socket to one broker; requests are written in order and answered in order."""

    __slots__ = ("address", "client_id", "correlation", "in_flight", "inbox", "sock",
                 "versions")  # fmt: skip

    def __init__(self, sock: socket.socket, address: str, client_id: str) -> None:
        self.sock = sock
        self.address = address
        self.client_id = client_id
        self.correlation = 0
        self.versions: dict[int, tuple[int, int]] = {}
        self.in_flight: deque[Sent] = deque()
        self.inbox = bytearray()

    @classmethod
    def open(cls, host: str, port: int, client_id: str, timeout_s: float) -> _Connection:
        sock = _connect(host, port, timeout_s)
        conn = cls(sock, f"{host}:{port}", client_id)
        r = conn.call(API_VERSIONS, 0, b"")
        _check(r.i16(), f"ApiVersions to {conn.address}")
        for _ in range(r.i32()):
            key, lo, hi = r.i16(), r.i16(), r.i16()
            conn.versions[key] = (lo, hi)
        return conn

    def version(self, api_key: int, lo: int, hi: int) -> int:
        theirs = self.versions.get(api_key, (0, -1))
        v = min(hi, theirs[1])
        if v < max(lo, theirs[0]):
            raise ProduceError(35, f"API {api_key} v{lo}-v{hi} on {self.address}")
        return v

    def frame_prefix(self, api_key: int, version: int, size: int) -> bytes:
        """Size and request header v1 of a frame whose body is ``size`` bytes."""
        self.correlation = (self.correlation + 1) & 0x7FFFFFFF
        header = struct.pack(">hhi", api_key, version, self.correlation) + _string(self.client_id)
        return _I32.pack(len(header) + size) + header

    def call(self, api_key: int, version: int, body: bytes) -> _Reader:
        """One request and its response, with nothing else in flight."""
        self.send(self.frame_prefix(api_key, version, len(body)) + body)
        correlation, reader = self.receive()
        if correlation != self.correlation:
            raise ProduceError(-1, f"correlation id {correlation} != {self.correlation}")
        return reader

    def send(self, frame: Buffer) -> None:
        try:
            self.sock.sendall(frame)
        except OSError as e:
            raise ProduceError(-1, f"send to {self.address}", str(e)) from None

    def receive(self, block: bool = True) -> tuple[int, _Reader]:
        """The next whole response frame: (correlation id, reader after the header);
        (-1, empty) when ``block`` is false and none has fully arrived."""
        while True:
            if len(self.inbox) >= 4:
                (size,) = _I32.unpack_from(self.inbox, 0)
                if len(self.inbox) >= 4 + size:
                    payload = bytes(self.inbox[4 : 4 + size])
                    del self.inbox[: 4 + size]
                    reader = _Reader(payload)
                    return reader.i32(), reader
            if not block and not select.select([self.sock], [], [], 0)[0]:
                return -1, _Reader(b"")
            try:  # a blocking read waits up to the socket's timeout (request.timeout.ms)
                chunk = self.sock.recv(1 << 16)
            except OSError as e:
                raise ProduceError(-1, f"receive from {self.address}", str(e)) from None
            if not chunk:
                raise ProduceError(-1, f"receive from {self.address}", "connection closed")
            self.inbox += chunk


def _connect(host: str, port: int, timeout_s: float) -> socket.socket:
    """socket.create_connection, with an ASCII host looked up as bytes: getaddrinfo encodes a
    str through the idna codec, whose import is ~7 ms of start-up."""
    error: OSError = OSError(f"no address for {host}")
    name = host.encode() if host.isascii() else host
    try:
        addresses = socket.getaddrinfo(name, port, 0, socket.SOCK_STREAM)
    except OSError as e:
        raise ProduceError(-1, f"connect to {host}:{port}", str(e)) from None
    for family, kind, proto, _, address in addresses:
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout_s)
            sock.connect(address)
        except OSError as e:
            sock.close()
            error = e
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    raise ProduceError(-1, f"connect to {host}:{port}", str(error))


def _check(code: int, context: str) -> None:
    if code:
        raise ProduceError(code, context)


class PipelinedProducer:
    """Batches of one topic's records to their partitions' leaders, pipelined: up to
    ``max_in_flight`` unanswered Produce requests per broker, answers read as they arrive.
    ``done`` collects every request once answered (at once for acks=0, which has no answer).
    No retries: a batch the broker refuses is reported with its error code."""

    def __init__(self, bootstrap: str, topic: str, *, acks: int, request_timeout_ms: int,
                 max_in_flight: int, client_id: str, idempotent: bool,
                 metadata_timeout_s: float = 30.0) -> None:
        self.topic = topic
        self.acks = acks
        self.timeout_ms = request_timeout_ms
        self.timeout_s = request_timeout_ms / 1000
        self.max_in_flight = max(1, max_in_flight)
        self.client_id = client_id
        self.conns: dict[int, _Connection] = {}
        self.done: list[Sent] = []
        self.producer_id, self.producer_epoch = -1, -1
        self.sequences: dict[int, int] = {}
        first = self._bootstrap(bootstrap)
        self.brokers, self.leaders = self._metadata(first, time.monotonic() + metadata_timeout_s)
        for node, address in self.brokers.items():
            if f"{address[0]}:{address[1]}" == first.address:
                self.conns[node] = first
        if idempotent:
            self._init_producer_id(first)
        if first not in self.conns.values():
            first.sock.close()

    @property
    def partitions(self) -> list[int]:
        return sorted(self.leaders)

    def _bootstrap(self, servers: str) -> _Connection:
        error: ProduceError | None = None
        for host, port in parse_bootstrap(servers):
            try:
                return _Connection.open(host, port, self.client_id, self.timeout_s)
            except ProduceError as e:
                error = e
        assert error is not None
        raise error

    def _metadata(self, conn: _Connection, deadline: float
                  ) -> tuple[dict[int, tuple[str, int]], dict[int, int]]:
        """Brokers and partition leaders of the topic, which the broker creates when it is
        missing and auto.create.topics.enable is on; waits out a new topic's election."""
        version = conn.version(API_METADATA, METADATA_VERSION, METADATA_VERSION)
        body = _I32.pack(1) + _string(self.topic) + b"\x01"
        while True:
            r = conn.call(API_METADATA, version, body)
            r.i32()  # throttle_time_ms
            brokers: dict[int, tuple[str, int]] = {}
            for _ in range(r.i32()):
                node, host, port, _rack = r.i32(), r.string() or "", r.i32(), r.string()
                brokers[node] = (host, port)
            r.string(), r.i32()  # cluster_id, controller_id
            leaders: dict[int, int] = {}
            error = 0
            for _ in range(r.i32()):
                error, _name, _internal = r.i16(), r.string(), r.boolean()
                for _ in range(r.i32()):
                    p_error, index, leader = r.i16(), r.i32(), r.i32()
                    for _ in range(r.i32()):
                        r.i32()  # replica_nodes
                    for _ in range(r.i32()):
                        r.i32()  # isr_nodes
                    error = error or p_error
                    leaders[index] = leader
            if not error and leaders and all(v in brokers for v in leaders.values()):
                return brokers, leaders
            if error not in (0, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION) or (
                time.monotonic() > deadline
            ):
                raise ProduceError(error or LEADER_NOT_AVAILABLE, f"Metadata of {self.topic}")
            time.sleep(0.1)  # retry.backoff.ms: a new topic's leader is being elected

    def _init_producer_id(self, conn: _Connection) -> None:
        r = conn.call(API_INIT_PRODUCER_ID, conn.version(API_INIT_PRODUCER_ID, 0, 0),
                      _string(None) + _I32.pack(60_000))
        r.i32()  # throttle_time_ms
        _check(r.i16(), "InitProducerId")
        self.producer_id, self.producer_epoch = r.i64(), r.i16()

    def _conn(self, node: int) -> _Connection:
        conn = self.conns.get(node)
        if conn is None:
            host, port = self.brokers[node]
            conn = self.conns[node] = _Connection.open(host, port, self.client_id, self.timeout_s)
        return conn

    def send(self, partition: int, template: BatchTemplate, k: int, created: float) -> None:
        """The template's first ``k`` records as one batch to ``partition``; ``created`` is
        when its first record was due (time.monotonic())."""
        conn = self._conn(self.leaders[partition])
        while len(conn.in_flight) >= self.max_in_flight:
            self._read_one(conn, block=True)
        self.poll()
        seq = -1
        if self.producer_id >= 0:
            seq = self.sequences.get(partition, 0)
            self.sequences[partition] = (seq + k) & 0x7FFFFFFF
        size = template.batch_size(k)
        fields = (_string(None) + struct.pack(">hii", self.acks, self.timeout_ms, 1)
                  + _string(self.topic) + struct.pack(">iii", 1, partition, size))  # fmt: skip
        prefix = conn.frame_prefix(API_PRODUCE, conn.version(API_PRODUCE, *PRODUCE_VERSIONS),
                                   len(fields) + size) + fields  # fmt: skip
        frame = bytearray(len(prefix) + size)
        frame[: len(prefix)] = prefix
        template.write(frame, len(prefix), k, int(time.time() * 1000), self.producer_id,
                       self.producer_epoch, seq)  # fmt: skip
        conn.send(frame)
        sent = Sent(conn.correlation, partition, k, created)
        if self.acks == 0:  # no answer comes: done once written, as Kafka's producer has it
            sent.acked = time.monotonic()
            self.done.append(sent)
        else:
            conn.in_flight.append(sent)

    def poll(self, timeout: float = 0.0) -> None:
        """Read every answer already there; with ``timeout``, first wait up to that long
        for one to arrive."""
        busy = [c for c in self.conns.values() if c.in_flight]
        if timeout > 0:
            if not busy:
                time.sleep(timeout)  # the throttle's wait, with nothing to read meanwhile
                return
            select.select([c.sock for c in busy], [], [], timeout)
        for conn in busy:
            while conn.in_flight and self._read_one(conn, block=False):
                pass

    def flush(self) -> None:
        for conn in self.conns.values():
            while conn.in_flight:
                self._read_one(conn, block=True)

    def close(self) -> None:
        for conn in self.conns.values():
            conn.sock.close()
        self.conns.clear()

    def _read_one(self, conn: _Connection, block: bool) -> bool:
        correlation, r = conn.receive(block)
        if correlation < 0:
            return False
        sent = conn.in_flight.popleft()
        sent.acked = time.monotonic()
        if correlation != sent.correlation:
            raise ProduceError(-1, f"correlation id {correlation} != {sent.correlation}")
        version = conn.version(API_PRODUCE, *PRODUCE_VERSIONS)
        for _ in range(r.i32()):  # topics: one
            r.string()
            for _ in range(r.i32()):  # partitions: one
                r.i32()
                sent.error, sent.base_offset = r.i16(), r.i64()
                r.i64()  # log_append_time_ms
                if version >= 5:
                    r.i64()  # log_start_offset
                if version >= 8:
                    for _ in range(r.i32()):
                        r.i32(), r.string()  # record_errors: batch index and message
                    sent.message = r.string()
        self.done.append(sent)
        return True
