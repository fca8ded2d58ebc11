"""A partition new on three ReplicaManagers (real logs, a ManualClock; the harness of
test_replica_managers): what its LeaderAndIsr leaves to do later, and how its leader wakes a
follower that has not fetched it yet."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_replica_managers import TOPIC_ID, TP, Cluster, batch

from tidelog.protocol.errors import ErrorCode
from tidelog.server.cluster.partition_state import LeaderAndIsrPartitionState
from tidelog.util.topic_partition import TopicPartition

OTHER = TopicPartition("other", 0)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    yield c
    c.close()


def _partition_metadata(cluster: Cluster, node: int) -> Path:
    return Path(cluster.rms[node].logs.get_log(TP).dir) / "partition.metadata"  # type: ignore[union-attr]


def test_leader_and_isr_does_not_wait_for_partition_metadata(cluster: Cluster) -> None:
    """The file (two fsyncs) is written on the admin thread: with that thread held, the
    LeaderAndIsr is applied and the partition leads, the file not yet there."""
    rm = cluster.rms[1]
    gate = threading.Event()
    held = rm.admin_executor().submit(gate.wait, 30)
    try:
        cluster.leader_and_isr(1, 1, nodes=(1,))
        assert rm.partitions[TP].is_leader
        assert rm.partitions[TP].topic_id == TOPIC_ID
        assert not _partition_metadata(cluster, 1).exists()
    finally:
        gate.set()
    held.result(30)
    rm.admin_executor().submit(lambda: None).result(30)  # the writes queued before it
    text = _partition_metadata(cluster, 1).read_text()
    assert text.startswith("version: 0\ntopic_id: ")


def test_a_partition_metadata_naming_another_topic_is_inconsistent(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 1, nodes=(1,))
    rm = cluster.rms[1]
    rm.admin_executor().submit(lambda: None).result(30)
    rm.stop_replicas(1, {TP: (1, False)})  # dropped here, its log and file kept
    other = uuid.UUID("00000000-0000-0000-0000-000000000001")
    state = LeaderAndIsrPartitionState("t", 0, 1, 1, 2, (1, 2, 3), 2, (1, 2, 3))
    result = rm.become_leader_or_follower(0, 1, [state], {"t": other})
    assert result.errors[TP] == ErrorCode.INCONSISTENT_TOPIC_ID


def test_an_append_wakes_the_parked_fetch_of_a_follower_that_has_not_fetched_it(
    cluster: Cluster,
) -> None:
    cluster.leader_and_isr(1, 1)
    leader = cluster.rms[1]

    async def main() -> tuple[set[TopicPartition], bool]:
        # follower 2 parked on another partition of this leader, not on TP (not added yet)
        parked = asyncio.ensure_future(leader.delayed_fetch.wait([OTHER], 30_000, replica_id=2))
        other = asyncio.ensure_future(leader.delayed_fetch.wait([OTHER], 30_000, replica_id=7))
        await asyncio.sleep(0)
        leader.append(TP, batch(1))
        fired = await asyncio.wait_for(parked, 10)  # answered now, as if its wait ran out
        await asyncio.sleep(0)
        woken_other = other.done()
        other.cancel()
        return fired, woken_other

    fired, woken_other = asyncio.new_event_loop().run_until_complete(main())
    assert fired == set()
    assert not woken_other  # broker 7 replicates nothing here


def test_once_the_followers_fetched_an_append_wakes_only_fetches_of_its_partition(
    cluster: Cluster,
) -> None:
    cluster.leader_and_isr(1, 1)
    leader = cluster.rms[1]
    cluster.fetch(2)
    cluster.fetch(3)

    async def main() -> bool:
        parked = asyncio.ensure_future(leader.delayed_fetch.wait([OTHER], 30_000, replica_id=2))
        await asyncio.sleep(0)
        leader.append(TP, batch(1))
        await asyncio.sleep(0)
        woken = parked.done()
        parked.cancel()
        return woken

    assert not asyncio.new_event_loop().run_until_complete(main())
    assert len(leader.delayed_fetch.by_replica) == 0
