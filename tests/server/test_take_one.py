"""A connection's common Produce frames in one native call (``take_one_now``,
_native/take_now.c) do what its twin does, ``ConnectionNow._take_one`` and ``_answer``
(server/connection_now.py): two real brokers (their logs on disk) each get the same reads on
a connection of their own, one through the native call and one through the twin, and must
write the same answers in the same writes, keep the same logs, count the same request
metrics and leave their connections alike, on the common path (one frame a read, several
a read, reads cut anywhere) and on each uncommon one the call hands back or leaves to the
general steps (a failed write, an answer behind a queued chunk, the pause, a handler that
raises, a closed connection, acks=0, a corrupt frame, a version out of range, another
request among the frames)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest
from broker_wire import corrupt_batch, produce_batch, produce_body, request_frame
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recording_transport import RecordingTransport

from tidelog.config.broker_config import BrokerConfig
from tidelog.server import connection_now
from tidelog.server.broker import Broker
from tidelog.server.connection import KafkaConnection

NATIVE = connection_now.take_one_now
PRODUCE = connection_now.produce_one_now
pytestmark = pytest.mark.skipif(NATIVE is None, reason="native core not built")


class Transport(RecordingTransport):
    """A RecordingTransport whose write fails once when told, which keeps its close and how
    many answers each write held."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_next = False
        self.closed = False
        self.writes: list[int] = []

    def write(self, data: bytes) -> None:
        self.writelines([data])

    def writelines(self, chunks: list[bytes]) -> None:
        if self.fail_next:
            self.fail_next = False
            raise ConnectionResetError("reset by peer")
        self.writes.append(len(chunks))
        super().writelines(chunks)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True


class Rig:
    """A broker with its log dir and one connection to it."""

    def __init__(self, take: Callable[..., Any] | None) -> None:
        self.take = take
        self.dir = tempfile.mkdtemp(prefix="take-one-")
        self.broker = Broker(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0",
                                           "log.dirs": self.dir, "num.partitions": "2"}))
        self.transport = Transport()
        self.conn: KafkaConnection | None = None

    async def start(self) -> None:
        await self.broker.start()
        self.connect()

    def connect(self) -> None:
        self.transport = Transport()
        self.conn = KafkaConnection(self.broker)
        self.conn.connection_made(self.transport)  # type: ignore[arg-type]

    def feed(self, frame: bytes) -> None:
        connection_now.take_one_now = self.take
        try:
            assert self.conn is not None
            self.conn.data_received(frame)
        finally:
            connection_now.take_one_now = NATIVE

    def logs(self) -> dict[str, bytes]:
        out = {}
        for root, _, files in os.walk(self.dir):
            for f in files:
                if f.endswith((".log", ".index", ".timeindex")):
                    path = os.path.join(root, f)
                    with open(path, "rb") as fh:
                        out[os.path.relpath(path, self.dir)] = fh.read()
        return out

    def metrics(self) -> dict[str, Any]:
        """What the connection counted of its Produce requests: per stage, how many."""
        assert self.conn is not None and self.conn.request_metrics is not None
        out = {}
        for s in self.conn.request_metrics.by_key.get(0) or ():
            out[s.name] = (dict(s.requests),
                           {name: sum(h.counts) for name, h in s.stages.items()})
        return out

    def idle(self) -> bool:
        """Nothing waits on the connection: no answer to come, no flush due."""
        c = self.conn
        assert c is not None
        return c.closed or not (c.slots or c._tasks or c._flush_scheduled)

    def state(self) -> tuple[Any, ...]:
        c = self.conn
        assert c is not None
        return (c.closed, c._flush_scheduled, c._last_produce is None, len(c.slots),
                bytes(c.buf), self.transport.pauses, self.transport.closed,
                self.transport.writes)


class Outcomes:
    """The native call standing in for itself, counting what it returned: ``answered N``
    (its frames answered up to byte N), ``general`` (none: the general steps'), ``declined``
    (the twin's) or ``rest N`` (a frame handed back, the general steps' from byte N)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, *args: Any) -> Any:
        out = NATIVE(*args)  # type: ignore[misc]
        self.seen.append("declined" if out is None else "general" if out == 0 else
                         f"answered {out}" if type(out) is int else f"rest {out[6]}")
        return out

    def kinds(self) -> list[str]:
        return [s.split()[0] for s in self.seen]


def _run(steps: Callable[[Rig, Rig, Outcomes], Any]) -> Outcomes:
    outcomes = Outcomes()

    async def main() -> None:
        native, twin = Rig(outcomes), Rig(None)
        await native.start()
        await twin.start()
        try:
            await steps(native, twin, outcomes)
        finally:
            await native.broker.stop()
            await twin.broker.stop()

    asyncio.run(main())
    return outcomes


async def _both(native: Rig, twin: Rig, frame: bytes) -> None:
    """``frame`` to each, its answers (once the loop had its turn) and connections alike."""
    native.feed(frame)
    twin.feed(frame)
    for _ in range(500):  # (each request's answer out before the next: nothing waits)
        await asyncio.sleep(0.01)
        if native.idle() and twin.idle():
            break
    assert native.transport.written == twin.transport.written
    assert native.state() == twin.state()


def _produce(corr: int, parts: dict[int, bytes], acks: int = -1, version: int = 9,
             topic: str = "t") -> bytes:
    return request_frame(0, version, corr, produce_body(version, topic, parts, acks))


def _version(frame: bytes, version: int) -> bytes:
    """``frame`` claiming another version of its API."""
    return frame[:6] + version.to_bytes(2, "big") + frame[8:]


async def _warm(native: Rig, twin: Rig) -> None:
    """The topic made (its first Produce: the twin's) and a first record in each partition
    (the first append to one starts its leader epoch: answered later, off the loop)."""
    await _both(native, twin, _produce(1, {0: produce_batch()}))
    await _both(native, twin, _produce(2, {0: produce_batch()}))
    await _both(native, twin, _produce(3, {1: produce_batch()}))


def test_the_common_frame_is_answered_and_counted_as_the_twin_does() -> None:
    async def steps(native: Rig, twin: Rig, outcomes: Outcomes) -> None:
        await _warm(native, twin)
        for corr in range(3, 40):
            await _both(native, twin, _produce(corr, {corr % 2: produce_batch(n=corr % 4 + 1)},
                                               acks=1 if corr % 3 else -1,
                                               version=(3, 8, 9)[corr % 3]))
        assert native.logs() == twin.logs()
        assert native.metrics() == twin.metrics()
        assert native.metrics()["Produce"][0] == {3: 13, 8: 12, 9: 15}
        assert native.conn.last_active > 0  # type: ignore[union-attr]

    seen = _run(steps).kinds()
    assert seen.count("answered") >= 35, seen  # (the first ones make the topic's logs)


def test_uncommon_frames_are_the_twins() -> None:
    """Each frame the native call hands back or declines, answered as the twin answers."""
    frames = [
        _produce(10, {0: produce_batch(7, 0, 0)}),  # a new producer: the rest in Python
        _produce(11, {0: produce_batch()}, acks=0),  # no answer: declined
        _produce(12, {0: produce_batch(), 1: produce_batch()}),  # two partitions: the rest
        _produce(13, {0: corrupt_batch()}),
        _produce(14, {5: produce_batch()}),  # no such partition
        request_frame(18, 0, 16),  # ApiVersions: not a Produce
        _produce(17, {0: produce_batch()}),
        _version(_produce(15, {0: produce_batch()}, version=13), 14),  # past those served
    ]

    async def steps(native: Rig, twin: Rig, outcomes: Outcomes) -> None:
        await _warm(native, twin)
        for f in frames:
            await _both(native, twin, f)
        assert native.conn.closed  # type: ignore[union-attr]  # (the version refused)
        assert native.logs() == twin.logs()
        assert native.metrics() == twin.metrics()

    seen = _run(steps).kinds()
    assert seen[-8:] == ["rest", "general", "rest", "rest", "rest", "general", "answered",
                         "general"], str(seen)


def test_a_cut_frame_closes_both_connections() -> None:
    async def steps(native: Rig, twin: Rig, outcomes: Outcomes) -> None:
        await _warm(native, twin)
        frame = _produce(20, {0: produce_batch()})
        bad = frame[:4] + frame[4:30] + b"\xff" * 6  # a length past the frame's end
        bad = len(bad[4:]).to_bytes(4, "big") + bad[4:]
        await _both(native, twin, bad)
        assert native.conn.closed and twin.conn.closed  # type: ignore[union-attr]

    assert _run(steps).kinds()[-1] == "general"


def test_a_failed_write_closes_both_connections_after_the_append() -> None:
    async def steps(native: Rig, twin: Rig, outcomes: Outcomes) -> None:
        await _warm(native, twin)
        native.transport.fail_next = twin.transport.fail_next = True
        await _both(native, twin, _produce(30, {0: produce_batch()}))
        assert native.conn.closed and twin.conn.closed  # type: ignore[union-attr]
        assert native.logs() == twin.logs()  # (appended: the answer was lost, not the data)

    assert _run(steps).kinds()[-1] == "answered"


def test_an_answer_behind_a_queued_chunk_joins_the_queue() -> None:
    async def steps(native: Rig, twin: Rig, outcomes: Outcomes) -> None:
        await _warm(native, twin)
        for rig in (native, twin):
            rig.conn.writer.queue.append(b"held")  # type: ignore[union-attr]
        await _both(native, twin, _produce(40, {0: produce_batch()}))
        queued = [list(r.conn.writer.queue) for r in (native, twin)]  # type: ignore[union-attr]
        assert queued[0] == queued[1] and len(queued[0]) == 2 and queued[0][0] == b"held"
        for rig in (native, twin):
            rig.conn.writer.queue.clear()  # type: ignore[union-attr]

    assert _run(steps).kinds()[-1] == "answered"


def test_a_full_queue_pauses_reading_as_the_twin_does() -> None:
    async def steps(native: Rig, twin: Rig, outcomes: Outcomes) -> None:
        await _warm(native, twin)
        for rig in (native, twin):
            rig.conn.max_queued = 0  # type: ignore[union-attr]
        await _both(native, twin, _produce(50, {0: produce_batch()}))
        assert native.transport.pauses >= 1

    assert _run(steps).kinds()[-1] == "answered"


def test_a_produce_that_raises_or_closes_is_the_twins(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: deque[str] = deque()

    def produce(broker: Any, state: Any, header: Any, request: Any) -> Any:
        what = calls.popleft()
        if what == "raise":
            raise RuntimeError("a handler's bug")
        out = PRODUCE(broker, state, header, request)  # type: ignore[misc]
        for rig in rigs:
            if rig.broker is broker:
                rig.conn.close("closed meanwhile")  # type: ignore[union-attr]
        return out

    rigs: list[Rig] = []

    async def steps(native: Rig, twin: Rig, outcomes: Outcomes) -> None:
        await _warm(native, twin)
        rigs.extend((native, twin))
        monkeypatch.setattr(connection_now, "produce_one_now", produce)
        calls.extend(["raise", "raise"])
        await _both(native, twin, _produce(60, {0: produce_batch()}))
        native.connect()
        twin.connect()
        calls.extend(["close", "close"])
        await _both(native, twin, _produce(61, {0: produce_batch()}))
        assert native.conn.closed  # type: ignore[union-attr]
        assert native.logs() == twin.logs()

    assert _run(steps).kinds()[-2:] == ["rest", "rest"]


def test_several_frames_a_read_are_answered_in_one_write() -> None:
    """A loop that fell behind reads several frames at once: each answered by the native
    produce, their answers in one write (the twin's too), counted one by one."""
    async def steps(native: Rig, twin: Rig, outcomes: Outcomes) -> None:
        await _warm(native, twin)
        corr = 100
        for k in (2, 3, 5, 8):
            frames = []
            for i in range(k):
                corr += 1
                frames.append(_produce(corr, {i % 2: produce_batch(n=i % 3 + 1)},
                                       acks=(1, -1)[corr % 2], version=(3, 8, 9)[corr % 3]))
            await _both(native, twin, b"".join(frames))
            assert outcomes.seen[-1] == f"answered {sum(map(len, frames))}"
            assert native.transport.writes[-1] == k
        assert native.logs() == twin.logs()
        assert native.metrics() == twin.metrics()
        assert sum(native.metrics()["Produce"][0].values()) == 3 + 2 + 3 + 5 + 8

    _run(steps)


def test_a_frame_handed_back_among_several_is_answered_in_order() -> None:
    """The answers before it written, it answered by Python, the frames after it by the
    general steps (flushed together): the same answers in the same order as the twin's."""
    frames = [_produce(201, {0: produce_batch()}), _produce(202, {1: produce_batch()}),
              _produce(203, {0: produce_batch(8, 0, 0)}),  # a new producer: the rest
              _produce(204, {1: produce_batch()}), request_frame(18, 0, 205),
              _produce(206, {0: produce_batch()})]

    async def steps(native: Rig, twin: Rig, outcomes: Outcomes) -> None:
        await _warm(native, twin)
        await _both(native, twin, b"".join(frames))
        assert outcomes.seen[-1] == f"rest {sum(map(len, frames[:3]))}"
        assert native.transport.writes[-3:] == [2, 1, 3]
        corrs = [int.from_bytes(w[4:8], "big") for w in native.transport.written[-6:]]
        assert corrs == [201, 202, 203, 204, 205, 206]
        assert native.logs() == twin.logs()
        assert native.metrics() == twin.metrics()

    _run(steps)


def test_frames_before_another_request_and_a_cut_one_are_taken_up_to_it() -> None:
    """The native call answers the whole Produce frames a read starts with and stops at
    another request, or at a frame still arriving (held for the next read)."""
    a, b, c = (_produce(300 + i, {i % 2: produce_batch()}) for i in range(3))
    api = request_frame(18, 0, 310)

    async def steps(native: Rig, twin: Rig, outcomes: Outcomes) -> None:
        await _warm(native, twin)
        await _both(native, twin, a + b + api + c)
        assert outcomes.seen[-1] == f"answered {len(a + b)}"
        await _both(native, twin, a[:20] + a[20:] + b + c[:30])  # (a's bytes again: 300)
        assert outcomes.seen[-1] == f"answered {len(a + b)}"
        assert native.conn.buf == c[:30]  # type: ignore[union-attr]
        await _both(native, twin, c[30:])
        assert native.logs() == twin.logs()
        assert native.metrics() == twin.metrics()

    _run(steps)


def test_produce_frames_the_general_steps_decode_are_answered_natively(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind another request the general steps decode the Produce frames; each is answered
    by the native produce into its slot (``_produce_placed``) as ``handle_now`` answers it
    when the native produce is off: the same answers in the same write, logs and metrics."""
    calls: list[int] = []

    def counting(*args: Any) -> Any:
        calls.append(1)
        return PRODUCE(*args)  # type: ignore[misc]

    read = request_frame(18, 0, 600) + b"".join(
        _produce(601 + i, {i % 2: produce_batch(n=i + 1)}, acks=(1, -1)[i % 2])
        for i in range(4))

    async def steps(native: Rig, twin: Rig, outcomes: Outcomes) -> None:
        await _warm(native, twin)
        for rig, produce in ((native, counting), (twin, None)):
            monkeypatch.setattr(connection_now, "produce_one_now", produce)
            rig.feed(read)
            monkeypatch.setattr(connection_now, "produce_one_now", PRODUCE)
        await _both(native, twin, b"")
        assert native.transport.writes[-1] == 5
        assert native.logs() == twin.logs()
        assert native.metrics() == twin.metrics()

    assert _run(steps).kinds()[-2:] == ["general", "general"]
    assert len(calls) == 4


def test_a_failed_write_of_several_answers_closes_both_after_the_appends() -> None:
    async def steps(native: Rig, twin: Rig, outcomes: Outcomes) -> None:
        await _warm(native, twin)
        native.transport.fail_next = twin.transport.fail_next = True
        read = b"".join(_produce(400 + i, {i % 2: produce_batch()}) for i in range(3))
        await _both(native, twin, read)
        assert native.conn.closed and twin.conn.closed  # type: ignore[union-attr]
        assert native.logs() == twin.logs()  # (appended: the answers lost, not the data)
        assert outcomes.seen[-1] == f"answered {len(read)}"

    _run(steps)


_KINDS = {
    "common": lambda corr: _produce(corr, {corr % 2: produce_batch(n=corr % 3 + 1)},
                                    acks=(1, -1)[corr % 2], version=(3, 8, 9)[corr % 3]),
    "new producer": lambda corr: _produce(corr, {0: produce_batch(1000 + corr, 0, 0)}),
    "acks=0": lambda corr: _produce(corr, {1: produce_batch()}, acks=0),
    "api versions": lambda corr: request_frame(18, 0, corr),
    "two partitions": lambda corr: _produce(corr, {0: produce_batch(), 1: produce_batch()}),
}


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(sorted(_KINDS)), min_size=1, max_size=12),
       st.lists(st.integers(1, 400), max_size=6))
def test_reads_cut_anywhere_are_the_twins(kinds: list[str], cuts: list[int]) -> None:
    """Random frames, their bytes read in random pieces: the same answers, writes, logs,
    metrics and connection state through the native call as through the twin."""
    stream = b"".join(_KINDS[k](500 + i) for i, k in enumerate(kinds))
    points = sorted({min(c * 7, len(stream)) for c in cuts} | {len(stream)})

    async def steps(native: Rig, twin: Rig, outcomes: Outcomes) -> None:
        await _warm(native, twin)
        start = 0
        for p in points:
            if p > start:
                await _both(native, twin, stream[start:p])
            start = p
        assert native.logs() == twin.logs()
        assert native.metrics() == twin.metrics()

    _run(steps)


def test_the_switch_turns_the_call_off() -> None:
    code = "from tidelog.server import connection_now as c; print(c.take_one_now is None)"
    env = dict(os.environ, TIDELOG_TAKE_ONE="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, timeout=60)
    assert out.stdout.strip() == "True"
