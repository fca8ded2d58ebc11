"""UnderReplicatedPartitions, UnderMinIsrPartitionCount and AtMinIsrPartitionCount over real
partitions (cluster.Partition on real logs) made leader with different ISRs, and followed
partitions not counted."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tidelog.config.log_config import LogConfig
from tidelog.metrics.isr import ISR_CHANGE_STATS
from tidelog.records import build_batch
from tidelog.server.cluster.partition import Partition
from tidelog.server.cluster.partition_state import LeaderAndIsr, LeaderAndIsrPartitionState
from tidelog.server.replication.metrics import replication_gauges
from tidelog.storage.log import Log
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition


def partition(tmp_path: Path, p: int, leader: int, isr: tuple[int, ...]) -> Partition:
    tp = TopicPartition("t", p)
    clock = ManualClock()
    log = Log.open(tmp_path / f"t-{p}", LogConfig.from_props({"min.insync.replicas": "2"}),
                   clock=clock)  # fmt: skip
    part = Partition(tp, log, local_broker_id=1, clock=clock)
    state = LeaderAndIsrPartitionState("t", p, 1, leader, 1, isr, 1, (1, 2, 3))
    if leader == 1:
        part.make_leader(state)
    else:
        part.make_follower(state)
    return part


def test_gauges(tmp_path: Path) -> None:
    parts = [
        partition(tmp_path, 0, 1, (1, 2, 3)),  # fully replicated
        partition(tmp_path, 1, 1, (1, 2)),  # under-replicated, at min ISR
        partition(tmp_path, 2, 1, (1,)),  # under-replicated, under min ISR
        partition(tmp_path, 3, 2, (2,)),  # followed here: the leader counts it
    ]
    g = replication_gauges(parts)
    assert (g.under_replicated, g.under_min_isr, g.at_min_isr) == (2, 1, 1)
    for p in parts:
        p.log.close()


class CommittingController:
    """An AlterPartitionSender whose controller commits every proposal as proposed."""

    def submit(self, tp: TopicPartition, proposed: LeaderAndIsr) -> asyncio.Future[LeaderAndIsr]:
        future: asyncio.Future[LeaderAndIsr] = asyncio.get_running_loop().create_future()
        future.set_result(LeaderAndIsr(proposed.leader, proposed.leader_epoch, proposed.isr,
                                       proposed.partition_epoch + 1))  # fmt: skip
        return future


def test_committed_isr_changes_are_counted(tmp_path: Path) -> None:
    clock = ManualClock()
    log = Log.open(tmp_path / "t-9", LogConfig.from_props({}), clock=clock)
    part = Partition(TopicPartition("t", 9), log, local_broker_id=1, clock=clock,
                     replica_lag_time_max_ms=1000, alter_partition_sender=CommittingController())  # fmt: skip
    part.make_leader(LeaderAndIsrPartitionState("t", 9, 1, 1, 1, (1, 2), 1, (1, 2)))
    part.append_records_to_leader(build_batch([(0, None, b"v")]), required_acks=1)
    shrinks, expands = ISR_CHANGE_STATS.shrinks, ISR_CHANGE_STATS.expands

    async def main() -> None:
        clock.advance(2000)  # follower 2 has not fetched for longer than the lag
        assert part.maybe_shrink_isr()
        await asyncio.sleep(0)  # the controller's answer is handled on the next turn
        await asyncio.sleep(0)
        assert part.isr == frozenset({1})
        part.advance_local_committed()
        part.update_follower_fetch_state(2, part.log_end_offset, 0, -1, clock.milliseconds())
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert part.isr == frozenset({1, 2})

    asyncio.run(main())
    log.close()
    assert (ISR_CHANGE_STATS.shrinks - shrinks, ISR_CHANGE_STATS.expands - expands) == (1, 1)
