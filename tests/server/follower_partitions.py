"""A follower's hosted Partition over a real Log, as the replica fetcher writes to it."""

from __future__ import annotations

from tidelog.server.cluster.partition import Partition
from tidelog.storage.log import Log
from tidelog.util.clock import SystemClock

FOLLOWER_ID = 2


def follower_partition(log: Log) -> Partition:
    """The Partition a broker hosts for ``log`` (named by its dir) before any LeaderAndIsr."""
    tp = log.topic_partition
    assert tp is not None, log.dir
    return Partition(tp, log, local_broker_id=FOLLOWER_ID, clock=SystemClock())
