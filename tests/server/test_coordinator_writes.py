"""The coordinators' replicated appends over a real ReplicaManager: offsets remembered per
partition and awaited through DelayedProduce; refusals answered with Kafka's coordinator
errors (appendForGroup's mapping)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tidelog.config.broker_config import BrokerConfig
from tidelog.protocol.errors import ErrorCode
from tidelog.records import RecordBatchBuilder
from tidelog.server.coordinator.partition_writer import CoordinatorWriteError, PartitionWriter
from tidelog.server.replica_manager import ReplicaManager
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition

TOPIC = "__consumer_offsets"


def _rm(tmp_path: Path, configs: dict[str, str] | None = None) -> ReplicaManager:
    rm = ReplicaManager(BrokerConfig({"log.dirs": str(tmp_path)}), ManualClock())
    rm.startup()
    rm.create_topic(TOPIC, 2, {"cleanup.policy": "compact", **(configs or {})})
    return rm


def _batch(n: int) -> bytes:
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"k%d" % i, b"v")
    return b.build()


def test_appends_are_awaited_until_the_isr_has_them(tmp_path: Path) -> None:
    rm = _rm(tmp_path)
    try:
        appender = PartitionWriter(rm, TOPIC, 1000)
        assert appender.append(1, _batch(3)) == 0
        assert appender.append(1, _batch(2)) == 3
        assert appender.pending == {1: 5}
        assert asyncio.run(appender.replicated(1)) == ErrorCode.NONE
        assert appender.pending == {}
        partition = rm.get_partition(TopicPartition(TOPIC, 1))
        assert partition is not None and partition.high_watermark == 5
        assert asyncio.run(appender.replicated(0)) == ErrorCode.NONE  # nothing written there
    finally:
        rm.shutdown()


@pytest.mark.parametrize(("configs", "partition", "expected"), [
    ({"min.insync.replicas": "2"}, 0, ErrorCode.COORDINATOR_NOT_AVAILABLE),  # NOT_ENOUGH_REPLICAS
    ({}, 7, ErrorCode.COORDINATOR_NOT_AVAILABLE),  # UNKNOWN_TOPIC_OR_PARTITION
])
def test_refused_appends_answer_the_coordinator_error(
    tmp_path: Path, configs: dict[str, str], partition: int, expected: ErrorCode
) -> None:
    rm = _rm(tmp_path, configs)
    try:
        appender = PartitionWriter(rm, TOPIC, 1000)
        with pytest.raises(CoordinatorWriteError) as info:
            appender.append(partition, _batch(1))
        assert info.value.error == expected
        assert appender.pending == {}
    finally:
        rm.shutdown()
