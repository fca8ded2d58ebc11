"""A started ReplicaManager over one log dir with one topic, and a small plain batch: what the
tests of the append path share."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tidelog.config.broker_config import BrokerConfig
from tidelog.records import RecordBatchBuilder
from tidelog.server.replica_manager import ReplicaManager
from tidelog.util.clock import ManualClock


def started_replica_manager(log_dir: Path, topic: str, partitions: int,
                            configs: Mapping[str, str]) -> ReplicaManager:
    rm = ReplicaManager(BrokerConfig({"log.dirs": str(log_dir)}), ManualClock())
    rm.startup()
    rm.create_topic(topic, partitions, dict(configs))
    return rm


def plain_batch(n: int = 3) -> bytes:
    """``n`` records with key b"k" and values v0, v1, ...; timestamps from 1,700,000,000,000."""
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"k", b"v%d" % i)
    return b.build()
