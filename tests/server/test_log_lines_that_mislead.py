"""Log lines an operator reads first must say what happened: a new log dir is not an unclean
shutdown, a late response to an abandoned request is not a protocol error, a controlled
shutdown that could not move every leader says how many are left and names a few."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from types import SimpleNamespace

import pytest

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.protocol.errors import ErrorCode
from tidelog.server.cluster_node import ClusterNode
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition


def _loading_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("Loading ")]


def test_a_new_log_dir_is_not_an_unclean_shutdown(
    caplog: pytest.LogCaptureFixture, tmp_path: object
) -> None:
    caplog.set_level(logging.INFO, logger="tidelog.storage")
    log_dir = f"{tmp_path}/logs"
    with EmbeddedBroker(log_dir=log_dir):
        pass
    [first] = _loading_lines(caplog)
    assert "a new log dir" in first and "unclean" not in first, first
    caplog.clear()
    with EmbeddedBroker(log_dir=log_dir):
        pass
    [again] = _loading_lines(caplog)
    assert "(clean shutdown" in again, again
    assert "unclean" not in again, again


def test_a_response_to_a_cancelled_request_is_dropped_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The caller stops waiting (cancelled) before the broker answers: the answer still comes,
    in order, and must neither close the connection nor be logged as an unknown correlation
    id."""
    caplog.set_level(logging.DEBUG, logger="tidelog.client")
    body = {"client_software_name": "t", "client_software_version": "1"}

    async def scenario(host: str, port: int) -> None:
        conn = await AsyncBrokerConnection.connect(host, port, client_id="t")
        try:
            task = asyncio.ensure_future(conn.call(18, 3, body))
            await asyncio.sleep(0)  # the request is written; its caller waits
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            resp = await conn.call(18, 3, body, timeout_s=10)  # the same connection
            assert int(resp.error_code) == 0
            assert not conn.closed
        finally:
            await conn.close()

    with EmbeddedBroker() as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        asyncio.run(scenario(host, int(port)))
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert not [w for w in warnings if "correlation" in w], warnings
    assert any("arrived after its caller stopped waiting" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_a_controlled_shutdown_attempt_summarises_the_partitions_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tidelog.server.cluster_node")
    left = [TopicPartition("orders", p) for p in range(53)]

    async def ask() -> tuple[int, list[TopicPartition]]:
        return int(ErrorCode.NONE), left

    node = SimpleNamespace(
        broker_id=1, zk=SimpleNamespace(connected=True), _ask_controller=ask,
        config=SimpleNamespace(values={"controlled.shutdown.max.retries": "0",
                                       "controlled.shutdown.retry.backoff.ms": "0"}))
    assert asyncio.run(ClusterNode.controlled_shutdown(node)) is False  # type: ignore[arg-type]
    [line] = [r.getMessage() for r in caplog.records if "attempt 1" in r.getMessage()]
    assert line.endswith("still leading 53 partitions (orders-0, orders-1, orders-2, ...)"), line
    assert len(line) < 150, line
