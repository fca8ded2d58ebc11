"""The follower side over the network: ReplicaFetcherManager with RemoteLeaderEndPoint
fetching from a real broker (real sockets, Fetch v15 with ReplicaState) what real clients
produced (confluent-kafka idempotent and transactional producers, compressed): the follower's
segment files end byte-identical to the leader's, and a follower long-polling with a 10 s
max wait gets a new record when it is appended, not when the wait ends."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from broker_wire import new_leader_epoch
from confluent_kafka import Producer
from follower_partitions import follower_partition

from tidelog.client.kafka_client import KafkaClient
from tidelog.config.log_config import LogConfig
from tidelog.records import build_batch
from tidelog.server.replication.fetcher_manager import InitialFetchState
from tidelog.server.replication.leader_endpoint import FetchSettings, RemoteLeaderEndPoint
from tidelog.server.replication.replica_fetcher_manager import ReplicaFetcherManager
from tidelog.storage.log import Log
from tidelog.testing import EmbeddedBroker
from tidelog.util.clock import SystemClock
from tidelog.util.topic_partition import TopicPartition

TOPIC = "replicated"


@pytest.fixture
def leader() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(
        {"num.partitions": "2", "transaction.state.log.replication.factor": "1"}
    ) as b:
        yield b


def produce(broker: EmbeddedBroker) -> None:
    plain = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 5,
        }
    )
    for i in range(300):
        plain.produce(TOPIC, value=f"idem-{i}".encode() * 3, key=str(i % 7).encode())
    assert plain.flush(30) == 0
    txn = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "transactional.id": "replication-test",
            "compression.type": "gzip",
        }
    )
    txn.init_transactions(30)
    for commit in (True, False, True):
        txn.begin_transaction()
        for i in range(20):
            txn.produce(TOPIC, value=f"txn-{commit}-{i}".encode(), partition=i % 2)
        if commit:
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)


def topic_id(broker: EmbeddedBroker) -> uuid.UUID:
    with KafkaClient(broker.bootstrap_servers) as client:
        md = client.any_connection().call(3, 12, {"topics": [{"name": TOPIC}]})
    return uuid.UUID(str(md.topics[0].topic_id))


def leader_dir(broker: EmbeddedBroker, partition: int) -> Path:
    return Path(broker.broker.config.log_dirs[0]) / f"{TOPIC}-{partition}"


def segment_files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.glob("*.log"))}


async def wait_until(cond: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


def test_follower_copies_a_real_brokers_log(leader: EmbeddedBroker, tmp_path: Path) -> None:
    with KafkaClient(leader.bootstrap_servers) as client:
        client.create_topics({TOPIC: 2})
    produce(leader)
    tid = topic_id(leader)
    tps = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
    logs = {
        tp: Log.open(
            tmp_path / f"{tp.topic}-{tp.partition}", LogConfig.from_props({}), clock=SystemClock()
        )
        for tp in tps
    }
    views = {tp: follower_partition(log) for tp, log in logs.items()}
    settings = FetchSettings(replica_id=5, max_wait_ms=10_000, backoff_ms=50)

    async def main() -> tuple[float, int]:
        manager = ReplicaFetcherManager(
            settings,
            views.get,
            lambda broker_id: ("127.0.0.1", leader.port),
            num_fetchers=2,
            broker_epoch=lambda: 77,
        )
        manager.add_fetcher_for_partitions({tp: InitialFetchState(0, -1, 0, tid) for tp in tps})
        probe = RemoteLeaderEndPoint(0, ("127.0.0.1", leader.port), settings)
        ends = {tp: await probe.fetch_latest_offset(tp, -1) for tp in tps}
        await wait_until(lambda: all(logs[tp].log_end_offset == ends[tp] for tp in tps))
        assert len(manager.fetchers) == 2  # partitions 0 and 1 hash to different slots
        versions = {f.leader._conn.version(1) for f in manager.fetchers.values()}  # type: ignore[attr-defined]
        # a new record reaches the long-polling follower when it is appended
        p = Producer({"bootstrap.servers": leader.bootstrap_servers})
        started = time.monotonic()
        p.produce(TOPIC, value=b"late", partition=0)
        assert p.flush(10) == 0
        await wait_until(lambda: logs[tps[0]].log_end_offset == ends[tps[0]] + 1)
        waited = time.monotonic() - started
        await manager.shutdown()
        await probe.close()
        return waited, max(versions)

    waited, version = asyncio.run(main())
    for log in logs.values():
        log.close()
    assert version == 15
    assert waited < 5  # the leader's long poll was woken by the append, not the 10 s wait
    for tp in tps:
        ours = segment_files(tmp_path / f"{tp.topic}-{tp.partition}")
        theirs = segment_files(leader_dir(leader, tp.partition))
        assert ours == theirs
        assert sum(len(v) for v in ours.values()) > 1000


def test_leader_answers_a_diverging_epoch(leader: EmbeddedBroker, tmp_path: Path) -> None:
    """Kafka 2.7+'s way (truncate_on_fetch): the follower led epoch 1 and wrote offsets 20-22
    nobody else has; the leader went on at epoch 2 from offset 20. The follower's Fetch v15
    names its last fetched epoch (1); the leader answers the diverging epoch (0 ends at 20)
    instead of records, the follower truncates there and then copies the leader byte for
    byte (without the leader's check it would append the leader's 23.. after its own fork)."""
    with KafkaClient(leader.bootstrap_servers) as client:
        client.create_topics({TOPIC: 1})
    p = Producer({"bootstrap.servers": leader.bootstrap_servers, "linger.ms": 5})
    for i in range(20):
        p.produce(TOPIC, value=f"first-{i}".encode(), partition=0)
    assert p.flush(10) == 0
    tid = topic_id(leader)
    tp = TopicPartition(TOPIC, 0)
    log = Log.open(tmp_path / f"{TOPIC}-0", LogConfig.from_props({}), clock=SystemClock())
    log.append_as_follower(b"".join(segment_files(leader_dir(leader, 0)).values()))
    log.append_as_leader(build_batch([(0, None, b"never on the leader")] * 3), leader_epoch=1)
    new_leader_epoch(leader, TOPIC, tid, 2)
    for i in range(20):
        p.produce(TOPIC, value=f"second-{i}".encode(), partition=0)
    assert p.flush(10) == 0
    settings = FetchSettings(replica_id=5, max_wait_ms=200, backoff_ms=50, truncate_on_fetch=True)
    view = follower_partition(log)

    async def main() -> None:
        manager = ReplicaFetcherManager(
            settings, {tp: view}.get, lambda b: ("127.0.0.1", leader.port)
        )
        manager.add_fetcher_for_partitions({tp: InitialFetchState(0, -1, 23, tid)})
        state = manager.fetch_state(tp)
        assert state is not None and state.last_fetched_epoch == 1
        await wait_until(
            lambda: log.log_end_offset == 40 and log.leader_epoch_cache.latest_epoch() == 2
        )
        await manager.shutdown()

    asyncio.run(main())
    entries = [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries]
    log.close()
    assert entries == [(0, 0), (2, 20)]
    assert segment_files(tmp_path / f"{TOPIC}-0") == segment_files(leader_dir(leader, 0))
