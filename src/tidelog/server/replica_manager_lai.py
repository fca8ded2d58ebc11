"""LeaderAndIsr and StopReplica applied in order, the file work of new and deleted logs off
the event loop (a mixin of the ReplicaManager).

Kafka runs becomeLeaderOrFollower on a request handler thread under replicaStateChangeLock,
never on a network thread. Here the state changes stay on the event loop, where every other
request reads the partition map, but the logs a LeaderAndIsr needs (a partition dir, its
segment and index files, the ``partition.metadata`` check) are made first on one
log-creation thread, while the loop keeps serving:

* one request at a time (``state_change_lock``, FIFO): a later LeaderAndIsr for the same
  partition (a newer leader epoch) or a StopReplica waits until the earlier one is applied;
* its answer goes only once every log it needs exists and its states are applied;
* a partition whose log is being made is not in the partition map yet, so requests for it
  get what Kafka answers for a partition not hosted here (NOT_LEADER_OR_FOLLOWER when the
  metadata knows it, UNKNOWN_TOPIC_OR_PARTITION otherwise); the map changes only on the
  loop, all of one request's partitions in one step;
* a log dir that fails while a log is made is taken offline by the LogManager as on any
  thread, and that partition answers KAFKA_STORAGE_ERROR;
* once started, a request is applied whole, with what follows it (the coordinators load
  what is led here now, unload what is stopped), even if the controller's connection
  closes meanwhile;
* a new leader epoch starts in each partition's leader-epoch cache on the loop at once
  (followers may ask for it), and its checkpoint (tmp, fsync, rename, dir fsync) is written
  on that thread, all of the request's in one pass, before the request is answered (as
  Kafka's makeLeader has written it when becomeLeaderOrFollower returns); a checkpoint that
  cannot be written takes its log dir offline and the partition answers KAFKA_STORAGE_ERROR;
* a StopReplica deleting partitions drops them from the map and stops their fetchers on the
  loop, then renames their dirs on that thread (each log dir fsynced and checkpointed once
  for all of them) and answers once they are renamed."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from tidelog.protocol.errors import ErrorCode
from tidelog.storage.errors import KafkaStorageError
from tidelog.storage.log import Log
from tidelog.storage.manager import LogManager
from tidelog.util.topic_partition import TopicPartition

from .cluster.partition_state import LeaderAndIsrPartitionState
from .metadata.local_store import partition_metadata_missing, write_partition_metadata_later
from .metadata.store import MetadataStoreError
from .replication.fetcher_manager import FetcherManager

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from .cluster.partition import Partition

log = logging.getLogger("tidelog.server.replica_manager")
T = TypeVar("T")


@dataclass
class LeaderAndIsrResult:
    """What a LeaderAndIsr did: each partition's error (NONE when applied), and the
    partitions this broker now follows, with their leader and the offset to fetch from."""

    errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    new_followers: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)
    new_leaders: list[TopicPartition] = field(default_factory=list)
    error: ErrorCode = ErrorCode.NONE  # STALE_CONTROLLER_EPOCH for the whole request


@dataclass(frozen=True, slots=True)
class PreparedLog:
    """A partition's log made (or found) on the log-creation thread: the log, or the error
    the partition answers."""

    log: Log | None
    error: ErrorCode = ErrorCode.NONE


PreparedLogs = dict[TopicPartition, PreparedLog]
Wanted = tuple[TopicPartition, Mapping[str, str] | None, uuid.UUID | None, int | None]


def prepare_log(logs: LogManager, tp: TopicPartition, overrides: Mapping[str, str] | None,
                topic_id: uuid.UUID | None, metadata_writer: Executor,
                read_at: int | None = None) -> PreparedLog:
    """Kafka's createLogIfNotExists for one partition (any thread: the LogManager locks),
    with the topic's ``overrides`` read at its ``overrides_version`` ``read_at``: a change
    the LogManager got since (AlterConfigs, a ZooKeeper config change) is newer and stays.
    A dir that fails meanwhile is taken offline by the LogManager; the partition answers
    KAFKA_STORAGE_ERROR. A missing ``partition.metadata`` is queued on ``metadata_writer``
    (``write_partition_metadata_later``: its two fsyncs are not waited for)."""
    try:
        lg = logs.get_or_create_log(tp, overrides, read_at)
    except Exception as exc:
        log.warning("cannot host %s: %s", tp, exc)
        return PreparedLog(None, ErrorCode.KAFKA_STORAGE_ERROR)
    if topic_id is None:
        return PreparedLog(lg)
    try:
        if partition_metadata_missing(Path(lg.dir), topic_id):
            write_partition_metadata_later(metadata_writer, Path(lg.dir), topic_id)
        return PreparedLog(lg)
    except MetadataStoreError:
        return PreparedLog(lg, ErrorCode.INCONSISTENT_TOPIC_ID)
    except OSError as exc:
        logs.maybe_handle_io_error(lg, exc, f"reading the partition.metadata of {tp}")
        return PreparedLog(lg, ErrorCode.KAFKA_STORAGE_ERROR)


def write_epoch_checkpoints(logs: LogManager, made: list[Log]) -> list[Log]:
    """Each log's leader-epoch checkpoint written, in order (the log-creation thread);
    the logs whose write failed (their dir reported to the LogManager)."""
    failed = []
    for lg in made:
        try:
            lg.leader_epoch_cache.flush()
        except OSError as exc:
            log.warning("cannot write the leader-epoch-checkpoint of %s: %s", lg.name, exc)
            logs.maybe_handle_io_error(lg, exc, f"writing the leader-epoch-checkpoint of "
                                                f"{lg.name}")
            failed.append(lg)
    return failed


def start_first_epoch(logs: LogManager, lg: Log) -> None:
    """One broker's new log: epoch 0 from its end offset (the epoch it is led at), its
    checkpoint written on the caller's thread (off the loop when a topic is made), as
    Kafka's makeLeader starts a new leader's epoch, not by the first produce to it;
    KafkaStorageError if it cannot be written (its dir reported)."""
    if lg.leader_epoch_cache.latest_epoch() is not None:
        return
    lg.leader_epoch_cache.assign(0, lg.log_end_offset, pending=True)
    if write_epoch_checkpoints(logs, [lg]):
        raise KafkaStorageError(f"cannot write the leader-epoch-checkpoint of {lg.name}")


def prepare_logs(logs: LogManager, wanted: Iterable[Wanted],
                 metadata_writer: Executor) -> PreparedLogs:
    """Each wanted partition's log, in request order (the log-creation thread)."""
    return {tp: prepare_log(logs, tp, overrides, topic_id, metadata_writer, read_at)
            for tp, overrides, topic_id, read_at in wanted}


class ReplicaStateChanges:
    """LeaderAndIsr / StopReplica one at a time, their new logs made off the loop."""

    logs: LogManager
    node_id: int
    controller_epoch: int
    partitions: dict[TopicPartition, Partition]
    partitions_dropped: int
    fetcher_manager: FetcherManager
    _log_pool: ThreadPoolExecutor | None
    _state_change_lock: asyncio.Lock | None
    _state_changes: set[asyncio.Task[object]]

    def become_leader_or_follower(
        self, controller_id: int, controller_epoch: int,
        states: Iterable[LeaderAndIsrPartitionState], topic_ids: Mapping[str, uuid.UUID],
        prepared: PreparedLogs | None = None, checkpoints: list[Log] | None = None,
    ) -> LeaderAndIsrResult:
        raise NotImplementedError  # the ReplicaManager's

    def _on_high_watermark(self, tp: TopicPartition) -> None:
        raise NotImplementedError  # the ReplicaManager's: waiting produces and fetches answer

    def _topic_overrides(self, topic: str) -> dict[str, str] | None:
        raise NotImplementedError  # the ReplicaManager's

    def admin_executor(self) -> ThreadPoolExecutor:
        raise NotImplementedError  # ReplicaTopics': where partition.metadata is written

    def log_creation_executor(self) -> ThreadPoolExecutor:
        """The one thread that makes the logs LeaderAndIsr needs and deletes the ones
        StopReplica drops: in request order, never on the event loop."""
        if self._log_pool is None:
            self._log_pool = ThreadPoolExecutor(1, thread_name_prefix="tidelog-replica-logs")
        return self._log_pool

    @property
    def state_change_lock(self) -> asyncio.Lock:
        """Kafka's replicaStateChangeLock: LeaderAndIsr and StopReplica one at a time, in
        the order they arrived (made on the loop's thread at first use)."""
        if self._state_change_lock is None:
            self._state_change_lock = asyncio.Lock()
        return self._state_change_lock

    async def apply_leader_and_isr(
        self, controller_id: int, controller_epoch: int,
        states: list[LeaderAndIsrPartitionState], topic_ids: Mapping[str, uuid.UUID],
        on_applied: Callable[[LeaderAndIsrResult], object] | None = None,
    ) -> LeaderAndIsrResult:
        """``become_leader_or_follower`` after the earlier state changes, the logs it needs
        made on the log-creation thread first, the leader-epoch checkpoints it changed
        written there after; then ``on_applied(result)`` (Kafka's onLeadershipChange),
        before the next state change and even if the request that asked is cancelled
        meanwhile."""
        async def apply() -> LeaderAndIsrResult:
            prepared: PreparedLogs = {}
            wanted = self._logs_to_prepare(controller_epoch, states, topic_ids)
            loop = asyncio.get_running_loop()
            if wanted:
                prepared = await loop.run_in_executor(
                    self.log_creation_executor(), prepare_logs, self.logs, wanted,
                    self.admin_executor())
            checkpoints: list[Log] = []
            result = self.become_leader_or_follower(
                controller_id, controller_epoch, states, topic_ids, prepared, checkpoints)
            if checkpoints:
                failed = await loop.run_in_executor(
                    self.log_creation_executor(), write_epoch_checkpoints, self.logs,
                    checkpoints)
                self._checkpoints_failed(result, failed)
            if on_applied is not None:
                on_applied(result)
            return result

        return await self._in_order(apply)

    @staticmethod
    def _checkpoints_failed(result: LeaderAndIsrResult, failed: list[Log]) -> None:
        """The partitions whose checkpoint could not be written answer KAFKA_STORAGE_ERROR
        (Kafka's makeLeaders on a KafkaStorageException) and are not new leaders."""
        tps = {lg.topic_partition for lg in failed}
        for tp in tps:
            if tp is not None:
                result.errors[tp] = ErrorCode.KAFKA_STORAGE_ERROR
        if tps:
            result.new_leaders = [tp for tp in result.new_leaders if tp not in tps]

    async def apply_stop_replicas(
        self, controller_epoch: int, partitions: Mapping[TopicPartition, tuple[int, bool]],
        on_stopped: Callable[[], object] | None = None,
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """``stop_replicas`` after the earlier state changes (never while a LeaderAndIsr is
        making the log it would delete); ``on_stopped()`` once the partitions are dropped
        (not for a stale controller), as ``on_applied`` above."""
        async def apply() -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
            error, errors, deleted = self._stop_partitions(controller_epoch, partitions)
            if error == ErrorCode.NONE and on_stopped is not None:
                on_stopped()
            if deleted:  # renamed, fsynced, checkpointed on the log thread, then answered
                loop = asyncio.get_running_loop()
                await loop.run_in_executor(self.log_creation_executor(), self.logs.delete_logs,
                                           deleted)
            return error, errors

        return await self._in_order(apply)

    def stop_replicas(self, controller_epoch: int,
                      partitions: Mapping[TopicPartition, tuple[int, bool]],
                      ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Kafka's stopReplicas: stop fetching each partition and drop it (deleting its log
        when asked) unless the request's leader epoch is older than ours (-2: deletion,
        always applies); (STALE_CONTROLLER_EPOCH, {}) for a deposed controller. The logs are
        deleted here (``apply_stop_replicas`` deletes them off the loop)."""
        error, errors, deleted = self._stop_partitions(controller_epoch, partitions)
        self.logs.delete_logs(deleted)
        return error, errors

    def _stop_partitions(self, controller_epoch: int,
                         partitions: Mapping[TopicPartition, tuple[int, bool]],
                         ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode],
                                    list[TopicPartition]]:
        """``stop_replicas`` but for the deletion: the partitions dropped from the map and
        their fetchers stopped; the ones whose logs are to be deleted."""
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH, {}, []
        self.controller_epoch = controller_epoch
        errors: dict[TopicPartition, ErrorCode] = {}
        stopped, deleted = [], []
        for tp, (leader_epoch, delete) in partitions.items():
            partition = self.partitions.get(tp)
            if partition is not None and 0 <= leader_epoch < partition.leader_epoch:
                errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            errors[tp] = ErrorCode.NONE
            stopped.append(tp)
            if partition is not None:
                del self.partitions[tp]
                self.partitions_dropped += 1
                self._on_high_watermark(tp)
            if delete:
                deleted.append(tp)
        self.fetcher_manager.remove_fetcher_for_partitions(stopped)
        return ErrorCode.NONE, errors, deleted

    async def _in_order(self, fn: Callable[[], Awaitable[T]]) -> T:
        """``fn`` under the state-change lock, run to its end even when the request that
        asked is cancelled (its connection closed)."""
        async def locked() -> T:
            async with self.state_change_lock:
                return await fn()

        task: asyncio.Task[T] = asyncio.ensure_future(locked())
        self._state_changes.add(task)
        task.add_done_callback(self._state_changes.discard)
        return await asyncio.shield(task)

    def _logs_to_prepare(self, controller_epoch: int,
                         states: Iterable[LeaderAndIsrPartitionState],
                         topic_ids: Mapping[str, uuid.UUID]) -> list[Wanted]:
        """The partitions not hosted yet that ``become_leader_or_follower`` would give a log
        (the checks it makes first, all in memory), each with its topic's overrides and
        their version (made later, the log takes newer ones): none for a stale controller."""
        if controller_epoch < self.controller_epoch:
            return []
        wanted: list[Wanted] = []
        for state in states:
            tp = TopicPartition(state.topic_name, state.partition_index)
            if tp in self.partitions or self._refused_before_log(tp, state) is not None:
                continue
            read_at = self.logs.overrides_version(tp.topic)
            wanted.append((tp, self._topic_overrides(tp.topic), topic_ids.get(tp.topic),
                           read_at))
        return wanted

    def _refused_before_log(self, tp: TopicPartition,
                            state: LeaderAndIsrPartitionState) -> ErrorCode | None:
        """A partition not hosted here that gets no log: one on an offline dir (Kafka's
        HostedPartition.Offline), an existing replica maybe on an offline dir (Kafka's
        getOrCreateLog), or one whose replicas do not name this broker."""
        logs = self.logs
        if logs.offline_partition_dir(tp) is not None:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if (not state.is_new and logs.get_log(tp) is None
                and any(not d.online for d in logs.dirs)):  # fmt: skip
            return ErrorCode.KAFKA_STORAGE_ERROR
        if self.node_id not in state.replicas:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return None


__all__ = ["LeaderAndIsrResult", "PreparedLog", "PreparedLogs", "ReplicaStateChanges", "prepare_log", "prepare_logs",
           "start_first_epoch", "write_epoch_checkpoints"]
