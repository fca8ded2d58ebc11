"""Three ReplicaManagers in one process (real logs in temporary dirs, a ManualClock): a leader
and two followers that copy the leader's batches by hand (a stand-in for the follower fetcher:
read to the leader's log end, append as follower, report the fetch to the leader). The high
watermark, ISR shrink and expansion through AlterPartition, acks=-1 parked in DelayedProduce,
min.insync.replicas, and leader-epoch fencing, as Kafka's Partition and ReplicaManager do."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Iterable, Iterator, Mapping
from pathlib import Path

import pytest

from tidelog.config.broker_config import BrokerConfig
from tidelog.protocol.errors import ErrorCode
from tidelog.records import ControlRecordType, InvalidRecordError, RecordBatchBuilder
from tidelog.server.cluster.partition_state import LeaderAndIsr, LeaderAndIsrPartitionState
from tidelog.server.errors import ApiError
from tidelog.server.metadata.cache import UpdateMetadataDelta
from tidelog.server.metadata.image import BrokerInfo, PartitionRegistration
from tidelog.server.metadata.local_store import LocalMetadataStore
from tidelog.server.metadata.store import TopicInfo
from tidelog.server.replica_manager import ReplicaManager
from tidelog.server.replication.fetcher_manager import InitialFetchState
from tidelog.storage.log_read import FetchIsolation
from tidelog.storage.validator import AppendOrigin
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition

T0 = 1_700_000_000_000
TP = TopicPartition("t", 0)
TOPIC_ID = uuid.UUID("6f1c1e8a-3b0a-4d5e-9a3b-0c1d2e3f4a5b")
LAG_MS = 30_000


class Controller:
    """AlterPartition as the controller answers it: commits the proposal at the next
    partition epoch (or refuses it with ``refuse``), and records what it was asked."""

    def __init__(self) -> None:
        self.proposals: list[tuple[TopicPartition, LeaderAndIsr]] = []
        self.refuse: ErrorCode | None = None

    def submit(self, tp: TopicPartition,
               leader_and_isr: LeaderAndIsr) -> Awaitable[LeaderAndIsr | ErrorCode]:
        self.proposals.append((tp, leader_and_isr))
        fut: asyncio.Future[LeaderAndIsr | ErrorCode] = \
            asyncio.get_running_loop().create_future()
        if self.refuse is not None:
            fut.set_result(self.refuse)
        else:
            p = leader_and_isr
            fut.set_result(LeaderAndIsr(p.leader, p.leader_epoch, p.isr, p.partition_epoch + 1))
        return fut


class Fetchers:
    """The FetcherManager seam, recording what the ReplicaManager asked."""

    def __init__(self) -> None:
        self.added: dict[TopicPartition, InitialFetchState] = {}
        self.removed: list[TopicPartition] = []

    def add_fetcher_for_partitions(self, states: Mapping[TopicPartition,
                                                         InitialFetchState]) -> None:
        self.added.update(states)

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None:
        self.removed.extend(tps)


class Cluster:
    def __init__(self, root: Path, min_isr: int = 1, **props: str) -> None:
        self.clock = ManualClock(T0)
        self.controller = Controller()
        self.fetchers: dict[int, Fetchers] = {}
        self.rms: dict[int, ReplicaManager] = {}
        for node in (1, 2, 3):
            config = BrokerConfig({"log.dirs": str(root / str(node)), "node.id": node,
                                   "zookeeper.connect": "127.0.0.1:2181", **props})
            store = LocalMetadataStore(config.log_dirs, node, "c1")
            self.fetchers[node] = Fetchers()
            rm = ReplicaManager(config, self.clock, store=store,
                                fetcher_manager=self.fetchers[node],
                                alter_partition_sender=self.controller)
            rm.startup()
            store.create_topic(TopicInfo("t", TOPIC_ID, 1,
                                         {"min.insync.replicas": str(min_isr)},
                                         {0: (1, 2, 3)}))
            self.rms[node] = rm

    def leader_and_isr(self, leader: int, epoch: int, isr: tuple[int, ...] = (1, 2, 3),
                       nodes: Iterable[int] = (1, 2, 3), controller_epoch: int = 1) -> None:
        state = LeaderAndIsrPartitionState("t", 0, controller_epoch, leader, epoch, isr,
                                           epoch, (1, 2, 3))
        for node in nodes:
            result = self.rms[node].become_leader_or_follower(0, controller_epoch, [state],
                                                              {"t": TOPIC_ID})
            assert result.errors[TP] == ErrorCode.NONE

    def fetch(self, follower: int, leader: int = 1) -> None:
        """One follower fetch: copy the leader's batches past our end, then report our new
        end to the leader and take its high watermark."""
        mine = self.rms[follower].partitions[TP]
        theirs = self.rms[leader].partitions[TP]
        end = theirs.log_end_offset
        if mine.log_end_offset < end:
            read = theirs.log.read(mine.log_end_offset, 1 << 20, FetchIsolation.LOG_END, True)
            mine.append_records_to_follower(read.records.read())
        theirs.update_follower_fetch_state(follower, mine.log_end_offset, mine.log_start_offset,
                                           1, theirs.clock.milliseconds(), end)
        mine.update_follower_high_watermark(theirs.high_watermark, theirs.log_start_offset)

    def close(self) -> None:
        for rm in self.rms.values():
            rm.shutdown()


def batch(n: int = 3) -> bytes:
    b = RecordBatchBuilder()
    for i in range(n):
        b.append(T0 + i, b"k", b"v%d" % i)
    return b.build()


def run(coro: Awaitable[object]) -> object:
    return asyncio.new_event_loop().run_until_complete(coro)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    yield c
    c.close()


@pytest.fixture
def strict(tmp_path: Path) -> Iterator[Cluster]:
    """min.insync.replicas=3 on the topic."""
    c = Cluster(tmp_path, min_isr=3)
    yield c
    c.close()


def test_high_watermark_is_the_smallest_end_offset_in_the_isr(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 5)
    leader = cluster.rms[1]
    leader.append(TP, batch(3))
    leader.append(TP, batch(2))
    p = leader.partitions[TP]
    assert (p.log_end_offset, p.high_watermark) == (5, 0)
    cluster.fetch(2)
    assert p.high_watermark == 0  # 3 has nothing yet
    cluster.fetch(3)
    assert p.high_watermark == 5
    cluster.fetch(2)
    cluster.fetch(3)
    for node in (2, 3):  # followers learn it from their next fetch
        follower = cluster.rms[node].partitions[TP]
        assert (follower.log_end_offset, follower.high_watermark) == (5, 5)
        assert follower.latest_epoch() == 5  # the leader's epoch, stamped on its batches
    assert p.latest_epoch() == 5


def test_acks_all_waits_for_the_isr_then_answers(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 1)
    leader = cluster.rms[1]

    async def main() -> dict[TopicPartition, ErrorCode]:
        info = leader.append(TP, batch(4), required_acks=-1)
        waiting = asyncio.ensure_future(leader.wait_replicated({TP: info.last_offset + 1},
                                                               30_000))
        await asyncio.sleep(0)
        cluster.fetch(2)
        await asyncio.sleep(0)
        assert not waiting.done()  # 3 is in the ISR and has nothing
        cluster.fetch(3)
        return await asyncio.wait_for(waiting, 5)

    assert run(main()) == {TP: ErrorCode.NONE}
    assert len(leader.delayed_produce) == 0


def test_acks_all_times_out_without_the_followers(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 1)
    leader = cluster.rms[1]

    async def main() -> dict[TopicPartition, ErrorCode]:
        info = leader.append(TP, batch(), required_acks=-1)
        cluster.fetch(2)
        return await leader.wait_replicated({TP: info.last_offset + 1}, 50)

    assert run(main()) == {TP: ErrorCode.REQUEST_TIMED_OUT}
    assert leader.partitions[TP].high_watermark == 0


def test_lagging_follower_leaves_the_isr_and_the_high_watermark_moves(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 2)
    leader = cluster.rms[1]
    p = leader.partitions[TP]

    async def main() -> dict[TopicPartition, ErrorCode]:
        info = leader.append(TP, batch(), required_acks=-1)
        waiting = asyncio.ensure_future(
            leader.wait_replicated({TP: info.last_offset + 1}, 30_000))
        cluster.fetch(2)
        cluster.clock.advance(LAG_MS)
        leader.maybe_shrink_isr()
        assert cluster.controller.proposals == []  # lagging exactly the limit: still in sync
        cluster.clock.advance(1)
        cluster.fetch(2)  # 2 keeps fetching: caught up
        leader.maybe_shrink_isr()
        await asyncio.sleep(0)
        return await asyncio.wait_for(waiting, 5)

    assert run(main()) == {TP: ErrorCode.NONE}
    assert cluster.controller.proposals == [(TP, LeaderAndIsr(1, 2, (1, 2), 2))]
    assert p.isr == {1, 2} and p.partition_epoch == 3 and p.high_watermark == 3


def test_caught_up_follower_joins_the_isr_again(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 1, isr=(1, 2))
    leader = cluster.rms[1]
    p = leader.partitions[TP]

    async def main() -> None:
        leader.append(TP, batch(5))
        cluster.fetch(2)
        assert p.high_watermark == 5  # 3 is outside the ISR and not caught up
        cluster.fetch(3)
        await asyncio.sleep(0)

    run(main())
    assert cluster.controller.proposals == [(TP, LeaderAndIsr(1, 1, (1, 2, 3), 1))]
    assert p.isr == {1, 2, 3}


def test_refused_isr_change_keeps_the_committed_isr(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 1)
    cluster.controller.refuse = ErrorCode.INVALID_UPDATE_VERSION
    leader = cluster.rms[1]

    async def main() -> None:
        cluster.clock.advance(LAG_MS + 1)
        assert leader.partitions[TP].maybe_shrink_isr()
        await asyncio.sleep(0)

    run(main())
    p = leader.partitions[TP]
    assert p.isr == {1, 2, 3} and not p.state.in_flight and p.partition_epoch == 1


def test_min_insync_replicas_refuses_acks_all_before_the_append(strict: Cluster) -> None:
    strict.leader_and_isr(1, 1, isr=(1, 2))
    leader = strict.rms[1]
    with pytest.raises(ApiError) as err:
        leader.append(TP, batch(), required_acks=-1)
    assert err.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.partitions[TP].log_end_offset == 0  # nothing appended
    assert leader.append(TP, batch(), required_acks=1).first_offset == 0


def test_isr_shrinking_while_waiting_is_not_enough_replicas_after_append(
        strict: Cluster) -> None:
    strict.leader_and_isr(1, 1)
    leader = strict.rms[1]

    async def main() -> dict[TopicPartition, ErrorCode]:
        info = leader.append(TP, batch(), required_acks=-1)
        waiting = asyncio.ensure_future(
            leader.wait_replicated({TP: info.last_offset + 1}, 30_000))
        strict.clock.advance(LAG_MS + 1)
        strict.fetch(2)
        leader.maybe_shrink_isr()  # 3 leaves: the HW passes the batch with an ISR of 2
        return await asyncio.wait_for(waiting, 5)

    assert run(main()) == {TP: ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND}


def test_requests_for_other_epochs_and_non_leaders_are_fenced(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 5)
    leader, follower = cluster.rms[1], cluster.rms[2]
    assert leader.partition_or_error(TP, 5).is_leader
    for epoch, code in ((4, ErrorCode.FENCED_LEADER_EPOCH), (6, ErrorCode.UNKNOWN_LEADER_EPOCH)):
        with pytest.raises(ApiError) as err:
            leader.partition_or_error(TP, epoch)
        assert err.value.code == code
    for call in (lambda: follower.append(TP, batch()), lambda: follower.partition_or_error(TP)):
        with pytest.raises(ApiError) as err:
            call()
        assert err.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(ApiError) as err:
        follower.partition_or_error(TopicPartition("t", 1))
    assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # a partition the metadata has but with no replica here: Kafka's getPartitionOrError
    # answers NOT_LEADER_OR_FOLLOWER, and the client refreshes its metadata
    other = TopicPartition("t", 1)
    follower.metadata_cache.update_metadata(UpdateMetadataDelta(
        0, 1, [BrokerInfo(b, {}) for b in (1, 2, 3)],
        {other: PartitionRegistration((1, 3), (1, 3), 1, 0, 0)}))
    for call in (lambda: follower.partition_or_error(other),
                 lambda: follower.last_offset_for_leader_epoch(other, -1, 0)):
        with pytest.raises(ApiError) as err:
            call()
        assert err.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_stale_leader_and_isr_is_refused(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 5, controller_epoch=3)
    rm = cluster.rms[1]
    old = LeaderAndIsrPartitionState("t", 0, 3, 2, 4, (1, 2, 3), 4, (1, 2, 3))
    assert rm.become_leader_or_follower(0, 3, [old], {}).errors[TP] == \
        ErrorCode.STALE_CONTROLLER_EPOCH
    assert rm.become_leader_or_follower(0, 2, [old], {}).error == \
        ErrorCode.STALE_CONTROLLER_EPOCH
    assert rm.partitions[TP].is_leader and rm.partitions[TP].leader_epoch == 5


def test_leadership_moves_to_a_follower(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 1)
    old, new = cluster.rms[1], cluster.rms[2]
    assert cluster.fetchers[2].added[TP] == InitialFetchState(1, 1, 0, TOPIC_ID)

    async def main() -> dict[TopicPartition, ErrorCode]:
        info = old.append(TP, batch(3), required_acks=-1)
        waiting = asyncio.ensure_future(old.wait_replicated({TP: info.last_offset + 1},
                                                            30_000))
        cluster.fetch(2)
        cluster.leader_and_isr(2, 2, isr=(2, 3), nodes=(2, 3, 1))
        return await asyncio.wait_for(waiting, 5)

    # the old leader answers its parked produce at once
    assert run(main()) == {TP: ErrorCode.NOT_LEADER_OR_FOLLOWER}
    assert TP in cluster.fetchers[2].removed  # the new leader stopped fetching
    assert cluster.fetchers[1].added[TP] == InitialFetchState(2, 2, 3, TOPIC_ID)
    info = new.append(TP, batch(2))
    assert info.first_offset == 3
    assert new.partitions[TP].latest_epoch() == 2  # its epoch starts at its log end
    assert new.partitions[TP].log.leader_epoch_cache.entries[-1].start_offset == 3


def test_isr_expiration_task_shrinks_on_its_own(tmp_path: Path) -> None:
    c = Cluster(tmp_path, **{"replica.lag.time.max.ms": "100", "replica.fetch.wait.max.ms": "10"})
    try:
        c.leader_and_isr(1, 1)
        leader = c.rms[1]

        async def main() -> None:
            leader.start_isr_expiration()
            c.clock.advance(101)  # nobody fetched for longer than the lag limit
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while not c.controller.proposals and loop.time() < deadline:
                await asyncio.sleep(0.01)

        run(main())
        assert c.controller.proposals == [(TP, LeaderAndIsr(1, 1, (1,), 1))]
    finally:
        c.close()


def test_stop_replica_drops_and_deletes_unless_fenced(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 3, controller_epoch=2)
    rm = cluster.rms[2]
    log_dir = Path(rm.partitions[TP].log.dir)
    assert rm.stop_replicas(1, {TP: (3, True)}) == (ErrorCode.STALE_CONTROLLER_EPOCH, {})
    assert rm.stop_replicas(2, {TP: (2, True)}) == (
        ErrorCode.NONE, {TP: ErrorCode.FENCED_LEADER_EPOCH})
    assert TP in rm.partitions and log_dir.exists()
    assert rm.stop_replicas(2, {TP: (-2, True)}) == (ErrorCode.NONE, {TP: ErrorCode.NONE})
    assert TP not in rm.partitions
    assert TP in cluster.fetchers[2].removed
    assert rm.logs.get_log(TP) is None and not log_dir.exists()
    with pytest.raises(ApiError) as err:
        rm.partition_or_error(TP, require_leader=False)
    assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_coordinator_records_append_as_coordinator(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 4)
    leader = cluster.rms[1]
    marker = RecordBatchBuilder(producer_id=9, producer_epoch=0, is_transactional=True,
                                is_control=True)
    marker.append_control(ControlRecordType.ABORT, T0, 0)
    raw = marker.build()
    with pytest.raises(InvalidRecordError, match="not allowed to write control records"):
        leader.append(TP, raw)
    info = leader.append(TP, raw, origin=AppendOrigin.COORDINATOR)
    assert info.first_offset == 0
    assert leader.partitions[TP].latest_epoch() == 4
    assert leader.partitions[TP].high_watermark == 0  # the ISR has not fetched it yet


def test_delete_records_waits_for_the_live_followers_log_start(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 1)
    leader = cluster.rms[1]
    # brokers 1 and 2 are alive; 3 is not, so its log start offset does not hold anything
    live = [BrokerInfo(b, {"PLAINTEXT": ("127.0.0.1", 9090 + b)}) for b in (1, 2)]
    leader.metadata_cache.update_metadata(UpdateMetadataDelta(0, 1, live))

    async def main() -> tuple[dict[TopicPartition, ErrorCode], int]:
        leader.append(TP, batch(5))
        cluster.fetch(2)
        cluster.fetch(3)
        assert leader.delete_records(TP, 3) == 3
        waiting = asyncio.ensure_future(leader.wait_low_watermark({TP: 3}, 30_000))
        await asyncio.sleep(0)
        assert not waiting.done()  # 2 still starts at 0
        cluster.fetch(2)  # learns the leader's log start offset ...
        await asyncio.sleep(0)
        assert not waiting.done()
        cluster.fetch(2)  # ... and tells the leader its own
        return await asyncio.wait_for(waiting, 5), leader.low_watermark(TP)

    outcome, low = run(main())
    assert outcome == {TP: ErrorCode.NONE} and low == 3
    assert cluster.rms[2].partitions[TP].log_start_offset == 3
    assert cluster.rms[3].partitions[TP].log_start_offset == 0  # not alive: not waited for


def test_delete_records_times_out_while_a_live_follower_lags(cluster: Cluster) -> None:
    cluster.leader_and_isr(1, 1)
    leader = cluster.rms[1]
    live = [BrokerInfo(b, {}) for b in (1, 2, 3)]
    leader.metadata_cache.update_metadata(UpdateMetadataDelta(0, 1, live))

    async def main() -> dict[TopicPartition, ErrorCode]:
        leader.append(TP, batch(5))
        for node in (2, 3):
            cluster.fetch(node)
        leader.delete_records(TP, 2)
        return await leader.wait_low_watermark({TP: 2}, 50)

    assert run(main()) == {TP: ErrorCode.REQUEST_TIMED_OUT}
