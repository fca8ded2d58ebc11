"""The connection's per-request path, in-process with a fake transport: handlers that end at
once and handlers that wait are answered in request order, reading pauses at
queued.max.requests and resumes, and every request is counted once in the request metrics."""

from __future__ import annotations

import asyncio
from typing import Any

from broker_wire import request_frame
from recording_transport import RecordingTransport

from tidelog.metrics.requests import RequestMetrics
from tidelog.server.connection import KafkaConnection
from tidelog.server.registry import HandlerSpec, Registry

API_VERSIONS = 18


class _Config:
    values = {"socket.request.max.bytes": "104857600", "queued.max.requests": "3"}


class _Broker:
    def __init__(self, handle: Any) -> None:
        self.config = _Config()
        self.connections: set[KafkaConnection] = set()
        self.registry = Registry()
        self.registry.register(HandlerSpec(API_VERSIONS, 0, 3, handle, "test"))
        self.request_metrics = RequestMetrics()


def _frame(corr: int) -> bytes:
    return request_frame(API_VERSIONS, 3, corr, client_software_name="t",
                         client_software_version="1")  # fmt: skip


def test_waiting_and_at_once_handlers_answer_in_order_with_backpressure() -> None:
    gates: dict[int, asyncio.Future[None]] = {}

    async def handle(ctx: Any, request: Any) -> bytes:
        corr = ctx.header.correlation_id
        if corr % 2 == 0:  # even ones wait; odd ones end at once
            await gates[corr]
        return corr.to_bytes(4, "big")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for corr in (2, 4):
            gates[corr] = loop.create_future()
        broker = _Broker(handle)
        transport = RecordingTransport()
        conn = KafkaConnection(broker)  # type: ignore[arg-type]
        conn.connection_made(transport)  # type: ignore[arg-type]
        conn.data_received(b"".join(_frame(c) for c in (1, 2, 3)))
        assert transport.written == [b"\0\0\0\1"]  # 2 waits, 3 waits behind it
        assert abs(conn.last_active - loop.time()) < 60  # on the loop's clock (idle closing)
        conn.data_received(_frame(4))
        assert transport.paused  # 2, 3 and 4 queued: queued.max.requests is 3
        gates[4].set_result(None)
        await asyncio.sleep(0)
        assert transport.paused and transport.written == [b"\0\0\0\1"]
        gates[2].set_result(None)
        for _ in range(5):
            await asyncio.sleep(0)
        assert transport.written == [b"\0\0\0" + bytes([c]) for c in (1, 2, 3, 4)]
        assert not transport.paused and transport.pauses == 1
        stats = broker.request_metrics.by_name["ApiVersions"]
        assert stats.requests == {3: 4}  # each counted once, at once or after waiting
        for stage, hist in stats.stages.items():
            assert hist.count == 4, stage
        assert conn.idle

    asyncio.run(main())


def test_a_handler_that_fails_at_once_is_answered_and_the_next_one_too() -> None:
    async def handle(ctx: Any, request: Any) -> bytes:
        if ctx.header.correlation_id == 1:
            raise RuntimeError("boom")
        return b"ok"

    async def main() -> None:
        broker = _Broker(handle)
        transport = RecordingTransport()
        conn = KafkaConnection(broker)  # type: ignore[arg-type]
        conn.connection_made(transport)  # type: ignore[arg-type]
        conn.data_received(_frame(1) + _frame(2))
        assert len(transport.written) == 2 and transport.written[1] == b"ok"
        # UNKNOWN_SERVER_ERROR (-1) in ApiVersions' answer for correlation id 1
        assert transport.written[0][4:8] == b"\0\0\0\1"
        assert transport.written[0][8:10] == b"\xff\xff"
        assert not conn.closed

    asyncio.run(main())


def test_frames_cut_anywhere_are_answered_once_each_in_order() -> None:
    """Reads that end inside a frame's size, header or body, or hold several frames: each
    request is answered once, in order (the held-over bytes joined with the next read)."""

    async def handle(ctx: Any, request: Any) -> bytes:
        return ctx.header.correlation_id.to_bytes(4, "big")

    async def main() -> None:
        stream = b"".join(_frame(c) for c in range(1, 41))
        for cut in (1, 3, 5, 7, len(_frame(1)) - 1, len(_frame(1)) + 2, 1000):
            broker = _Broker(handle)
            transport = RecordingTransport()
            conn = KafkaConnection(broker)  # type: ignore[arg-type]
            conn.connection_made(transport)  # type: ignore[arg-type]
            for i in range(0, len(stream), cut):
                conn.data_received(stream[i : i + cut])
            expected = [c.to_bytes(4, "big") for c in range(1, 41)]
            assert transport.written == expected, cut
            assert not conn.buf

    asyncio.run(main())


def _produce(corr: int, acks: int) -> bytes:
    from tidelog.client.wire import encode_request
    from tidelog.records.builder import RecordBatchBuilder

    builder = RecordBatchBuilder()
    builder.append(1_700_000_000_000, None, b"v")
    return encode_request(0, 10, corr, "t", {
        "transactional_id": None, "acks": acks, "timeout": 30_000,
        "topic_data": [{"name": "t", "partition_data": [
            {"index": 0, "records": builder.build()}]}]})  # fmt: skip


def test_acks_0_produces_are_counted_without_an_answer_and_keep_the_order() -> None:
    """A Produce with acks=0 has no response slot; ended at once or after waiting, it is
    counted once, and a later request of another API waits for the produce before it."""
    gate: dict[str, asyncio.Future[None]] = {}
    order: list[str] = []

    async def produce(ctx: Any, request: Any) -> bytes:
        if ctx.header.correlation_id == 2:
            await gate["g"]
        order.append(f"produce {ctx.header.correlation_id}")
        return b"answer"

    async def versions(ctx: Any, request: Any) -> bytes:
        order.append("versions")
        return b"versions"

    async def main() -> None:
        gate["g"] = asyncio.get_running_loop().create_future()
        broker = _Broker(versions)
        broker.registry.register(HandlerSpec(0, 0, 11, produce, "produce"))
        transport = RecordingTransport()
        conn = KafkaConnection(broker)  # type: ignore[arg-type]
        conn.connection_made(transport)  # type: ignore[arg-type]
        conn.data_received(_produce(1, 0) + _produce(2, 0) + _frame(3))
        assert order == ["produce 1"] and transport.written == []
        gate["g"].set_result(None)
        for _ in range(20):
            await asyncio.sleep(0)
        assert order == ["produce 1", "produce 2", "versions"]
        assert transport.written == [b"versions"]  # the produces with acks=0: no answer
        assert broker.request_metrics.by_name["Produce"].requests == {10: 2}
        assert broker.request_metrics.by_name["ApiVersions"].requests == {3: 1}

    asyncio.run(main())
