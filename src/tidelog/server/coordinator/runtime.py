"""One runtime under the coordinators (Kafka's coordinator-common CoordinatorRuntime, on one
asyncio loop instead of Kafka's event processor threads).

Each coordinator registers a ``CoordinatorShard`` for its internal topic (``register``); the
runtime then follows this broker's leadership of that topic's partitions. On becoming a
partition's leader (``schedule_load``, Kafka's scheduleLoadOperation) the partition goes
LOADING: the shard forgets what it held of it (``on_loading``), replays its batches
(``replay``, a few per loop turn so a large partition never stalls the broker) and installs
them (``on_loaded``), and the partition is ACTIVE. On losing it (``schedule_unload``) the
partition is CLOSED and the shard drops its state (``on_unloaded``). Every load and unload
bumps the partition's epoch, so a load superseded by a resignation or a newer election
installs nothing. A batch that cannot be read ends the replay (what was read is loaded, as
Kafka's loader logs and keeps going); a shard that fails to install leaves the partition
FAILED (its keys answer NOT_COORDINATOR, as Kafka's).

Writes (``partition_writer.PartitionWriter``) are appended with acks=all and complete once
the high watermark passes them; timed operations run on ``timer.CoordinatorTimer``.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Iterable
from typing import Generic, Protocol, TypeVar

from tidelog.records.batch import RecordBatch
from tidelog.util.topic_partition import TopicPartition

from .timer import CoordinatorTimer

log = logging.getLogger(__name__)

LOAD_BATCHES_PER_TURN = 64


class CoordinatorState(enum.Enum):
    """Kafka's CoordinatorRuntime.CoordinatorState, less INITIAL (a partition not led here
    is CLOSED)."""

    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"
    CLOSED = "closed"


class CoordinatorPartitions:
    """The load states of one coordinator's partitions and their epochs (Kafka keeps them in
    one CoordinatorContext per partition). ``loading`` and ``owned`` (ACTIVE) are sets the
    coordinator reads on every request."""

    def __init__(self) -> None:
        self.loading: set[int] = set()
        self.owned: set[int] = set()
        self.failed: set[int] = set()
        self.epochs: dict[int, int] = {}  # bumped by each load and unload

    def state(self, partition: int) -> CoordinatorState:
        if partition in self.loading:
            return CoordinatorState.LOADING
        if partition in self.owned:
            return CoordinatorState.ACTIVE
        if partition in self.failed:
            return CoordinatorState.FAILED
        return CoordinatorState.CLOSED

    def epoch(self, partition: int) -> int:
        return self.epochs.get(partition, 0)

    def begin_load(self, partition: int) -> int:
        """LOADING under a new epoch (returned)."""
        epoch = self.epochs[partition] = self.epoch(partition) + 1
        self.owned.discard(partition)
        self.failed.discard(partition)
        self.loading.add(partition)
        return epoch

    def mark_loading(self, partitions: Iterable[int]) -> None:
        """LOADING, each until its turn comes (a one-broker start loads them in order)."""
        self.loading.update(partitions)

    def activate(self, partition: int) -> None:
        self.loading.discard(partition)
        self.failed.discard(partition)
        self.owned.add(partition)

    def fail(self, partition: int) -> None:
        self.loading.discard(partition)
        self.owned.discard(partition)
        self.failed.add(partition)

    def close(self, partition: int) -> None:
        """CLOSED under a new epoch: a load in flight installs nothing."""
        self.epochs[partition] = self.epoch(partition) + 1
        self.loading.discard(partition)
        self.owned.discard(partition)
        self.failed.discard(partition)

    def reset(self) -> None:
        """Own nothing (a coordinator starting in a cluster, before its elections)."""
        self.loading.clear()
        self.owned.clear()
        self.failed.clear()


class CoordinatorShard(Protocol):
    """What the runtime drives of a coordinator (Kafka's CoordinatorShard with its
    CoordinatorLoader's reads): the replay of one partition's batches in log order between
    ``on_loading`` and ``on_loaded``."""

    @property
    def partitions(self) -> CoordinatorPartitions: ...

    def read_batches(self, partition: int) -> Iterable[RecordBatch]: ...

    def on_loading(self, partition: int) -> None:
        """Forget what is held of ``partition``; a replay of it starts."""

    def replay(self, partition: int, batch: RecordBatch) -> None: ...

    def on_loaded(self, partition: int) -> None:
        """Install the replay; the partition's keys are served from now on."""

    def on_unloaded(self, partition: int) -> int:
        """Drop ``partition``'s state; returns how many keys (groups, ids) went."""


L = TypeVar("L")


class ReplayShard(Generic[L]):
    """A ``CoordinatorShard`` whose replay gathers each partition into a fresh ``L`` (what
    Kafka's loader builds in a new SnapshottableCoordinator) until it is installed; a
    coordinator gives ``new_load``, ``replay_into``, ``install`` and ``forget``."""

    def __init__(self, partitions: CoordinatorPartitions,
                 read_batches: Callable[[int], Iterable[RecordBatch]]) -> None:
        self._partitions = partitions
        self._read_batches = read_batches
        self._loads: dict[int, L] = {}  # replays in flight

    @property
    def partitions(self) -> CoordinatorPartitions:
        return self._partitions

    def read_batches(self, partition: int) -> Iterable[RecordBatch]:
        return self._read_batches(partition)

    def on_loading(self, partition: int) -> None:
        self.forget(partition)
        self._loads[partition] = self.new_load()

    def replay(self, partition: int, batch: RecordBatch) -> None:
        self.replay_into(self._loads[partition], partition, batch)

    def on_loaded(self, partition: int) -> None:
        loaded = self._loads.pop(partition, None)
        self.install(partition, self.new_load() if loaded is None else loaded)

    def on_unloaded(self, partition: int) -> int:
        self._loads.pop(partition, None)
        return self.forget(partition)

    def new_load(self) -> L:
        raise NotImplementedError

    def replay_into(self, loaded: L, partition: int, batch: RecordBatch) -> None:
        raise NotImplementedError

    def install(self, partition: int, loaded: L) -> None:
        raise NotImplementedError

    def forget(self, partition: int) -> int:
        """Drop what is held of ``partition``; returns how many keys went."""
        raise NotImplementedError


class CoordinatorRuntime:
    """The internal topics' shards by registration, and their loads in flight."""

    def __init__(self) -> None:
        self._shards: dict[str, CoordinatorShard] = {}
        self._timers: dict[str, CoordinatorTimer] = {}
        self._loads: set[asyncio.Task[None]] = set()  # the loop keeps weak references only

    # -- registration -------------------------------------------------------------------------
    def register(self, topic: str, shard: CoordinatorShard,
                 timer: CoordinatorTimer | None = None) -> None:
        """``shard`` serves ``topic`` from now on; ``timer`` runs its timed operations."""
        self._shards[topic] = shard
        if timer is not None:
            self._timers[topic] = timer

    def unregister(self, topic: str) -> None:
        """The coordinator stopped: its loads in flight install nothing, its timer stops."""
        self._shards.pop(topic, None)
        timer = self._timers.pop(topic, None)
        if timer is not None:
            timer.shutdown()

    def shard(self, topic: str) -> CoordinatorShard | None:
        return self._shards.get(topic)

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._shards)

    # -- leadership ---------------------------------------------------------------------------
    def on_leadership_change(self, new_leaders: Iterable[TopicPartition],
                             new_followers: Iterable[TopicPartition]) -> None:
        """Kafka's onLeadershipChange: load what is led here now, unload what is not."""
        for tp in new_leaders:
            self.schedule_load(tp)
        for tp in new_followers:
            self.schedule_unload(tp)

    def elect(self, led: Iterable[TopicPartition]) -> list[asyncio.Task[None]]:
        """A coordinator starting in a cluster: own nothing, then load what is led here
        (the loads returned)."""
        for shard in self._shards.values():
            shard.partitions.reset()
        tasks = [self.schedule_load(tp) for tp in led]
        return [t for t in tasks if t is not None]

    def schedule_load(self, tp: TopicPartition) -> asyncio.Task[None] | None:
        """Start loading ``tp`` if a shard serves its topic (None: none does)."""
        shard = self._shards.get(tp.topic)
        if shard is None:
            return None
        epoch = self._begin(shard, tp.partition)
        task = asyncio.get_running_loop().create_task(self._load(shard, tp, epoch))
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)
        return task

    def schedule_unload(self, tp: TopicPartition) -> int:
        """Unload ``tp`` (CLOSED); returns how many keys the shard dropped."""
        shard = self._shards.get(tp.topic)
        if shard is None:
            return 0
        shard.partitions.close(tp.partition)
        return shard.on_unloaded(tp.partition)

    def load_all(self, topic: str, partitions: Iterable[int]) -> asyncio.Task[None] | None:
        """A one-broker start: every partition LOADING at once, then loaded in order by
        the task returned (None: no shard serves ``topic``)."""
        shard = self._shards.get(topic)
        if shard is None:
            return None
        epochs = {p: self._begin(shard, p) for p in partitions}  # all LOADING from now
        return asyncio.get_running_loop().create_task(self._load_in_order(shard, topic, epochs))

    async def _load_in_order(self, shard: CoordinatorShard, topic: str,
                             epochs: dict[int, int]) -> None:
        for p, epoch in epochs.items():
            await self._load(shard, TopicPartition(topic, p), epoch)
            await asyncio.sleep(0)

    def close(self) -> None:
        for task in list(self._loads):
            task.cancel()

    # -- the load -----------------------------------------------------------------------------
    @staticmethod
    def _begin(shard: CoordinatorShard, partition: int) -> int:
        epoch = shard.partitions.begin_load(partition)
        shard.on_loading(partition)
        return epoch

    async def _load(self, shard: CoordinatorShard, tp: TopicPartition, epoch: int) -> None:
        states = shard.partitions
        if states.epoch(tp.partition) != epoch:
            return  # superseded before it started
        try:
            for i, batch in enumerate(shard.read_batches(tp.partition)):
                shard.replay(tp.partition, batch)
                if i % LOAD_BATCHES_PER_TURN == LOAD_BATCHES_PER_TURN - 1:
                    await asyncio.sleep(0)
                    if states.epoch(tp.partition) != epoch:
                        return
        except Exception:
            log.exception("failed to read %s; loading what was read", tp)
        if states.epoch(tp.partition) != epoch or self._shards.get(tp.topic) is not shard:
            return  # resigned or elected again meanwhile, or the coordinator stopped
        try:
            shard.on_loaded(tp.partition)
        except Exception:
            log.exception("failed to install %s", tp)
            states.fail(tp.partition)
            return
        states.activate(tp.partition)
