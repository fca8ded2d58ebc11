"""ReplicaManager.append_records_now: a Produce's appends made before it returns, in order;
None (answers final, no coroutine) when nothing is to be waited for; otherwise an awaitable
that ends once the answers are final (the group commit's fsync, a heavy batch written on a
worker thread). Its inline checks answer as partition_or_error and check_append do."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.fast import ProducePartitionResult
from tidelog.records import RecordBatchBuilder
from tidelog.records.compression import CompressionType
from tidelog.server.replica_manager import ReplicaManager
from tidelog.util.topic_partition import TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replica_support import plain_batch, started_replica_manager

TP = TopicPartition("now", 0)


def _rm(tmp_path: Path, **configs: str) -> ReplicaManager:
    return started_replica_manager(tmp_path, TP.topic, 2, configs)


def test_a_common_append_is_answered_on_return(tmp_path: Path) -> None:
    rm = _rm(tmp_path)
    results = [ProducePartitionResult(0), ProducePartitionResult(0)]

    async def produce() -> object:
        # a segment's first batch may go to the writer thread (the reference path): waited for
        first = rm.append_records_now(-1, 30_000, [(TP, plain_batch(), results[0])])
        if first is not None:
            await first
        return rm.append_records_now(-1, 30_000, [(TP, plain_batch(2), results[1])])

    assert asyncio.run(produce()) is None
    assert [(r.error_code, r.base_offset) for r in results] == [(0, 0), (0, 3)]
    assert rm.partitions[TP].log.high_watermark == 5  # acks=-1: the ISR (this broker) has both
    rm.shutdown()


def test_a_due_flush_is_awaited_and_the_hw_follows_it(tmp_path: Path) -> None:
    rm = _rm(tmp_path, **{"flush.messages": "1"})
    result = ProducePartitionResult(0)
    lg = rm.partitions[TP].log

    async def produce() -> tuple[int, int]:
        waits = rm.append_records_now(-1, 30_000, [(TP, plain_batch(), result)])
        assert waits is not None
        before = lg.high_watermark  # appended, not yet flushed: not visible, not answered
        await waits
        return before, lg.high_watermark

    assert asyncio.run(produce()) == (0, 3)
    assert (result.error_code, result.base_offset) == (0, 0)
    assert lg.recovery_point == 3  # on disk before the answer
    rm.shutdown()


def test_a_heavy_batch_goes_off_the_loop_after_the_appends_before_it(tmp_path: Path) -> None:
    rm = _rm(tmp_path)
    other = TopicPartition(TP.topic, 1)
    b = RecordBatchBuilder(CompressionType.GZIP)
    for i in range(400):  # random values: compressed and still >= 8 KiB
        b.append(1_700_000_000_000 + i, b"k", os.urandom(64))
    heavy = b.build()
    assert len(heavy) >= 8 << 10
    results = [ProducePartitionResult(0), ProducePartitionResult(1), ProducePartitionResult(0)]

    async def produce() -> None:
        waits = rm.append_records_now(1, 30_000, [(TP, plain_batch(), results[0]),
                                                  (other, heavy, results[1]),
                                                  (TP, plain_batch(2), results[2])])
        assert waits is not None
        assert results[0].base_offset == 0  # made before the heavy one, on return
        assert results[1].base_offset == results[2].base_offset == -1
        await waits

    asyncio.run(produce())
    assert [(r.error_code, r.base_offset) for r in results] == [(0, 0), (0, 0), (0, 3)]
    assert rm.partitions[other].log.log_end_offset == 400
    rm.shutdown()


def test_the_inline_checks_answer_as_kafka(tmp_path: Path) -> None:
    rm = _rm(tmp_path, **{"min.insync.replicas": "2"})
    short, acks1, unknown = (ProducePartitionResult(0), ProducePartitionResult(0),
                             ProducePartitionResult(0))

    async def produce() -> None:
        assert rm.append_records_now(-1, 30_000, [(TP, plain_batch(), short)]) is None
        waits = rm.append_records_now(1, 30_000, [(TP, plain_batch(), acks1)])
        if waits is not None:  # (a segment's first batch may go to the writer thread)
            await waits
        assert rm.append_records_now(
            1, 30_000, [(TopicPartition("absent", 0), plain_batch(), unknown)]) is None

    asyncio.run(produce())
    assert short.error_code == ErrorCode.NOT_ENOUGH_REPLICAS  # the ISR is 1 < 2: not appended
    assert (acks1.error_code, acks1.base_offset) == (0, 0)
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    rm.shutdown()


def test_a_topic_config_change_applies_to_the_next_append(tmp_path: Path) -> None:
    """The log's config is read per append from where its change puts it: a topic's
    min.insync.replicas raised above the ISR refuses the next acks=-1 append, and a
    max.message.bytes lowered under the batch refuses the next one; both back to their
    defaults, it appends."""
    rm = _rm(tmp_path)
    lg = rm.partitions[TP].log

    def produce(acks: int) -> ProducePartitionResult:
        result = ProducePartitionResult(0)

        async def run() -> None:
            waits = rm.append_records_now(acks, 30_000, [(TP, plain_batch(), result)])
            if waits is not None:
                await waits

        asyncio.run(run())
        return result

    assert produce(-1).error_code == 0
    rm.logs.update_topic_config(TP.topic, {"min.insync.replicas": "2"})
    assert lg.config.min_insync_replicas == 2
    assert produce(-1).error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    rm.logs.update_topic_config(TP.topic, {"max.message.bytes": "20"})
    assert lg.config.min_insync_replicas == 1
    assert produce(-1).error_code == ErrorCode.MESSAGE_TOO_LARGE
    rm.logs.update_topic_config(TP.topic, {})
    end = lg.log_end_offset
    assert (produce(-1).error_code, lg.log_end_offset) == (0, end + 3)
    rm.shutdown()
