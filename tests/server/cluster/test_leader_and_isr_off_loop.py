"""LeaderAndIsr's new logs made off the event loop (a real ReplicaManager in ZooKeeper mode,
real log dirs): while a log is being made the loop runs, the partition answers as one not
hosted here, and a later state change for it (LeaderAndIsr at a newer epoch, StopReplica)
applies after; a log dir failing meanwhile answers KAFKA_STORAGE_ERROR and goes offline; a
StopReplica's deletions are made off the loop too. The file work is held at a gate, so
nothing depends on how fast the machine is."""
# ruff: noqa: F811  (the rm fixture imported from lai_support)

from __future__ import annotations

import asyncio
import errno
import threading
import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest
from lai_support import NODE, Fetchers, rm  # noqa: F401

from tidelog.protocol.errors import ErrorCode
from tidelog.server.cluster.partition_state import LeaderAndIsrPartitionState
from tidelog.server.errors import ApiError
from tidelog.server.metadata.cache import UpdateMetadataDelta
from tidelog.server.metadata.image import BrokerInfo, PartitionRegistration
from tidelog.server.metadata.store import TopicInfo
from tidelog.server.replica_manager import LeaderAndIsrResult, ReplicaManager
from tidelog.storage.dir_lock import LogDir
from tidelog.storage.log import Log
from tidelog.util.topic_partition import TopicPartition

NEW = TopicPartition("fresh", 0)
TOPIC_ID = uuid.UUID("0b6f4d2e-5c3a-4e1f-8d7c-2a9b1c0d3e4f")
DEADLINE_S = 30


class Gate:
    """Holds every log creation of one LogManager until opened; records the threads."""

    def __init__(self, rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.open = threading.Event()
        self.threads: set[int] = set()
        real = rm.logs.get_or_create_log

        def held(tp: TopicPartition, overrides: Mapping[str, str] | None = None,
                 *read_at: int | None) -> Log:
            self.threads.add(threading.get_ident())
            self.entered.set()
            assert self.open.wait(DEADLINE_S)
            return real(tp, overrides, *read_at)

        monkeypatch.setattr(rm.logs, "get_or_create_log", held)

    async def reached(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, DEADLINE_S)


def state(leader: int, epoch: int, tp: TopicPartition = NEW) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(tp.topic, tp.partition, 1, leader, epoch, (NODE, 2),
                                      epoch, (NODE, 2), is_new=True)


def lai(rm: ReplicaManager, *states: LeaderAndIsrPartitionState,
        ) -> asyncio.Task[LeaderAndIsrResult]:
    return asyncio.ensure_future(rm.apply_leader_and_isr(0, 1, list(states), {"fresh": TOPIC_ID}))


def not_hosted_code(rm: ReplicaManager, tp: TopicPartition) -> ErrorCode:
    with pytest.raises(ApiError) as err:
        rm.partition_or_error(tp)
    return err.value.code


def test_a_partition_being_made_answers_as_not_hosted_and_the_loop_runs(
        rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = Gate(rm, monkeypatch)

    async def main() -> None:
        loop_thread = threading.get_ident()
        task = lai(rm, state(NODE, 0))
        await gate.reached()
        for _ in range(5):  # the loop turns: the request waits for its log
            await asyncio.sleep(0)
        assert not task.done()
        assert NEW not in rm.partitions
        assert not_hosted_code(rm, NEW) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        rm.metadata_cache.update_metadata(UpdateMetadataDelta(  # the metadata knows it
            0, 1, [BrokerInfo(b, {}) for b in (NODE, 2)],
            {NEW: PartitionRegistration((NODE, 2), (NODE, 2), NODE, 0, 0)}))
        assert not_hosted_code(rm, NEW) == ErrorCode.NOT_LEADER_OR_FOLLOWER
        gate.open.set()
        result = await task
        assert result.errors == {NEW: ErrorCode.NONE}
        assert result.new_leaders == [NEW]
        assert rm.partition_or_error(NEW).is_leader
        assert loop_thread not in gate.threads  # made on the log-creation thread

    asyncio.run(main())


def test_a_newer_leader_and_isr_applies_after_the_one_making_the_log(
        rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = Gate(rm, monkeypatch)
    fetchers = rm.fetcher_manager

    async def main() -> None:
        first = lai(rm, state(NODE, 0))
        await gate.reached()
        second = lai(rm, state(2, 1))  # broker 2 leads at epoch 1: we follow
        for _ in range(5):
            await asyncio.sleep(0)
        assert not second.done()
        gate.open.set()
        assert (await first).errors == {NEW: ErrorCode.NONE}
        assert (await second).errors == {NEW: ErrorCode.NONE}

    asyncio.run(main())
    partition = rm.partitions[NEW]
    assert (partition.leader_id, partition.leader_epoch) == (2, 1)
    assert isinstance(fetchers, Fetchers) and NEW in fetchers.added


def test_stop_replica_deletes_the_log_a_leader_and_isr_was_making(
        rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = Gate(rm, monkeypatch)

    async def main() -> None:
        made = lai(rm, state(NODE, 0))
        await gate.reached()
        stop = asyncio.ensure_future(rm.apply_stop_replicas(1, {NEW: (-2, True)}))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not stop.done()  # waits for the LeaderAndIsr before it
        gate.open.set()
        assert (await made).errors == {NEW: ErrorCode.NONE}
        assert await stop == (ErrorCode.NONE, {NEW: ErrorCode.NONE})

    asyncio.run(main())
    assert NEW not in rm.partitions
    assert rm.logs.get_log(NEW) is None
    assert not any((d / NEW.dir_name).exists() for d in rm.logs.live_log_dirs)


def test_topic_configs_altered_while_the_log_is_made_are_not_undone(
        rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
    """An AlterConfigs applied after the LeaderAndIsr read the topic's overrides, before its
    log is made: the log and the LogManager keep the newer ones (Kafka reads the topic's
    config at the log's creation), and a later partition of the topic gets them too."""
    rm.store.create_topic(TopicInfo("fresh", TOPIC_ID, 2, {"retention.ms": "1000"},
                                    {0: (NODE, 2), 1: (NODE, 2)}))
    gate = Gate(rm, monkeypatch)

    async def main() -> None:
        made = lai(rm, state(NODE, 0))
        await gate.reached()  # the overrides were read: {"retention.ms": "1000"}
        rm.set_topic_configs("fresh", {"retention.ms": "60000"})
        gate.open.set()
        assert (await made).errors == {NEW: ErrorCode.NONE}
        later = TopicPartition("fresh", 1)
        assert (await lai(rm, state(NODE, 0, later))).errors == {later: ErrorCode.NONE}

    asyncio.run(main())
    assert rm.logs.topic_overrides("fresh") == {"retention.ms": "60000"}
    assert [rm.partitions[TopicPartition("fresh", p)].log.config.retention_ms
            for p in (0, 1)] == [60000, 60000]


def test_a_dir_failing_while_logs_are_made_is_a_storage_error_and_goes_offline(
        rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both dirs fail as the partition is created in them: KAFKA_STORAGE_ERROR for it, both
    offline, no partition dir left behind, and the request still answered."""
    threads: set[int] = set()
    real_open = Log.open

    def failing(path: Path, *args: object, **kw: object) -> Log:
        if path.name == NEW.dir_name:
            threads.add(threading.get_ident())
            raise OSError(errno.EIO, "Input/output error", str(path))
        return real_open(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Log, "open", failing)

    async def main() -> LeaderAndIsrResult:
        assert threading.get_ident() not in threads
        result = await lai(rm, state(NODE, 0))
        assert threading.get_ident() not in threads  # never on the loop
        return result

    result = asyncio.run(main())
    assert result.errors == {NEW: ErrorCode.KAFKA_STORAGE_ERROR}
    assert len(threads) == 1
    assert [d.online for d in rm.logs.dirs] == [False, False]
    assert NEW not in rm.partitions
    assert not any((d.path / NEW.dir_name).exists() for d in rm.logs.dirs)


def test_a_partition_not_naming_this_broker_gets_no_log(rm: ReplicaManager) -> None:
    """Kafka answers UNKNOWN_TOPIC_OR_PARTITION and makes nothing for it."""
    elsewhere = LeaderAndIsrPartitionState("fresh", 0, 1, 2, 0, (2, 3), 0, (2, 3), is_new=True)

    async def main() -> LeaderAndIsrResult:
        return await lai(rm, elsewhere)

    result = asyncio.run(main())
    assert result.errors == {NEW: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert rm.logs.get_log(NEW) is None and NEW not in rm.partitions


def test_stop_replica_deletes_logs_off_the_loop_checkpointing_each_dir_once(
        rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
    """A topic of 20 partitions over both dirs deleted by one StopReplica: dropped from the
    map at once, the renames held at a gate while the loop runs, the answer after them; each
    dir's recovery-point checkpoint rewritten once, without the topic."""
    tps = [TopicPartition("fresh", p) for p in range(20)]
    entered, gate, threads = threading.Event(), threading.Event(), set()
    writes: list[Path] = []
    real_delete, real_checkpoint = rm.logs.delete_logs, rm.logs._checkpoint_recovery_points

    def held(deleting: list[TopicPartition]) -> dict[TopicPartition, Path]:
        threads.add(threading.get_ident())
        entered.set()
        assert gate.wait(DEADLINE_S)
        return real_delete(deleting)

    def counted(d: LogDir) -> bool:
        writes.append(d.path)
        return real_checkpoint(d)

    async def main() -> None:
        states = [state(NODE, 0, tp) for tp in tps]
        assert set((await lai(rm, *states)).errors.values()) == {ErrorCode.NONE}
        monkeypatch.setattr(rm.logs, "delete_logs", held)
        monkeypatch.setattr(rm.logs, "_checkpoint_recovery_points", counted)
        stop = asyncio.ensure_future(rm.apply_stop_replicas(1, {tp: (-2, True) for tp in tps}))
        assert await asyncio.to_thread(entered.wait, DEADLINE_S)
        assert not stop.done() and not any(tp in rm.partitions for tp in tps)
        assert not_hosted_code(rm, tps[0]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert threading.get_ident() not in threads
        gate.set()
        assert await stop == (ErrorCode.NONE, {tp: ErrorCode.NONE for tp in tps})

    asyncio.run(main())
    assert all(rm.logs.get_log(tp) is None for tp in tps)
    dirs = rm.logs.live_log_dirs
    assert sorted(writes) == sorted(dirs)  # once per dir, not once per partition
    for d in dirs:
        assert not any((d / tp.dir_name).exists() for tp in tps)
        assert "fresh" not in (d / "recovery-point-offset-checkpoint").read_text()


def test_a_cancelled_request_is_still_applied_and_its_leadership_change_runs(
        rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller's connection closes (the controller shutting down) while the request
    waits: the state still applies, and what follows it (the coordinators loading what is
    led here now) runs before the next state change."""
    gate = Gate(rm, monkeypatch)
    applied: list[LeaderAndIsrResult] = []

    async def main() -> None:
        asking = asyncio.ensure_future(rm.apply_leader_and_isr(
            0, 1, [state(NODE, 0)], {"fresh": TOPIC_ID}, applied.append))
        await gate.reached()
        asking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asking
        stopped: list[bool] = []
        stop = asyncio.ensure_future(rm.apply_stop_replicas(
            1, {NEW: (-2, False)}, lambda: stopped.append(bool(applied))))
        gate.open.set()
        assert await stop == (ErrorCode.NONE, {NEW: ErrorCode.NONE})
        assert stopped == [True]  # after the LeaderAndIsr's own follow-up

    asyncio.run(main())
    assert [r.new_leaders for r in applied] == [[NEW]]
