"""The free-space floor in a cluster: a log dir below ``log.dir.min.free.bytes`` gives up
replication the way a failed dir does, so writes move to replicas with space.

On one broker a dir below its floor refuses produces and serves everything else
(storage/free_space.py). In a cluster that would leave a partition whose leader is short of
space unwritable while in-sync replicas with room exist. Kafka has no floor: the full disk's
IOException takes the dir offline, the broker announces a log dir event, and the controller
moves leadership and ISR membership off it. Here a dir crossing its floor is announced the same
way (``/log_dir_event_notification``), and the broker answers the controller's LeaderAndIsr
with KAFKA_STORAGE_ERROR for the replicas in that dir, which the controller records as offline
(controller/log_dir_events.py): it elects another in-sync replica where the broker led and
takes the replica out of its ISRs. Unlike a failed dir, the logs stay open and readable:

* a follower there stops fetching (its appends would eat the margin the floor keeps);
* a replica held so applies the controller's later states (it follows the new leader) but
  fetches nothing and keeps answering KAFKA_STORAGE_ERROR;
* a leader that is its partition's only in-sync replica keeps leading (refusing produces,
  serving reads, as on one broker): nobody else has its records. Once a follower has caught up
  and joined the ISR, the broker announces another log dir event (checked every second while
  a dir is below its floor) and the leadership moves;
* once the dir is above its floor again, the broker announces another log dir event; it
  answers the controller's LeaderAndIsr for a held replica with NONE (the same leader epoch
  accepted once), starts fetching, and rejoins the ISR when it has caught up.

A broker that starts with a dir below its floor holds that dir's replicas from the first
LeaderAndIsr on (the controller reads every LeaderAndIsr answer for offline replicas).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tidelog.storage.free_space import DirSpace
from tidelog.storage.manager import LogManager
from tidelog.util.topic_partition import TopicPartition

from .replication.fetcher_manager import FetcherManager
from .zk.client import KafkaZkClient

if TYPE_CHECKING:
    from .cluster.partition import Partition

log = logging.getLogger(__name__)

RECHECK_S = 1.0  # how often leaders kept below the floor are looked at again


class HoldHost(Protocol):
    """What the hold reads of the replica manager (ReplicaManager is one): the hold sits
    below it, so it types against this rather than importing it."""

    @property
    def logs(self) -> LogManager: ...
    @property
    def partitions(self) -> Mapping[TopicPartition, Partition]: ...
    @property
    def fetcher_manager(self) -> FetcherManager: ...


class FloorReplicationHold:
    """Which replicas this broker holds out of replication because their dir is below its
    floor; ``ReplicaManager`` asks it for each LeaderAndIsr partition state."""

    def __init__(self, broker_id: int, zk: KafkaZkClient, replica_manager: HoldHost,
                 loop: asyncio.AbstractEventLoop) -> None:  # fmt: skip
        self.broker_id = broker_id
        self.zk = zk
        self.rm = replica_manager
        self.loop = loop
        self.held: set[TopicPartition] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        # leaders below the floor kept because they were alone in sync, already re-announced
        self._announced: set[TopicPartition] = set()
        replica_manager.logs.free_space.add_listener(self._on_crossed)
        self._tick_handle = loop.call_later(RECHECK_S, self._recheck)

    # -- what LeaderAndIsr answers ------------------------------------------------------------

    def below_floor(self, partition: Partition) -> bool:
        path = Path(partition.log.dir).parent
        return any(d.path == path and d.below_floor for d in self.rm.logs.free_space.snapshot())

    def holds(self, partition: Partition, leader: int, isr: tuple[int, ...]) -> bool:
        """True when the replica is to be answered KAFKA_STORAGE_ERROR (and fetch nothing):
        its dir is below the floor, unless it leads with no other in-sync replica."""
        tp = partition.topic_partition
        if not self.below_floor(partition):
            return False
        if leader == self.broker_id and not set(isr) - {self.broker_id}:
            return False
        if tp not in self.held:
            log.warning("Broker %d holds %s out of replication: its log dir is below "
                        "log.dir.min.free.bytes", self.broker_id, tp)  # fmt: skip
        self.held.add(tp)
        return True

    def resumes(self, partition: Partition) -> bool:
        """A held replica whose dir has room again: its next LeaderAndIsr is taken even at
        the leader epoch it has, and it fetches again."""
        tp = partition.topic_partition
        if tp not in self.held or self.below_floor(partition):
            return False
        self.held.discard(tp)
        log.info("Broker %d resumes replicating %s: its log dir is above log.dir.min.free.bytes",
                 self.broker_id, tp)  # fmt: skip
        return True

    # -- crossings ------------------------------------------------------------------------------

    def _on_crossed(self, space: DirSpace) -> None:
        """Whichever thread measured the dir."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._handle, space.path, space.below_floor)

    def _handle(self, path: Path, below: bool) -> None:
        if below:  # followers there stop appending now, before the controller asks
            followers = [tp for tp, p in self.rm.partitions.items()
                         if not p.is_leader and Path(p.log.dir).parent == path]  # fmt: skip
            self.rm.fetcher_manager.remove_fetcher_for_partitions(followers)
        task = self.loop.create_task(self._propagate(path, below))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _propagate(self, path: Path, below: bool) -> None:
        try:
            znode = await asyncio.to_thread(self.zk.propagate_log_dir_event, self.broker_id)
        except Exception:
            log.exception("broker %d: announcing log dir %s %s its floor did not succeed",
                          self.broker_id, path, "below" if below else "above")  # fmt: skip
            return
        log.info("broker %d: log dir %s is %s log.dir.min.free.bytes, notified the controller "
                 "(%s)", self.broker_id, path, "below" if below else "back above", znode)  # fmt: skip

    def _recheck(self) -> None:
        """A leader kept below the floor (alone in sync then) whose ISR has grown: announce
        the dir again, so the controller asks and the leadership moves."""
        self._tick_handle = self.loop.call_later(RECHECK_S, self._recheck)
        below = {d.path for d in self.rm.logs.free_space.snapshot() if d.below_floor}
        if not below:
            self._announced.clear()
            return
        movable = {tp for tp, p in self.rm.partitions.items()
                   if p.is_leader and tp not in self.held and len(p.isr) > 1
                   and Path(p.log.dir).parent in below}  # fmt: skip
        new = movable - self._announced
        self._announced = movable
        if new:
            path = Path(self.rm.partitions[min(new)].log.dir).parent
            task = self.loop.create_task(self._propagate(path, True))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def stop(self) -> None:
        self._tick_handle.cancel()
        for task in list(self._tasks):
            task.cancel()
