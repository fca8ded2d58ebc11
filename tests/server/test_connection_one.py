"""The connection's one-frame path (connection_now.py ``_take_one``) against the general
steps it stands for (``_take`` → ``_dispatch`` → ``_spawn`` → ``_flush``): the same requests
read in drawn pieces (whole frames, partial frames, several frames in one read) by two
connections, one of which never takes the one-frame path, give the same handler calls in the
same order, the same bytes written, the same request metrics and the same close. The
handlers answer on return, decline (``NOT_NOW``), raise, wait, ask for a throttle or a
close; Produce requests of acks 0, 1 and -1 and versions the registry refuses are mixed with
ApiVersions requests. Each connection runs on a loop whose clock moves only when the loop
would wait (``_VirtualTimeLoop``): a throttle's mute ends at the same turn in every run,
however busy the machine."""

from __future__ import annotations

import asyncio
import selectors
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from recording_transport import RecordingTransport

from tidelog.client.wire import encode_request
from tidelog.metrics.requests import RequestMetrics
from tidelog.records.builder import RecordBatchBuilder
from tidelog.server.connection import KafkaConnection
from tidelog.server.registry import NOT_NOW, HandlerSpec, Registry

API_VERSIONS = 18
BEHAVIOURS = ("now", "now", "now", "not_now", "raise", "wait", "wait", "close", "throttle")


class _Config:
    values = {"socket.request.max.bytes": "104857600", "queued.max.requests": "4"}


class _Broker:
    """What a connection reads of its broker; its handlers log each call."""

    def __init__(self, plan: dict[int, tuple[str, int]]) -> None:
        self.config = _Config()
        self.connections: set[KafkaConnection] = set()
        self.calls: list[tuple[str, int, int]] = []
        self.registry = Registry()
        self.registry.register(HandlerSpec(0, 3, 9, self.handle, "test", self.handle_now))
        self.registry.register(HandlerSpec(API_VERSIONS, 0, 3, self.handle, "test"))
        self.request_metrics = RequestMetrics()
        self.plan = plan

    def handle_now(self, ctx: Any, request: Any) -> Any:
        corr = ctx.header.correlation_id
        self.calls.append(("now", corr, request.acks))
        behaviour, waits = self.plan[corr]
        answer = _answer(corr)
        if behaviour == "not_now":
            return NOT_NOW
        if behaviour == "raise":
            raise RuntimeError("drawn failure")
        if behaviour == "wait":
            return _later(answer, waits)
        if behaviour == "close":
            ctx.close_reason = "drawn close"
        elif behaviour == "throttle":
            ctx.throttle_ms = 1
        return answer

    async def handle(self, ctx: Any, request: Any) -> bytes:
        corr = ctx.header.correlation_id
        self.calls.append(("handle", corr, getattr(request, "acks", 1)))
        await _later(b"", self.plan.get(corr, ("", 0))[1])
        return _answer(corr)


def _answer(corr: int) -> bytes:
    return (8).to_bytes(4, "big") + corr.to_bytes(4, "big") + b"ansr"


async def _later(answer: bytes, waits: int) -> bytes:
    for _ in range(waits):
        await asyncio.sleep(0)
    return answer


class _VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A loop whose clock (``time``, the connection's and its timers') moves only when the
    loop would otherwise wait for that long: nothing here depends on the machine's speed."""

    def __init__(self) -> None:
        super().__init__(selectors.DefaultSelector())
        self._now = 0.0
        real = self._selector.select  # type: ignore[attr-defined]

        def select(timeout: float | None = None) -> list[Any]:
            events = real(0)
            if not events and timeout:
                self._now += timeout
            return events

        self._selector.select = select  # type: ignore[attr-defined]

    def time(self) -> float:
        return self._now


def _on_virtual_time(main: Any) -> Any:
    with asyncio.Runner(loop_factory=_VirtualTimeLoop) as runner:
        return runner.run(main)


class _General(KafkaConnection):
    """A connection that never takes the one-frame path."""

    def _take_one(self, data: bytes | bytearray, end: int) -> int:
        return 0


_BATCH = RecordBatchBuilder()
_BATCH.append(1_700_000_000_000, None, b"v" * 100)
RECORDS = _BATCH.build()


def _produce(corr: int, acks: int, version: int) -> bytes:
    return encode_request(0, version, corr, "rdkafka", {
        "transactional_id": None, "acks": acks, "timeout": 30_000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": RECORDS}]}]})


def _api_versions(corr: int) -> bytes:
    return encode_request(API_VERSIONS, 3, corr, "rdkafka", {
        "client_software_name": "t", "client_software_version": "1"})


requests = st.lists(st.tuples(
    st.sampled_from(("produce", "produce", "produce", "api_versions")),
    st.sampled_from((1, -1, 1, -1, 0)),
    st.sampled_from((9, 9, 9, 9, 9, 9, 9, 10)),  # 10: over the registry's range
    st.sampled_from(BEHAVIOURS),
    st.integers(0, 3)), min_size=1, max_size=8)


async def _run(cls: type[KafkaConnection], frames: list[bytes], cuts: list[int],
               plan: dict[int, tuple[str, int]]) -> tuple[Any, ...]:
    broker = _Broker(plan)
    transport = RecordingTransport()
    conn = cls(broker)  # type: ignore[arg-type]
    conn.connection_made(transport)  # type: ignore[arg-type]
    data = b"".join(frames)
    pos = 0
    for cut in [*sorted(cuts), len(data)]:
        if cut > pos:
            conn.data_received(data[pos:cut])
            pos = cut
            for _ in range(2):
                await asyncio.sleep(0)
    deadline = asyncio.get_running_loop().time() + 10
    while not conn.closed and (not conn.idle or conn.buf or conn._muted_until):
        assert asyncio.get_running_loop().time() < deadline, "not answered"
        await asyncio.sleep(0.001)
    stats = {name: (s.requests, {k: h.count for k, h in s.stages.items()})
             for name, s in broker.request_metrics.by_name.items()}
    return b"".join(transport.written), broker.calls, stats, conn.closed


@settings(max_examples=300, deadline=None)
@example(drawn=[("produce", 1, 9, "wait", 3), ("produce", 1, 9, "now", 0)], reads=[(1, 0)])
@example(drawn=[("produce", -1, 9, "now", 1), ("produce", -1, 9, "wait", 2),
                ("api_versions", 1, 9, "throttle", 1), ("produce", 1, 9, "throttle", 1),
                ("api_versions", 1, 9, "throttle", 1), ("produce", 0, 9, "wait", 1),
                ("produce", 1, 9, "raise", 1), ("produce", -1, 9, "raise", 2)],
         reads=[(3, 5), (4, 5)])  # (a throttle's mute ending on the machine's clock)
@example(drawn=[("produce", 1, 9, "throttle", 0), ("produce", 1, 9, "wait", 2),
                ("produce", -1, 9, "close", 0), ("produce", 1, 9, "now", 0)],
         reads=[(1, 0), (2, 0)])
@given(drawn=requests, reads=st.lists(st.tuples(st.integers(0, 8), st.sampled_from(
    (0, 0, 0, 1, 5, 60))), max_size=8))
def test_the_one_frame_path_does_what_the_general_steps_do(
        drawn: list[tuple[str, int, int, str, int]], reads: list[tuple[int, int]]) -> None:
    """``reads``: where each read ends, a frame's end (mostly) or a few bytes past it."""
    frames = []
    plan = {}
    for corr, (kind, acks, version, behaviour, waits) in enumerate(drawn, 1):
        frames.append(_produce(corr, acks, version) if kind == "produce"
                      else _api_versions(corr))
        plan[corr] = (behaviour, waits)
    ends = [sum(map(len, frames[:i])) for i in range(len(frames) + 1)]
    cuts = [ends[min(i, len(frames))] + past for i, past in reads]
    one = _on_virtual_time(_run(KafkaConnection, frames, cuts, plan))
    general = _on_virtual_time(_run(_General, frames, cuts, plan))
    assert one == general


def test_a_lone_produce_frame_takes_the_one_frame_path() -> None:
    """The common read (whole Produce frames, nothing queued) makes no answer slot: a
    handler that is not the native produce's answers the first frame, the general steps
    the frames after it."""
    taken: list[int] = []

    class Counting(KafkaConnection):
        def _take_one(self, data: bytes | bytearray, end: int) -> int:
            done = super()._take_one(data, end)
            taken.append(done)
            return done

    async def main() -> None:
        broker = _Broker({1: ("now", 0), 2: ("now", 0), 3: ("now", 0)})
        transport = RecordingTransport()
        conn = Counting(broker)  # type: ignore[arg-type]
        conn.connection_made(transport)  # type: ignore[arg-type]
        conn.data_received(_produce(1, -1, 9))
        conn.data_received(_produce(2, 1, 9) + _produce(3, 1, 9))  # two: then the general
        assert transport.written == [_answer(1), _answer(2), _answer(3)]
        stats = broker.request_metrics.by_name["Produce"]
        assert stats.requests == {9: 3}
        assert all(h.count == 3 for h in stats.stages.values())

    asyncio.run(main())
    assert taken == [len(_produce(1, -1, 9)), len(_produce(2, 1, 9))]
