"""A LeaderAndIsr's new leader epochs (a real ReplicaManager in ZooKeeper mode, real log
dirs): each starts in the partition's leader-epoch cache on the loop at once, and its
``leader-epoch-checkpoint`` is written on the log-creation thread, all of the request's in
one pass, before the request is answered; a later state change of the same partitions
applies after it and its checkpoint is the one left on disk; a checkpoint that cannot be
written answers KAFKA_STORAGE_ERROR and takes its dir offline. The writes are held at a
gate, so nothing depends on how fast the machine is."""
# ruff: noqa: F811  (the rm fixture imported from lai_support)

from __future__ import annotations

import asyncio
import errno
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from lai_support import NODE, rm  # noqa: F401

from tidelog.protocol.errors import ErrorCode
from tidelog.server.cluster.partition_state import LeaderAndIsrPartitionState
from tidelog.server.replica_manager import LeaderAndIsrResult, ReplicaManager
from tidelog.storage.checkpoints import CheckpointFile
from tidelog.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE, EpochEntry
from tidelog.util.topic_partition import TopicPartition

OTHER = 2
TOPIC_ID = uuid.UUID("3c2a7d1e-9f4b-4e6a-8b0c-5d1e2f3a4b5c")
TPS = [TopicPartition("moved", p) for p in range(50)]
DEADLINE_S = 30


class Gate:
    """Holds every leader-epoch-checkpoint write until opened (or fails them with
    ``error``); records the partition dirs written, each with the latest epoch it wrote,
    and the threads writing them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, error: OSError | None = None) -> None:
        self.entered = threading.Event()
        self.open = threading.Event()
        self.written: list[tuple[str, int]] = []
        self.threads: set[int] = set()
        real = CheckpointFile.write

        def held(file: CheckpointFile[Any], entries: Any) -> None:
            if file.path.name == LEADER_EPOCH_CHECKPOINT_FILE:
                self.threads.add(threading.get_ident())
                self.entered.set()
                assert self.open.wait(DEADLINE_S)
                if error is not None:
                    raise error
                real(file, entries)  # (recorded once written: on disk)
                latest = max((e.epoch for e in entries), default=-1)
                self.written.append((file.path.parent.name, latest))
                return
            real(file, entries)

        monkeypatch.setattr(CheckpointFile, "write", held)

    async def reached(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, DEADLINE_S)


def state(leader: int, epoch: int, tp: TopicPartition) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(tp.topic, tp.partition, 1, leader, epoch, (NODE, OTHER),
                                      epoch, (NODE, OTHER), is_new=epoch == 0)


def lai(rm: ReplicaManager, leader: int, epoch: int,
        applied: list[LeaderAndIsrResult] | None = None) -> asyncio.Task[LeaderAndIsrResult]:
    states = [state(leader, epoch, tp) for tp in TPS]
    return asyncio.ensure_future(rm.apply_leader_and_isr(
        0, 1, states, {"moved": TOPIC_ID}, None if applied is None else applied.append))


def on_disk(rm: ReplicaManager, tp: TopicPartition) -> str:
    lg = rm.logs.get_log(tp)
    assert lg is not None
    return (Path(lg.dir) / LEADER_EPOCH_CHECKPOINT_FILE).read_text()


def test_a_failover_writes_the_new_epochs_off_the_loop_before_the_answer(
        rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
    """Led at epoch 0, then at epoch 1: the cache has epoch 1 at once, the request waits for
    the checkpoints (one pass, one thread, not the loop's); a LeaderAndIsr at epoch 2 waits
    for it, and epoch 2 is what is left on disk."""
    applied: list[LeaderAndIsrResult] = []

    async def main() -> None:
        assert set((await lai(rm, NODE, 0)).errors.values()) == {ErrorCode.NONE}
        gate = Gate(monkeypatch)
        first = lai(rm, NODE, 1, applied)
        await gate.reached()
        for _ in range(5):  # the loop turns: the request waits for its checkpoints
            await asyncio.sleep(0)
        assert not first.done() and applied == []  # nor does what follows it run yet
        for tp in TPS:  # in memory at once: a follower asking gets epoch 1's start
            partition = rm.partitions[tp]
            assert partition.leader_epoch == 1 and partition.is_leader
            assert partition.log.leader_epoch_cache.entries == [EpochEntry(1, 0)]
        second = lai(rm, NODE, 2)
        for _ in range(5):
            await asyncio.sleep(0)
        assert not second.done()
        assert threading.get_ident() not in gate.threads and len(gate.threads) == 1
        gate.open.set()
        result = await first
        assert result.errors == {tp: ErrorCode.NONE for tp in TPS}
        assert sorted(result.new_leaders) == sorted(TPS)
        # on disk when it is answered; the second request's writes of epoch 2 may have
        # started since
        assert sorted(d for d, e in gate.written if e == 1) == sorted(tp.dir_name for tp in TPS)
        assert all(on_disk(rm, tp) in ("0\n1\n1 0\n", "0\n1\n2 0\n") for tp in TPS)
        assert set((await second).errors.values()) == {ErrorCode.NONE}

    asyncio.run(main())
    assert [sorted(r.new_leaders) for r in applied] == [sorted(TPS)]  # after the writes
    assert all(on_disk(rm, tp) == "0\n1\n2 0\n" for tp in TPS)
    assert all(rm.partitions[tp].leader_epoch == 2 for tp in TPS)


def test_a_follower_made_leader_writes_its_epoch_off_the_loop_and_a_leader_made_follower_none(
        rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        assert set((await lai(rm, OTHER, 0)).errors.values()) == {ErrorCode.NONE}
        gate = Gate(monkeypatch)
        gate.open.set()
        made_leader = await lai(rm, NODE, 1)
        assert sorted(made_leader.new_leaders) == sorted(TPS)
        assert sorted(gate.written) == sorted((tp.dir_name, 1) for tp in TPS)
        assert threading.get_ident() not in gate.threads
        gate.written.clear()
        made_follower = await lai(rm, OTHER, 2)
        assert set(made_follower.new_followers) == set(TPS)
        assert gate.written == []  # a follower's epochs come with its leader's records

    asyncio.run(main())
    assert all(on_disk(rm, tp) == "0\n1\n1 0\n" for tp in TPS)


def test_a_checkpoint_that_cannot_be_written_is_a_storage_error_and_its_dir_goes_offline(
        rm: ReplicaManager, monkeypatch: pytest.MonkeyPatch) -> None:
    applied: list[LeaderAndIsrResult] = []

    async def main() -> LeaderAndIsrResult:
        assert set((await lai(rm, NODE, 0)).errors.values()) == {ErrorCode.NONE}
        gate = Gate(monkeypatch, OSError(errno.EIO, "Input/output error"))
        gate.open.set()
        return await lai(rm, NODE, 1, applied)

    result = asyncio.run(main())
    assert result.errors == {tp: ErrorCode.KAFKA_STORAGE_ERROR for tp in TPS}
    assert result.new_leaders == [] and [r.new_leaders for r in applied] == [[]]
    assert [d.online for d in rm.logs.dirs] == [False, False]
