"""A librdkafka producer and consumer with no Python in their per-record paths, for broker
benchmarks.

confluent-kafka's ``Producer.produce`` costs one Python call per record (~1 us, ~0.6 us
with ``produce_batch``), which caps one producer near 0.8-1.6 M records/s on this kind of
machine: at 100 B both tidelog and Tansu sit at that cap, so a benchmark driven that way
measures the client, not the broker. This module drives the *same* librdkafka (the copy
bundled in the confluent-kafka wheel) through ctypes: ``rd_kafka_produce_batch`` takes
10,000 records per call from one array built before the clock starts, so librdkafka's own
C code is the only per-record client work. Delivery is checked with
``delivery.report.only.error``: only a failed record calls back, and ``rd_kafka_flush``
returning 0 means none is left in flight.

The consumer is the same at the other end: confluent-kafka's ``Consumer.consume`` makes a
Python ``Message`` per record, which caps one consumer near 100 k records/s of 100 B while
either broker idles. ``Consumer`` here is librdkafka's simple (legacy) consumer of one topic
partition: ``rd_kafka_consume_start`` from its first offset, then ``rd_kafka_consume_batch`` fills
an array of message pointers, up to 10,000 per call, until the end offset is in. The
messages are kept (librdkafka's fetch queue limits count what is queued, not what the
application holds) and checked and destroyed with ``rd_kafka_message_destroy`` after the
clock stops: error code, contiguous offsets, bytes.

``Consumer(trace=True)`` keeps librdkafka's ``fetch,protocol`` debug lines (``self.log`` once
closed; bench/fetch_trace.py reads them): librdkafka's own logger writes them to file
descriptor 2, sent to a file from the handle's creation to its close (a log callback into
Python would take the GIL from librdkafka's thread for every line, and the client's own
time would grow with it).
"""

from __future__ import annotations

import ctypes
import glob
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import confluent_kafka as ck

_BATCH = 10_000
_ERR_QUEUE_FULL = -184


class _Message(ctypes.Structure):
    """``rd_kafka_message_t`` (rdkafka.h): the layout is part of librdkafka's ABI."""

    _fields_ = [
        ("err", ctypes.c_int),
        ("rkt", ctypes.c_void_p),
        ("partition", ctypes.c_int32),
        ("payload", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
        ("key", ctypes.c_void_p),
        ("key_len", ctypes.c_size_t),
        ("offset", ctypes.c_int64),
        ("_private", ctypes.c_void_p),
    ]


def _library() -> ctypes.CDLL:
    libs = Path(ck.__file__).resolve().parents[1] / "confluent_kafka.libs"
    found = sorted(glob.glob(str(libs / "librdkafka*.so*")))
    lib = ctypes.CDLL(found[0] if found else "librdkafka.so.1")
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                      ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_conf_set_dr_msg_cb.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_size_t]
    lib.rd_kafka_topic_new.restype = ctypes.c_void_p
    lib.rd_kafka_topic_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    lib.rd_kafka_produce_batch.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int,
                                           ctypes.POINTER(_Message), ctypes.c_int]
    lib.rd_kafka_poll.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_flush.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_topic_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_consume_start.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64]
    lib.rd_kafka_consume_stop.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.rd_kafka_consume_batch.restype = ctypes.c_ssize_t
    lib.rd_kafka_consume_batch.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int,
                                           ctypes.c_void_p, ctypes.c_size_t]
    lib.rd_kafka_message_destroy.argtypes = [ctypes.c_void_p]
    i64p = ctypes.POINTER(ctypes.c_int64)
    lib.rd_kafka_query_watermark_offsets.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                                     ctypes.c_int32, i64p, i64p, ctypes.c_int]
    return lib


def _handle(lib: ctypes.CDLL, kind: int, conf: int, settings: dict[str, str]) -> int:
    """``rd_kafka_new`` of ``kind`` (0 producer, 1 consumer) from ``conf`` and ``settings``."""
    err = ctypes.create_string_buffer(512)
    for k, v in settings.items():
        if lib.rd_kafka_conf_set(conf, k.encode(), str(v).encode(), err, 512) != 0:
            raise ValueError(f"{k}={v}: {err.value.decode()}")
    rk = lib.rd_kafka_new(kind, conf, err, 512)
    if not rk:
        raise RuntimeError(err.value.decode())
    return int(rk)


_DR_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(_Message), ctypes.c_void_p)


class Producer:
    """One librdkafka producer handle for one topic partition."""

    def __init__(self, bootstrap: str, topic: str, partition: int = 0,
                 config: dict[str, str] | None = None) -> None:
        self._lib = lib = _library()
        conf = lib.rd_kafka_conf_new()
        # failures only: a successful delivery costs no callback, a failed one is counted
        self.failed, self.first_error = 0, 0
        self._on_failure = _DR_CB(self._count_failure)  # referenced as long as the handle
        lib.rd_kafka_conf_set_dr_msg_cb(conf, self._on_failure)
        settings = {"bootstrap.servers": bootstrap, "delivery.report.only.error": "true",
                    "queue.buffering.max.messages": "2000000",
                    "queue.buffering.max.kbytes": "2097151", **(config or {})}
        self._rk = _handle(lib, 0, conf, settings)  # RD_KAFKA_PRODUCER
        self._rkt = lib.rd_kafka_topic_new(self._rk, topic.encode(), None)
        self.bootstrap, self.topic, self.partition = bootstrap, topic, partition

    def _count_failure(self, _rk: object, msg: object, _opaque: object) -> None:
        self.failed += 1
        self.first_error = self.first_error or msg.contents.err  # type: ignore[attr-defined]

    def produce(self, value: bytes, n: int, timeout_s: float = 120) -> float:
        """Send ``n`` copies of ``value`` and wait for them all: the seconds it took."""
        buf = ctypes.create_string_buffer(value, len(value))
        one = _Message(payload=ctypes.addressof(buf), len=len(value))
        # librdkafka copies each struct's fields into its own message (flags 0: no copy of
        # the payload, which outlives the producer), so one array serves every call
        msgs = (_Message * _BATCH).from_buffer_copy(bytes(one) * _BATCH)
        t0 = time.perf_counter()
        sent = 0
        while sent < n:
            cnt = min(_BATCH, n - sent)
            done = self._lib.rd_kafka_produce_batch(self._rkt, self.partition, 0, msgs, cnt)
            if done < cnt:  # queue full: rare with the queue sized above; resend the rest
                self._lib.rd_kafka_poll(self._rk, 10)
            sent += done
        left = self._lib.rd_kafka_flush(self._rk, int(timeout_s * 1000))
        dt = time.perf_counter() - t0
        if left != 0:
            raise RuntimeError(f"flush: librdkafka error {left}")
        if self.failed:
            raise RuntimeError(f"{self.failed} records not delivered: error {self.first_error}")
        return dt

    def close(self) -> None:
        self._lib.rd_kafka_flush(self._rk, 30_000)
        self._lib.rd_kafka_topic_destroy(self._rkt)
        self._lib.rd_kafka_destroy(self._rk)


class Consumer:
    """librdkafka's simple consumer of one topic partition (no group membership)."""

    def __init__(self, bootstrap: str, topic: str, partition: int = 0,
                 config: dict[str, str | int] | None = None, trace: bool = False) -> None:
        self._lib = lib = _library()
        settings = {"bootstrap.servers": bootstrap, "enable.auto.commit": "false",
                    "enable.auto.offset.store": "false",
                    **{k: str(v) for k, v in (config or {}).items()}}
        self.log: list[str] = []  # librdkafka's lines, with trace (once closed)
        self._traced = _stderr_lines(self.log) if trace else None
        if self._traced is not None:
            settings["debug"] = "fetch,protocol"
            self._traced.__enter__()
        self._rk = _handle(lib, 1, lib.rd_kafka_conf_new(), settings)  # RD_KAFKA_CONSUMER
        self._rkt = lib.rd_kafka_topic_new(self._rk, topic.encode(), None)
        self.topic, self.partition = topic, partition
        self.records = self.bytes = 0
        self.cpu = 0.0  # this process's CPU seconds (all threads) over the timed read
        # the thread of this process with the most CPU over the read: (name, seconds on a
        # CPU, seconds runnable but waiting for one), from /proc/self/task/*/schedstat
        self.busiest = ("", 0.0, 0.0)

    def watermarks(self, timeout_s: float = 30) -> tuple[int, int]:
        """The partition's (low, high) offsets, asked of its leader (ListOffsets)."""
        low, high = ctypes.c_int64(), ctypes.c_int64()
        err = self._lib.rd_kafka_query_watermark_offsets(
            self._rk, self.topic.encode(), self.partition, ctypes.byref(low),
            ctypes.byref(high), int(timeout_s * 1000))
        if err:
            raise RuntimeError(f"rd_kafka_query_watermark_offsets: error {err}")
        return low.value, high.value

    def consume(self, n: int | None = None, stall_s: float = 10) -> float:
        """Read ``n`` records of the partition from its first offset (default: up to its
        end offset as it stands now; Tansu's memory storage answered an end offset short of
        what it holds, 199,161 of 200,001 records, so pass ``n`` to read all of it): the
        seconds from ``rd_kafka_consume_start`` to the last record in hand. Raises if no
        record comes for ``stall_s``, a record is an error, or offsets are not contiguous;
        ``self.records`` and ``self.bytes`` are then what was read, ``self.cpu`` the
        client's CPU over the timed read.

        The watermarks are asked first, outside the clock: that also fetches the topic's
        metadata and connects to the leader, so the read starts on the leader at once
        (a partition started before its leader is known waits out librdkafka's fixed
        500 ms offset-query retry, as long as the whole read at 100 B)."""
        low, high = self.watermarks()
        n = high - low if n is None else n
        lib, rkt, part = self._lib, self._rkt, self.partition
        held = (ctypes.c_void_p * n)()
        base, width = ctypes.addressof(held), ctypes.sizeof(ctypes.c_void_p)
        got = 0
        threads = _thread_times()
        t0, p0 = time.perf_counter(), time.process_time()
        if lib.rd_kafka_consume_start(rkt, part, low) != 0:
            raise RuntimeError("rd_kafka_consume_start failed")
        while got < n:
            cnt = lib.rd_kafka_consume_batch(rkt, part, int(stall_s * 1000),
                                             base + got * width, min(_BATCH, n - got))
            if cnt <= 0:
                break
            got += cnt
        dt, self.cpu = time.perf_counter() - t0, time.process_time() - p0
        self.busiest = _busiest(threads, _thread_times())
        lib.rd_kafka_consume_stop(rkt, part)
        self._check(held, got, low, n)
        return dt

    def _check(self, held: ctypes.Array[ctypes.c_void_p], got: int, low: int, n: int
               ) -> None:
        """Every message in hand: no error, offsets one apart from ``low``; destroyed."""
        first_bad, prev = "", low - 1
        for ptr in held[:got]:
            m = _Message.from_address(ptr or 0)  # every pointer up to got was filled
            if m.err and not first_bad:
                first_bad = f"error {m.err} at offset {m.offset}"
            elif m.offset != prev + 1 and not first_bad:
                first_bad = f"offset {m.offset} after {prev}"
            prev = m.offset
            self.bytes += m.len
            self.records += 1
            self._lib.rd_kafka_message_destroy(ptr)
        if got < n:
            raise RuntimeError(f"consumer stalled after {got} of {n}")
        if first_bad:
            raise RuntimeError(first_bad)

    def close(self) -> None:
        self._lib.rd_kafka_topic_destroy(self._rkt)
        self._lib.rd_kafka_destroy(self._rk)
        if self._traced is not None:  # librdkafka's lines end with its handle
            self._traced.__exit__(None, None, None)
            self._traced = None


def _thread_times() -> dict[str, tuple[str, int, int]]:
    """This process's threads: id -> (name, ns on a CPU, ns waiting on a run queue)."""
    out = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            run, wait = (task / "schedstat").read_text().split()[:2]
            out[task.name] = ((task / "comm").read_text().strip(), int(run), int(wait))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return out


def _busiest(before: dict[str, tuple[str, int, int]], after: dict[str, tuple[str, int, int]]
             ) -> tuple[str, float, float]:
    """The thread with the most CPU between two ``_thread_times``: (name, CPU s, wait s)."""
    best = ("", 0.0, 0.0)
    for tid, (name, run, wait) in after.items():
        _, run0, wait0 = before.get(tid, (name, 0, 0))
        if (run - run0) / 1e9 > best[1]:
            best = (name, (run - run0) / 1e9, (wait - wait0) / 1e9)
    return best


@contextmanager
def _stderr_lines(into: list[str]) -> Iterator[None]:
    """What is written to file descriptor 2 meanwhile (librdkafka's logger), as lines."""
    sys.stderr.flush()
    with tempfile.TemporaryFile() as f:
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            into.extend(f.read().decode(errors="replace").splitlines())


def performance_latencies(binary: str, bootstrap: str, topic: str, rate: int,
                          seconds: float, warmup: float, partitions: int, size: int = 100
                          ) -> tuple[list[float], int, int]:
    """librdkafka's own load generator as goal 4 names it: ``rdkafka_performance -P -r rate
    -a -1 -l`` (idempotence, linger.ms 0, ``size``-byte values; one partition: ``-p 0``,
    more: librdkafka's partitioner spreads the records), ``rate * (warmup + seconds)``
    records. Its ``-r`` polls in a loop until the next record is due (a busy core). Returns
    (its per-record produce->delivery latencies in ms, in delivery order, without the
    first ``rate * warmup``; records that failed; records sent)."""
    skip, n = int(rate * warmup), int(rate * (warmup + seconds))
    with tempfile.TemporaryDirectory(prefix="rdkperf-") as d:
        path = os.path.join(d, "latency")
        cmd = [binary, "-P", "-t", topic, "-b", bootstrap, "-s", str(size), "-c", str(n),
               "-r", str(rate), "-a", "-1", "-l", "-A", path, "-u",
               "-X", "enable.idempotence=true", "-X", "linger.ms=0"]
        if partitions == 1:
            cmd += ["-p", "0"]
        done = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=warmup + seconds + 120)
        if done.returncode != 0:
            raise RuntimeError(f"rdkafka_performance failed: {done.stderr[-2000:]}")
        with open(path) as f:
            lat = [int(x) / 1000 for x in f.read().split()]
    return lat[skip:], _table_column(done.stdout, "dr_err") + n - len(lat), n


def _table_column(out: str, name: str) -> int:
    """The last row's ``name`` column of rdkafka_performance's ``-u`` table (0 if none)."""
    col, value = -1, 0
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if name in cells:
            col = cells.index(name)
        elif 0 <= col < len(cells) and cells[col].isdigit():
            value = int(cells[col])
    return value
