"""A librdkafka producer with no Python in its per-record path, for broker benchmarks.

confluent-kafka's ``Producer.produce`` costs one Python call per record (~1 us, ~0.6 us
with ``produce_batch``), which caps one producer near 0.8-1.6 M records/s on this kind of
machine: at 100 B both tidelog and Tansu sit at that cap, so a benchmark driven that way
measures the client, not the broker. This module drives the *same* librdkafka (the copy
bundled in the confluent-kafka wheel) through ctypes: ``rd_kafka_produce_batch`` takes
10,000 records per call from one array built before the clock starts, so librdkafka's own
C code is the only per-record client work. Delivery is checked with
``delivery.report.only.error``: only a failed record calls back, and ``rd_kafka_flush``
returning 0 means none is left in flight.
"""

from __future__ import annotations

import ctypes
import glob
import time
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
    return lib


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
        err = ctypes.create_string_buffer(512)
        for k, v in settings.items():
            if lib.rd_kafka_conf_set(conf, k.encode(), str(v).encode(), err, 512) != 0:
                raise ValueError(f"{k}={v}: {err.value.decode()}")
        self._rk = lib.rd_kafka_new(0, conf, err, 512)  # RD_KAFKA_PRODUCER
        if not self._rk:
            raise RuntimeError(err.value.decode())
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
