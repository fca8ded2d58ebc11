"""The follower fetcher (server/replication/fetcher.py) between real logs: a leader Log served
in-process (LocalLeaderEndPoint, with the leader's diverging-epoch, OffsetForLeaderEpoch and
ListOffsets rules) and a follower Log on disk. Followers end byte-identical to their leader,
truncate where their log forked (KIP-101/279, Fetch v12+ diverging epochs), start over after
the leader's log start moved past them, and fail partition by partition."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from follower_partitions import follower_partition

from tidelog.config.log_config import LogConfig
from tidelog.protocol.errors import ErrorCode
from tidelog.records import CompressionType, build_batch
from tidelog.server.cluster.partition import Partition
from tidelog.server.replication.fetcher import (
    FetchStateKind,
    FollowerPartition,
    ReplicaFetcher,
    complete_batches_length,
)
from tidelog.server.replication.fetcher_manager import InitialFetchState, fetcher_id
from tidelog.server.replication.leader_endpoint import FetchSettings
from tidelog.server.replication.local_leader_endpoint import LocalLeaderEndPoint
from tidelog.storage.log import Log
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition

T0 = 1_700_000_000_000
TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
SETTINGS = FetchSettings(replica_id=2, partition_max_bytes=300, backoff_ms=20)


class Logs:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = ManualClock(T0)
        self.opened: list[Log] = []

    def open(self, side: str, tp: TopicPartition = TP, **props: str) -> Log:
        log = Log.open(
            self.root / side / f"{tp.topic}-{tp.partition}",
            LogConfig.from_props({"segment.bytes": "4096", **props}),
            clock=self.clock,
        )
        self.opened.append(log)
        return log


@pytest.fixture
def logs(tmp_path: Path) -> Iterator[Logs]:
    made = Logs(tmp_path)
    yield made
    for log in made.opened:
        log.close()


def values(start: int, n: int) -> list[bytes]:
    return [f"v{i}".encode() for i in range(start, start + n)]


def lead(log: Log, epoch: int, vals: list[bytes], **kw: Any) -> None:
    """Append as the leader of ``epoch`` would, then move the HW to the LEO."""
    codec = kw.pop("codec", CompressionType.NONE)
    log.append_as_leader(
        build_batch([(T0, b"k", v) for v in vals], codec, **kw), leader_epoch=epoch
    )
    log.update_high_watermark(log.log_end_offset)


def segment_bytes(log: Log) -> list[bytes]:
    return [p.read_bytes() for p in sorted(log.dir.glob("*.log"))]


async def wait_until(cond: Callable[[], bool], timeout: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(main(), 60))


def fetcher_for(
    leaders: dict[TopicPartition, Log],
    followers: dict[TopicPartition, FollowerPartition],
    epochs: dict[TopicPartition, int],
    *,
    truncate_on_fetch: bool = False,
) -> ReplicaFetcher:
    endpoint = LocalLeaderEndPoint(1, leaders.get, lambda tp: epochs[tp])
    settings = replace(SETTINGS, truncate_on_fetch=truncate_on_fetch)
    return ReplicaFetcher("test-fetcher", endpoint, followers.get, settings)


def test_follower_catches_up_byte_identical(logs: Logs) -> None:
    leader, follower = logs.open("leader"), logs.open("follower")
    lead(leader, 0, values(0, 5))
    lead(leader, 0, values(5, 40), codec=CompressionType.GZIP)
    lead(leader, 3, values(45, 3), producer_id=7, producer_epoch=0, base_sequence=0)
    lead(
        leader,
        3,
        values(48, 2),
        producer_id=8,
        producer_epoch=1,
        base_sequence=0,
        is_transactional=True,
    )
    for i in range(20):  # enough to roll several 4 KiB segments
        codec = CompressionType.LZ4 if i % 2 else CompressionType.NONE
        lead(leader, 5, [v * 40 for v in values(50 + 10 * i, 10)], codec=codec)
    fetcher = fetcher_for({TP: leader}, {TP: follower_partition(follower)}, {TP: 5})

    async def main() -> None:
        fetcher.start()
        fetcher.add_partitions({TP: InitialFetchState(1, 5, 0)})
        await wait_until(lambda: follower.log_end_offset == leader.log_end_offset)
        await wait_until(lambda: follower.high_watermark == leader.high_watermark)
        await fetcher.shutdown()

    run(main)
    assert len(segment_bytes(leader)) > 2
    assert segment_bytes(follower) == segment_bytes(leader)
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
    assert [e.epoch for e in follower.leader_epoch_cache.entries] == [0, 3, 5]
    assert follower.producer_state.last_entry(7) is not None
    # partition_max_bytes 300 cut batches: partial batches waited for the next fetch
    assert fetcher.fetch_requests > 20


def test_new_records_reach_a_caught_up_follower(logs: Logs) -> None:
    leader, follower = logs.open("leader"), logs.open("follower")
    lead(leader, 1, values(0, 3))
    fetcher = fetcher_for({TP: leader}, {TP: follower_partition(follower)}, {TP: 1})

    async def main() -> None:
        fetcher.start()
        fetcher.add_partitions({TP: InitialFetchState(1, 1, 0)})
        await wait_until(lambda: follower.log_end_offset == 3)
        lead(leader, 1, values(3, 4))
        await wait_until(lambda: follower.log_end_offset == 7)
        await wait_until(lambda: follower.high_watermark == 7)
        await fetcher.shutdown()

    run(main)
    assert segment_bytes(follower) == segment_bytes(leader)


@pytest.mark.parametrize("on_fetch", [False, True])
def test_diverging_epoch_truncates_where_the_logs_forked(logs: Logs, on_fetch: bool) -> None:
    """The follower led epoch 1 and wrote offsets 5-7 nobody else has; the new leader (epoch
    2) wrote its own 5-9. Fetch v12's last_fetched_epoch=1 gets diverging epoch (0, 5) back:
    the follower drops 5-7 and copies the leader's 5-9."""
    leader, follower = logs.open("leader"), logs.open("follower")
    lead(leader, 0, values(0, 5))
    follower.append_as_follower(leader.read(0, 1 << 20).records.read())
    follower.append_as_leader(build_batch([(T0, b"k", b"lost") for _ in range(3)]), leader_epoch=1)
    lead(leader, 2, values(5, 5))
    fetcher = fetcher_for(
        {TP: leader}, {TP: follower_partition(follower)}, {TP: 2}, truncate_on_fetch=on_fetch
    )

    async def main() -> None:
        fetcher.start()
        fetcher.add_partitions({TP: InitialFetchState(1, 2, follower.log_end_offset)})
        await wait_until(
            lambda: (
                follower.log_end_offset == 10 and follower.leader_epoch_cache.latest_epoch() == 2
            )
        )
        await fetcher.shutdown()

    run(main)
    assert segment_bytes(follower) == segment_bytes(leader)
    assert [(e.epoch, e.start_offset) for e in follower.leader_epoch_cache.entries] == [
        (0, 0),
        (2, 5),
    ]


@pytest.mark.parametrize("on_fetch", [False, True])
def test_truncation_to_the_smaller_of_both_epoch_ends(logs: Logs, on_fetch: bool) -> None:
    """KIP-279: follower epochs {0: 0-2, 1: 3-5}, leader {0: 0-3, 2: 4-7}. The leader answers
    (0, 4) for epoch 1; the follower's epoch 0 ends at 3, so it truncates to min(3, 4) = 3,
    then fetches offset 3 (epoch 0) onward from the leader."""
    leader, follower = logs.open("leader"), logs.open("follower")
    lead(leader, 0, values(0, 3))
    follower.append_as_follower(leader.read(0, 1 << 20).records.read())
    lead(leader, 0, values(3, 1))
    lead(leader, 2, values(4, 4))
    follower.append_as_leader(build_batch([(T0, b"k", b"x") for _ in range(3)]), leader_epoch=1)
    fetcher = fetcher_for(
        {TP: leader}, {TP: follower_partition(follower)}, {TP: 2}, truncate_on_fetch=on_fetch
    )

    async def main() -> None:
        fetcher.start()
        fetcher.add_partitions({TP: InitialFetchState(1, 2, 6)})
        await wait_until(
            lambda: follower.log_end_offset == 8 and follower.leader_epoch_cache.latest_epoch() == 2
        )
        await fetcher.shutdown()

    run(main)
    assert segment_bytes(follower) == segment_bytes(leader)


def test_leader_log_start_past_the_follower(logs: Logs) -> None:
    """DeleteRecords/retention on the leader moved its log start to 12 while the follower
    had 3 records: OFFSET_OUT_OF_RANGE, the follower starts over at 12."""
    leader, follower = logs.open("leader"), logs.open("follower")
    lead(leader, 0, values(0, 3))
    follower.append_as_follower(leader.read(0, 1 << 20).records.read())
    lead(leader, 0, values(3, 12))
    leader.maybe_increment_log_start_offset(12, "test")
    fetcher = fetcher_for({TP: leader}, {TP: follower_partition(follower)}, {TP: 0})

    async def main() -> None:
        fetcher.start()
        fetcher.add_partitions({TP: InitialFetchState(1, 0, 3)})
        await wait_until(lambda: follower.log_end_offset == 15)
        await fetcher.shutdown()

    run(main)
    assert follower.log_start_offset == 12
    got = follower.read(12, 1 << 20).records.read()
    assert got == leader.read(12, 1 << 20).records.read()
    assert len(got) > 0


def test_unknown_offset_asks_the_leader(logs: Logs) -> None:
    """InitialFetchState with fetch offset -1: the follower resets to the leader's end."""
    leader, follower = logs.open("leader"), logs.open("follower")
    lead(leader, 0, values(0, 4))
    leader.maybe_increment_log_start_offset(2, "test")
    fetcher = fetcher_for({TP: leader}, {TP: follower_partition(follower)}, {TP: 0})

    async def main() -> None:
        fetcher.start()
        fetcher.add_partitions({TP: InitialFetchState(1, 0, -1)})
        assert fetcher.fetch_state(TP) is not None
        await wait_until(lambda: follower.log_end_offset == 4)
        await fetcher.shutdown()

    run(main)
    assert follower.log_start_offset == 2


def test_fenced_partition_fails_alone(logs: Logs) -> None:
    """Our epoch 3 for t-1 is older than the leader's 5: FENCED_LEADER_EPOCH takes t-1 out of
    the fetcher (it waits for a newer LeaderAndIsr); t-0 keeps replicating."""
    leader0, leader1 = logs.open("leader", TP), logs.open("leader", TP1)
    follower0, follower1 = logs.open("follower", TP), logs.open("follower", TP1)
    lead(leader0, 5, values(0, 3))
    lead(leader1, 5, values(0, 3))
    fetcher = fetcher_for(
        {TP: leader0, TP1: leader1},
        {TP: follower_partition(follower0), TP1: follower_partition(follower1)},
        {TP: 5, TP1: 5},
    )

    async def main() -> None:
        fetcher.start()
        fetcher.add_partitions({TP: InitialFetchState(1, 5, 0), TP1: InitialFetchState(1, 3, 0)})
        await wait_until(lambda: TP1 in fetcher.failed_partitions)
        lead(leader0, 5, values(3, 2))
        await wait_until(lambda: follower0.log_end_offset == 5)
        assert fetcher.fetch_state(TP1) is None
        # a newer LeaderAndIsr brings it back
        fetcher.add_partitions({TP1: InitialFetchState(1, 5, 0)})
        assert TP1 not in fetcher.failed_partitions
        await wait_until(lambda: follower1.log_end_offset == 3)
        await fetcher.shutdown()

    run(main)
    assert segment_bytes(follower1) == segment_bytes(leader1)


def test_failing_append_fails_only_its_partition(logs: Logs) -> None:
    leader0, leader1 = logs.open("leader", TP), logs.open("leader", TP1)
    follower0, follower1 = logs.open("follower", TP), logs.open("follower", TP1)
    lead(leader0, 0, values(0, 3))
    lead(leader1, 0, values(0, 3))

    class Broken(Partition):
        def append_records_to_follower(self, records: bytes) -> Any:
            raise OSError("disk gone")

    fetcher = fetcher_for(
        {TP: leader0, TP1: leader1},
        {TP: follower_partition(follower0), TP1: Broken(TP1, follower1, local_broker_id=2, clock=logs.clock)},
        {TP: 0, TP1: 0},
    )

    async def main() -> None:
        fetcher.start()
        fetcher.add_partitions({TP: InitialFetchState(1, 0, 0), TP1: InitialFetchState(1, 0, 0)})
        await wait_until(lambda: TP1 in fetcher.failed_partitions)
        await wait_until(lambda: follower0.log_end_offset == 3)
        await fetcher.shutdown()

    run(main)
    assert follower1.log_end_offset == 0


def test_not_leader_backs_off_and_retries(logs: Logs) -> None:
    """The leader does not host the partition yet (NOT_LEADER_OR_FOLLOWER): retried after
    the backoff until it does."""
    leader, follower = logs.open("leader"), logs.open("follower")
    lead(leader, 0, values(0, 2))
    hosted: dict[TopicPartition, Log] = {}
    endpoint = LocalLeaderEndPoint(1, hosted.get, lambda tp: 0)
    fetcher = ReplicaFetcher("f", endpoint, {TP: follower_partition(follower)}.get, SETTINGS)

    async def main() -> None:
        fetcher.start()
        fetcher.add_partitions({TP: InitialFetchState(1, 0, 0)})
        await wait_until(lambda: endpoint.fetches >= 2)
        state = fetcher.fetch_state(TP)
        assert state is not None and state.kind is FetchStateKind.FETCHING
        assert state.delayed_until > 0  # backing off
        hosted[TP] = leader
        await wait_until(lambda: follower.log_end_offset == 2)
        await fetcher.shutdown()

    run(main)


def test_complete_batches_length() -> None:
    a = build_batch([(T0, b"k", b"a" * 50)])
    b = build_batch([(T0, b"k", b"b" * 70)])
    assert complete_batches_length(a + b) == len(a) + len(b)
    assert complete_batches_length(a + b[:-1]) == len(a)
    assert complete_batches_length(a + b[:11]) == len(a)
    assert complete_batches_length(b"") == 0


def test_fetcher_id_is_kafkas() -> None:
    # Utils.abs(31 * topic.hashCode() + partition) % 4 and % 3, as Java 17 prints them
    assert fetcher_id(TopicPartition("orders", 3), 4) == 2
    tps = [TopicPartition("__consumer_offsets", p) for p in range(6)]
    assert [fetcher_id(tp, 3) for tp in tps] == [2, 1, 0, 2, 1, 0]  # negative sums: abs, not mask
    assert {fetcher_id(TopicPartition("t", p), 3) for p in range(12)} == {0, 1, 2}
    assert ErrorCode.FENCED_LEADER_EPOCH == 74


def test_partition_follower_starts_inside_the_leaders_first_batch(logs: Logs) -> None:
    """A new follower (cluster.Partition over an empty log) of a leader whose log start (12,
    after DeleteRecords) falls inside a batch (3-14): the follower starts its log at the
    batch's base offset, then takes the leader's log start."""
    leader, follower_log = logs.open("leader"), logs.open("follower")
    lead(leader, 0, values(0, 3))
    lead(leader, 0, values(3, 12))
    leader.maybe_increment_log_start_offset(12, "test")
    follower = Partition(TP, follower_log, local_broker_id=2, clock=logs.clock)
    fetcher = fetcher_for({TP: leader}, {TP: follower}, {TP: 0})

    async def main() -> None:
        fetcher.start()
        fetcher.add_partitions({TP: InitialFetchState(1, 0, 0)})
        await wait_until(lambda: follower_log.log_end_offset == 15)
        await fetcher.shutdown()

    run(main)
    assert TP not in fetcher.failed_partitions
    assert follower_log.log_start_offset == 12
    assert follower_log.read(12, 1 << 20).records.read() == leader.read(12, 1 << 20).records.read()


def test_a_partition_added_while_the_session_is_forgotten_is_fetched_without_the_backoff(
    logs: Logs,
) -> None:
    """Nothing to fetch: the fetcher tells the leader's session to forget, then idles until a
    partition change. A partition added while that forgetting Fetch is out must end the idle
    wait, not be noticed only after ``replica.fetch.backoff.ms`` (Kafka's partitionMapCond is
    signalled under the lock the fetcher holds while it builds its request)."""
    leader, follower = logs.open("leader"), logs.open("follower")
    lead(leader, 1, values(0, 3))
    endpoint = LocalLeaderEndPoint(1, {TP: leader}.get, lambda tp: 1)
    settings = replace(SETTINGS, backoff_ms=60_000)
    fetcher = ReplicaFetcher("test-fetcher", endpoint, {TP: follower_partition(follower)}.get, settings)
    forgetting = asyncio.Event()
    release = asyncio.Event()
    fetch = endpoint.fetch

    async def gated_fetch(partitions: Any) -> Any:
        if not partitions:  # the forgetting Fetch: held until the partition is added
            forgetting.set()
            await release.wait()
        return await fetch(partitions)

    endpoint.fetch = gated_fetch  # type: ignore[method-assign]

    async def main() -> None:
        fetcher.start()
        await asyncio.wait_for(forgetting.wait(), 10)
        fetcher.add_partitions({TP: InitialFetchState(1, 1, 0)})
        release.set()
        # the backoff is a minute: reaching the leader's end within 20 s is the wake-up
        await wait_until(lambda: follower.log_end_offset == 3)
        await fetcher.shutdown()

    run(main)
    assert segment_bytes(follower) == segment_bytes(leader)
