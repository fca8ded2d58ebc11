"""UnderReplicatedPartitions, UnderMinIsrPartitionCount and AtMinIsrPartitionCount over real
partitions (cluster.Partition on real logs) made leader with different ISRs, and followed
partitions not counted."""

from __future__ import annotations

from pathlib import Path

from tidelog.config.log_config import LogConfig
from tidelog.server.cluster.partition import Partition
from tidelog.server.cluster.partition_state import LeaderAndIsrPartitionState
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
