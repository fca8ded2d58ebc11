"""A leader that comes back listening elsewhere: when the broker's metadata names a new
address for a leader, ReplicaFetcherManager moves that leader's partitions, at their fetch
offsets, to a fetcher to the new address (real sockets, a real broker as the leader)."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from follower_partitions import follower_partition

from tidelog.client.kafka_client import KafkaClient
from tidelog.config.log_config import LogConfig
from tidelog.server.replication.fetcher_manager import InitialFetchState
from tidelog.server.replication.leader_endpoint import FetchSettings, RemoteLeaderEndPoint
from tidelog.server.replication.replica_fetcher_manager import FetcherKey, ReplicaFetcherManager
from tidelog.storage.log import Log
from tidelog.testing import EmbeddedBroker
from tidelog.util.clock import SystemClock
from tidelog.util.topic_partition import TopicPartition

TOPIC = "moved"


@pytest.fixture
def leader() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"num.partitions": "1"}) as b:
        yield b


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_until(cond: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


def test_a_leader_listening_elsewhere_gets_its_partitions_fetched_there(
    leader: EmbeddedBroker, tmp_path: Path
) -> None:
    with KafkaClient(leader.bootstrap_servers) as client:
        client.create_topics({TOPIC: 1})
        md = client.any_connection().call(3, 12, {"topics": [{"name": TOPIC}]})
    tid = uuid.UUID(str(md.topics[0].topic_id))
    p = Producer({"bootstrap.servers": leader.bootstrap_servers, "enable.idempotence": True})
    for i in range(200):
        p.produce(TOPIC, value=f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0
    tp = TopicPartition(TOPIC, 0)
    log = Log.open(tmp_path / f"{TOPIC}-0", LogConfig.from_props({}), clock=SystemClock())
    views = {tp: follower_partition(log)}
    addresses = {0: ("127.0.0.1", closed_port())}  # the leader's address before it restarted
    settings = FetchSettings(replica_id=5, max_wait_ms=500, backoff_ms=50)

    async def main() -> tuple[int, int]:
        manager = ReplicaFetcherManager(settings, views.get, addresses.get, broker_epoch=lambda: 7)
        manager.add_fetcher_for_partitions({tp: InitialFetchState(0, -1, 0, tid)})
        old = manager.fetchers[FetcherKey(0, 0)]
        await wait_until(lambda: old.fetch_requests >= 3)  # refused, backing off, retrying
        assert log.log_end_offset == 0
        manager.on_metadata_change()  # nothing moved: the same fetcher keeps the partition
        assert manager.fetchers[FetcherKey(0, 0)] is old
        addresses[0] = ("127.0.0.1", leader.port)  # UpdateMetadata names where it is now
        manager.on_metadata_change()
        probe = RemoteLeaderEndPoint(0, ("127.0.0.1", leader.port), settings)
        end = await probe.fetch_latest_offset(tp, -1)
        await wait_until(lambda: log.log_end_offset == end)
        moved = manager.fetchers[FetcherKey(0, 0)]
        state = moved.fetch_state(tp)
        await manager.shutdown()
        await probe.close()
        assert moved is not old and not old.running
        assert state is not None and state.current_leader_epoch == -1
        return end, log.log_end_offset

    end, ours = asyncio.run(main())
    log.close()
    assert end >= 200 and ours == end
