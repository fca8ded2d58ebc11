"""tidelog.client.aio against a real broker (EmbeddedBroker) and real sockets: version
negotiation, pipelined requests matched by correlation id, long polls woken by a produce on
another connection, timeouts that close the connection, a broker going away, clean close."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from tidelog.client.aio import INTER_BROKER_API_RANGES, AsyncBrokerConnection
from tidelog.client.conn import KafkaClientError, KafkaConnectionError
from tidelog.client.kafka_client import KafkaClient
from tidelog.records.builder import build_batch
from tidelog.testing import EmbeddedBroker


def run(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(coro_fn(), 60))


def _topic_id(broker: EmbeddedBroker, topic: str) -> uuid.UUID:
    with KafkaClient(broker.bootstrap_servers) as client:
        client.create_topics({topic: 2})
        md = client.any_connection().call(3, 12, {"topics": [{"name": topic}]})
    return uuid.UUID(str(md.topics[0].topic_id))


async def _parked(broker: EmbeddedBroker, poll: asyncio.Future[Any]) -> None:
    """Until the broker holds the Fetch in its purgatory (waiting for records), unanswered."""
    deadline = asyncio.get_running_loop().time() + 30
    while len(broker.broker.purgatory) == 0:
        assert not poll.done(), poll
        assert asyncio.get_running_loop().time() < deadline, "the Fetch was never parked"
        await asyncio.sleep(0.005)
    assert not poll.done()


def _fetch_body(topic_id: uuid.UUID, partition: int, offset: int, wait_ms: int) -> dict[str, Any]:
    return {
        "replica_state": {"replica_id": -1, "replica_epoch": -1},
        "max_wait": wait_ms,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "topics": [
            {
                "topic_id": topic_id,
                "partitions": [
                    {
                        "partition": partition,
                        "fetch_offset": offset,
                        "current_leader_epoch": -1,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
    }


def test_negotiates_versions(tidelog_broker: EmbeddedBroker) -> None:
    ranges = dict(INTER_BROKER_API_RANGES)
    ranges[9999] = (0, 3)  # an API no broker speaks

    async def main() -> None:
        conn = await AsyncBrokerConnection.connect(
            "127.0.0.1", tidelog_broker.port, client_id="t", api_ranges=ranges
        )
        try:
            assert conn.version(1) == 15  # the broker goes to 18, we stop at 15
            assert conn.version(23) == 4
            assert 9999 not in conn.versions
            with pytest.raises(KafkaClientError) as info:
                conn.version(9999)
            assert info.value.error == ErrorCode.unsupported_version
        finally:
            await conn.close()
        assert conn.closed

    run(main)


def test_pipelined_requests_matched_by_correlation(tidelog_broker: EmbeddedBroker) -> None:
    names = [f"absent-{i}" for i in range(40)]

    async def main() -> None:
        conn = await AsyncBrokerConnection.connect("127.0.0.1", tidelog_broker.port, client_id="t")
        try:
            body = {"allow_auto_topic_creation": False}
            answers = await asyncio.gather(
                *(conn.call(3, 9, {**body, "topics": [{"name": name}]}) for name in names)
            )
        finally:
            await conn.close()
        assert [a.topics[0].name for a in answers] == names
        assert {a.topics[0].error_code for a in answers} == {ErrorCode.unknown_topic_or_partition}

    run(main)


def test_long_poll_fetch_answered_when_records_arrive(tidelog_broker: EmbeddedBroker) -> None:
    topic_id = _topic_id(tidelog_broker, "polled")

    async def main() -> None:
        fetcher = await AsyncBrokerConnection.connect(
            "127.0.0.1", tidelog_broker.port, client_id="f"
        )
        producer = await AsyncBrokerConnection.connect(
            "127.0.0.1", tidelog_broker.port, client_id="p"
        )
        try:
            started = time.monotonic()
            poll = asyncio.ensure_future(fetcher.call(1, 15, _fetch_body(topic_id, 1, 0, 20_000)))
            await asyncio.sleep(0)  # the fetch is on the wire before the produce
            batch = build_batch([(0, b"k", b"v")])
            produced = await producer.call(
                0,
                9,
                {
                    "acks": 1,
                    "timeout": 5000,
                    "topic_data": [
                        {"name": "polled", "partition_data": [{"index": 1, "records": batch}]}
                    ],
                },
            )
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
            fetched = await poll
            waited = time.monotonic() - started
        finally:
            await fetcher.close()
            await producer.close()
        part = fetched.responses[0].partitions[0]
        assert part.error_code == ErrorCode.none
        assert part.high_watermark == 1
        assert isinstance(part.records, bytes) and len(part.records) > 0
        assert waited < 15  # woken by the produce, not by the 20 s max wait

    run(main)


def test_timeout_closes_the_connection() -> None:
    """A peer that accepts and never answers: the request times out, the connection is
    closed, and a request pipelined behind it fails as a lost connection."""

    async def main() -> None:
        received = asyncio.Event()

        async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(1)
            received.set()
            await reader.read()  # until the client closes
            writer.close()

        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises(KafkaClientError) as info:
                await AsyncBrokerConnection.connect("127.0.0.1", port, client_id="t", timeout_s=0.3)
            assert info.value.error == ErrorCode.request_timed_out
            assert received.is_set()
        finally:
            server.close()
            await server.wait_closed()

    run(main)


def test_unreachable_broker() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(KafkaConnectionError):
            await AsyncBrokerConnection.connect("127.0.0.1", port, client_id="t", timeout_s=2)

    run(main)


def test_broker_going_away_fails_pending_requests(
    tidelog_broker_factory: Callable[..., EmbeddedBroker],
) -> None:
    broker = tidelog_broker_factory()
    topic_id = _topic_id(broker, "gone")

    async def main() -> None:
        conn = await AsyncBrokerConnection.connect("127.0.0.1", broker.port, client_id="t")
        poll = asyncio.ensure_future(conn.call(1, 15, _fetch_body(topic_id, 0, 0, 30_000)))
        await _parked(broker, poll)
        await asyncio.get_running_loop().run_in_executor(None, broker.stop)
        with pytest.raises(KafkaConnectionError):
            await poll
        assert conn.closed
        with pytest.raises(KafkaConnectionError):
            await conn.call(18, 3, {})
        await conn.close()

    run(main)


def test_close_fails_what_is_pending(tidelog_broker: EmbeddedBroker) -> None:
    topic_id = _topic_id(tidelog_broker, "closing")

    async def main() -> None:
        conn = await AsyncBrokerConnection.connect("127.0.0.1", tidelog_broker.port, client_id="t")
        poll = asyncio.ensure_future(conn.call(1, 15, _fetch_body(topic_id, 0, 0, 30_000)))
        await _parked(tidelog_broker, poll)
        await conn.close()
        with pytest.raises(KafkaConnectionError):
            await poll

    run(main)
