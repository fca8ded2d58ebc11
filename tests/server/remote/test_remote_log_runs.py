"""Each tiered partition's RemoteLogManager run goes at its own pace (Kafka schedules each
partition's RLM task on its own): a follower whose read of ``__remote_log_metadata`` hangs
(a leader that does not answer, bounded only by remote.log.metadata.consume.wait.ms) holds
no other partition's copies or expirations. The scheduler's clock between passes is
injected: each pass runs when the test lets it, nothing is slept."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tidelog.server.remote_log_manager import RLMTask, TieredPartition
from tidelog.storage.remote.metadata import TopicIdPartition
from tidelog.storage.remote.metadata_cache import RemoteLogMetadataCache
from tidelog.util.topic_partition import TopicPartition

from .harness import TOPIC, FollowerView, open_tiered

DEADLINE_S = 20
INTERVAL_MS = 30_000  # remote.log.manager.task.interval.ms's default
LEADERS = (0, 1)
FOLLOWER = 2


class Passes:
    """The RemoteLogManager's sleep between passes: over only when the test says so."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.next = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        await self.next.wait()
        self.next.clear()


def test_a_hung_follower_read_holds_no_other_partitions_copies(tmp_path: Path) -> None:
    t = open_tiered(tmp_path / "logs", tmp_path / "remote", partitions=3)
    passes = Passes()
    t.rlm.sleep = passes.sleep
    leader_partitions = t.rlm.partitions

    def partitions() -> list[TieredPartition]:
        return [FollowerView(p.topic_partition, p.log, p.topic_id, p.leader_epoch)
                if p.topic_partition.partition == FOLLOWER else p for p in leader_partitions()]

    t.rlm.partitions = partitions
    never = asyncio.Event()  # the leader of the metadata partition never answers
    real_refresh = t.rlm.rlmm.refresh
    reads: list[int] = []

    async def refresh(tip: TopicIdPartition) -> RemoteLogMetadataCache:
        if tip.partition == FOLLOWER:
            reads.append(tip.partition)
            await never.wait()
        return await real_refresh(tip)

    t.rlm.rlmm.refresh = refresh  # type: ignore[method-assign]
    copied = {p: asyncio.Event() for p in LEADERS}
    real_copy = t.rlm.copy_log_segments_to_remote

    async def copy(task: RLMTask, p: TieredPartition) -> None:
        await real_copy(task, p)
        copied[p.topic_partition.partition].set()

    t.rlm.copy_log_segments_to_remote = copy  # type: ignore[method-assign]

    async def leaders_copied() -> dict[int, int]:
        for p in LEADERS:
            await asyncio.wait_for(copied[p].wait(), DEADLINE_S)
            copied[p].clear()
        return {p: t.log(p).highest_offset_in_remote_storage for p in LEADERS}

    async def main() -> None:
        for p in (*LEADERS, FOLLOWER):
            t.produce(20, partition=p)
        t.rlm.start()
        first = await leaders_copied()  # pass 1: the follower's read hangs meanwhile
        assert all(offset > 0 for offset in first.values())
        for p in LEADERS:
            t.produce(20, partition=p, start=20)
        t.clock.advance(INTERVAL_MS)
        passes.next.set()
        second = await leaders_copied()  # pass 2, the follower's read still hanging
        assert all(second[p] > first[p] for p in LEADERS), (first, second)
        assert reads == [FOLLOWER]  # not started again while its run goes on
        assert t.log(FOLLOWER).highest_offset_in_remote_storage == -1
        assert passes.asked == [INTERVAL_MS / 1000] * 2
        await t.rlm.stop()  # the hung read is cancelled

    try:
        asyncio.run(main())
    finally:
        t.close()


def test_a_follower_run_is_cancelled_when_the_partition_leaves(tmp_path: Path) -> None:
    """A partition no longer hosted here (or now led here) stops its follower's hung read,
    and its next run starts at once as the new role's."""
    t = open_tiered(tmp_path / "logs", tmp_path / "remote", partitions=1)
    leader_partitions = t.rlm.partitions
    following = [True]

    def partitions() -> list[TieredPartition]:
        return [FollowerView(p.topic_partition, p.log, p.topic_id, p.leader_epoch)
                if following[0] else p for p in leader_partitions()]

    t.rlm.partitions = partitions
    never = asyncio.Event()
    real_refresh = t.rlm.rlmm.refresh

    async def refresh(tip: TopicIdPartition) -> RemoteLogMetadataCache:
        await never.wait()
        return await real_refresh(tip)

    t.rlm.rlmm.refresh = refresh  # type: ignore[method-assign]

    async def main() -> None:
        t.produce(20)
        (hung,) = t.rlm.start_pass()
        await asyncio.sleep(0)  # (one turn of the loop: the read starts)
        assert not hung.done()
        following[0] = False  # led here now
        t.rlm.rlmm.refresh = real_refresh  # type: ignore[method-assign]
        (run,) = t.rlm.start_pass()
        await run
        assert hung.cancelled()
        assert t.rlm.tasks[TopicPartition(TOPIC, 0)].is_leader
        assert t.log(0).highest_offset_in_remote_storage > 0

    try:
        asyncio.run(main())
    finally:
        t.close()
