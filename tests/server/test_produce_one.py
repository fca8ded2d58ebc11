"""The common Produce answered in one native call (server/produce_one.py,
_native/produce_now.c) answers and writes byte for byte as its twin, the handler's
``handle_now`` path: two brokers get the same requests over real sockets, one through the
native call and one without it, and send back the same bytes and keep the same log files.
The requests are the common shape and each one the native call must decline (to the twin,
nothing changed) or hand back once it appended (a segment to roll, a due flush, a failed
write)."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from broker_wire import (
    connect,
    corrupt_batch,
    decode_response,
    produce_batch,
    produce_body,
    recv_frame,
    request_frame,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.records.compression import CompressionType
from tidelog.server import connection_now
from tidelog.testing.embedded import EmbeddedBroker

NATIVE = connection_now.produce_one_now
pytestmark = pytest.mark.skipif(NATIVE is None, reason="native core not built")


# (version, topic, {partition: records}, acks, what the native call does with it)
REQUESTS = [
    (9, "t", {0: produce_batch()}, 1, "declined"),  # "t" unknown: the twin creates it
    (9, "t", {0: produce_batch()}, 1, "answered"),
    (9, "t", {0: produce_batch(n=3)}, -1, "answered"),
    (3, "t", {0: produce_batch()}, -1, "answered"),  # not flexible
    (8, "t", {0: produce_batch()}, 1, "answered"),
    (9, "t", {0: produce_batch(7, 0, 0)}, -1, "declined"),  # a new producer: the twin's entry
    (9, "t", {0: produce_batch(7, 0, 1)}, -1, "answered"),  # its next batch
    (9, "t", {0: produce_batch(7, 0, 1)}, -1, "declined"),  # a duplicate of it
    (9, "t", {0: produce_batch(7, 0, 5)}, -1, "declined"),  # out of sequence
    (9, "t", {0: produce_batch(7, 0, 2, n=4)}, 1, "answered"),
    (9, "t", {0: produce_batch(9, 0, 0, txn=True)}, 1, "declined"),  # transactional
    (9, "t", {0: produce_batch(compression=CompressionType.GZIP)}, 1, "declined"),
    (9, "t", {0: produce_batch(compression=CompressionType.LZ4, n=5)}, -1, "declined"),
    (9, "t", {0: b""}, 1, "declined"),  # empty
    (9, "t", {0: corrupt_batch()}, 1, "declined"),
    (9, "t", {3: produce_batch()}, 1, "declined"),  # no such partition
    (9, "t", {0: produce_batch()}, 2, "declined"),  # invalid acks
    (9, "__consumer_offsets", {0: produce_batch()}, 1, "declined"),  # internal
    (9, "t", {0: produce_batch(), 1: produce_batch()}, -1, "declined"),  # two partitions
    (9, "t", {0: b"\x00" * 30}, 1, "declined"),  # shorter than a batch header
    (9, "t", {0: produce_batch(9, 0, 0, txn=True)[:40]}, 1, "declined"),  # a header, cut
    (9, "t", {0: produce_batch()}, -1, "answered"),
]


class Outcomes:
    """The native call standing in for itself, counting what it did with each request."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, *args: Any) -> Any:
        out = NATIVE(*args)  # type: ignore[misc]
        self.seen.append("answered" if type(out) is bytes else "declined" if out is None
                         else f"rest {out[3]}")
        return out


@pytest.fixture
def brokers() -> Iterator[tuple[EmbeddedBroker, EmbeddedBroker]]:
    with EmbeddedBroker() as native, EmbeddedBroker() as twin:
        yield native, twin


def _answer(sock: socket.socket, corr: int, version: int, topic: str,
            parts: dict[int, bytes], acks: int) -> bytes:
    sock.sendall(request_frame(0, version, corr, produce_body(version, topic, parts, acks)))
    return recv_frame(sock)


def _both(monkeypatch: pytest.MonkeyPatch, outcomes: Outcomes, a: socket.socket,
          b: socket.socket) -> Callable[..., tuple[bytes, bytes]]:
    """Each request to the native broker through ``outcomes``, then to the twin's without."""
    corr = 0

    def ask(version: int, topic: str, parts: dict[int, bytes], acks: int
            ) -> tuple[bytes, bytes]:
        nonlocal corr
        corr += 1
        monkeypatch.setattr(connection_now, "produce_one_now", outcomes)
        got = _answer(a, corr, version, topic, parts, acks)
        monkeypatch.setattr(connection_now, "produce_one_now", None)
        want = _answer(b, corr, version, topic, parts, acks)
        assert struct.unpack_from(">i", got)[0] == corr
        return got, want

    return ask


def _segments(b: EmbeddedBroker, topic: str) -> dict[str, bytes]:
    """The partition's segment files (.log and .index), by name."""
    rm = b.broker.replica_manager
    lg = next(p.log for tp, p in rm.partitions.items() if tp == (topic, 0))
    return {f: (lg.dir / f).read_bytes() for f in sorted(os.listdir(lg.dir))
            if f.endswith((".log", ".index"))}


def test_same_answers_and_logs_natively_and_without(
        brokers: tuple[EmbeddedBroker, EmbeddedBroker],
        monkeypatch: pytest.MonkeyPatch) -> None:
    native, twin = brokers
    outcomes = Outcomes()
    with connect(native) as a, connect(twin) as b:
        ask = _both(monkeypatch, outcomes, a, b)
        for version, topic, parts, acks, _ in REQUESTS:
            got, want = ask(version, topic, parts, acks)
            assert got == want, (version, topic, sorted(parts), acks)
    assert outcomes.seen == [how for *_, how in REQUESTS]
    assert _segments(native, "t") == _segments(twin, "t")
    hw = [br.broker.replica_manager.partitions[("t", 0)].log.high_watermark
          for br in brokers]
    assert hw == [21, 21]
    # BytesIn, MessagesIn, the produce requests: counted alike (the native call bumps them)
    stats = [br.broker.replica_manager.topic_stats for br in brokers]
    assert stats[0] is not None and stats[1] is not None
    mine, theirs = (s.topic("t").as_dict() for s in stats)
    assert mine == theirs and mine["messages_in"] == 21, mine
    assert stats[0].all_topics.as_dict() == stats[1].all_topics.as_dict()


def test_rolls_and_due_flushes_are_the_twins(
        brokers: tuple[EmbeddedBroker, EmbeddedBroker],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment of 1 KiB rolls every few batches (the native append declines the batch
    that does not fit, the twin rolls); flush.messages 1 makes every flush due (declined
    before the append: the HW waits for the group commit). Same answers, same segments."""
    for br in brokers:
        async def create(b: EmbeddedBroker = br) -> None:
            b.broker.replica_manager.create_topic("r", 1, {"segment.bytes": "1024"})
            b.broker.replica_manager.create_topic("f", 1, {"flush.messages": "1"})
        br.run(create())
    native, twin = brokers
    outcomes = Outcomes()
    with connect(native) as a, connect(twin) as b:
        ask = _both(monkeypatch, outcomes, a, b)
        for i in range(24):
            for topic in ("r", "f"):
                got, want = ask(9, topic, {0: produce_batch(5, 0, i)}, -1 if i % 3 else 1)
                assert got == want
    rolled = outcomes.seen[0::2]
    assert "answered" in rolled and "declined" in rolled, rolled
    assert set(outcomes.seen[1::2]) == {"declined"}
    assert len(_segments(native, "r")) > 4
    for topic in ("r", "f"):
        assert _segments(native, topic) == _segments(twin, topic)


def test_a_failed_write_is_answered_as_the_twin_answers(
        brokers: tuple[EmbeddedBroker, EmbeddedBroker],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The active segment's file closed under the log (its descriptor pointing nowhere):
    the native append's write fails under the log's lock and the rest is the twin's
    (phase 0): KAFKA_STORAGE_ERROR, the dir offline, as the twin answers the same fault."""
    native, twin = brokers
    outcomes = Outcomes()
    with connect(native) as a, connect(twin) as b:
        ask = _both(monkeypatch, outcomes, a, b)
        for _ in range(3):
            ask(9, "w", {0: produce_batch()}, -1)
        for br in brokers:
            seg = br.broker.replica_manager.partitions[("w", 0)].log.active_segment
            os.close(seg.log.fd)
        got, want = ask(9, "w", {0: produce_batch()}, -1)
    codes = [decode_response(0, 9, f).responses[0].partition_responses[0].error_code
             for f in (got, want)]
    assert codes == [56, 56]  # KAFKA_STORAGE_ERROR
    assert outcomes.seen[-1] == "rest 0"
    for br in brokers:
        assert ("w", 0) in br.broker.replica_manager.logs.offline_partitions()


@pytest.mark.parametrize(("value", "off"), [("0", True), ("", False)])
def test_the_switch_turns_the_native_call_off(value: str, off: bool) -> None:
    """TIDELOG_PRODUCE_ONE=0: every Produce answered by the twin (a process of its own)."""
    code = "from tidelog.server import connection_now as c; print(c.produce_one_now is None)"
    env = {**os.environ, "TIDELOG_PRODUCE_ONE": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=120).stdout
    assert out.split() == [str(off)]


KINDS = ["plain", "next", "again", "gap", "gzip", "txn"]
_topics = iter(range(1_000_000))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(KINDS), st.integers(1, 4), st.sampled_from([1, -1]),
                          st.sampled_from([3, 8, 9])), min_size=1, max_size=12))
def test_random_requests_answer_and_write_alike(
        brokers: tuple[EmbeddedBroker, EmbeddedBroker], monkeypatch: pytest.MonkeyPatch,
        steps: list[tuple[str, int, int, int]]) -> None:
    """Random runs of plain, idempotent (the next batch, the same again, one past a gap),
    compressed and transactional batches, each to a topic of its own: the same answers,
    segments and counters natively and without."""
    topic = f"h{next(_topics)}"
    for br in brokers:
        async def create(b: EmbeddedBroker = br) -> None:
            b.broker.replica_manager.create_topic(topic, 1, {})
        br.run(create())
    native, twin = brokers
    outcomes = Outcomes()
    seq, last = 0, produce_batch(11, 0, 0)
    with connect(native) as a, connect(twin) as b:
        ask = _both(monkeypatch, outcomes, a, b)
        for kind, n, acks, version in steps:
            if kind == "next":
                last = produce_batch(11, 0, seq, n=n)
                seq += n
            records = {"plain": produce_batch(n=n), "next": last, "again": last,
                       "gap": produce_batch(11, 0, seq + 5, n=n),
                       "gzip": produce_batch(n=n, compression=CompressionType.GZIP),
                       "txn": produce_batch(12, 0, 0, txn=True, n=n)}[kind]
            got, want = ask(version, topic, {0: records}, acks)
            assert got == want, (kind, n, acks, version)
    assert _segments(native, topic) == _segments(twin, topic)
    stats = [br.broker.replica_manager.topic_stats for br in brokers]
    assert stats[0] is not None and stats[1] is not None
    assert stats[0].topic(topic).as_dict() == stats[1].topic(topic).as_dict()
