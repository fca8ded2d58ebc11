"""The RemoteLogManager (Kafka's kafka.log.remote.RemoteLogManager): at each leader of a
tiered partition (``remote.storage.enable``) a task copies closed segments to remote storage
and expires remote segments; at each follower it tracks what is copied so local retention
can go on.

A pass every ``remote.log.manager.task.interval.ms`` starts each partition's run as its own
task (Kafka schedules each partition's RLM task on its own, in its thread pools): a run still
going (a follower's read of ``__remote_log_metadata`` from its leader waits up to
``remote.log.metadata.consume.wait.ms``) is not started again, and no other partition's
copies or expirations wait for it. Tests call ``run_once`` (a pass and the runs it started)
with an injected clock. Per leader partition, as Kafka's RLMCopyTask and RLMExpirationTask:

- copy: from the highest copied offset of the log's epoch lineage (``__remote_log_metadata``
  replayed here) every closed segment below the last stable offset (which is at most the
  high watermark): COPY_SEGMENT_STARTED, the files uploaded off the event loop (a thread
  pool), COPY_SEGMENT_FINISHED, then ``Log.highest_offset_in_remote_storage`` moves so local
  retention may drop the segment. A failed upload deletes what it left (DELETE_SEGMENT_*),
  counts RemoteCopyErrors and backs the partition off (exponential, jittered).
- expire (``remote_log_expiration``): total retention (``retention.ms``/``retention.bytes``
  over local + remote) and a DeleteRecords'd log start delete remote segments, oldest first,
  then the log start offset moves to the remote start; uploads cut by a crash (STARTED and
  never FINISHED) and deletes cut short are deleted.

A topic deleted while tiered has its remote segments deleted by the broker that led it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import uuid
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from tidelog.config.remote_log_config import RemoteLogManagerConfig
from tidelog.metrics.remote import RemoteLogMetrics
from tidelog.storage.file_records import TimestampAndOffset
from tidelog.storage.index.txn_index import AbortedTxn, TxnIndexSearchResult
from tidelog.storage.log import Log
from tidelog.storage.log_read import collect_aborted_txns
from tidelog.storage.remote.index_cache import CachedIndexes, RemoteIndexCache
from tidelog.storage.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from tidelog.storage.remote.metadata_cache import RemoteLogMetadataCache
from tidelog.storage.remote.storage_manager import RemoteStorageError, RemoteStorageManager
from tidelog.util.clock import Clock
from tidelog.util.topic_partition import TopicPartition

from .remote_log_expiration import cleanup_expired_remote_log_segments
from .remote_log_metadata_manager import RemoteLogMetadataError, TopicBasedRemoteLogMetadataManager
from .remote_log_offsets import find_offset_by_timestamp
from .remote_log_reader import (
    RemoteFetchResult,
    RemoteLogReader,
    RemoteStorageFetchInfo,
    lineage_with_txn_index,
    segments_to_read,
)
from .remote_log_segments import (
    EnrichedLogSegment,
    OffsetAndEpoch,
    candidate_log_segments,
    find_highest_remote_offset,
    find_log_start_offset,
    local_size_and_segments,
    log_segment_data,
    segment_leader_epochs,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
# what a copy or delete may raise and be retried for
RETRIABLE = (RemoteStorageError, RemoteLogMetadataError, OSError)


class TieredPartition(Protocol):
    """What the RemoteLogManager reads of a hosted partition (the ReplicaManager's)."""

    @property
    def topic_partition(self) -> TopicPartition: ...

    @property
    def log(self) -> Log: ...

    @property
    def topic_id(self) -> uuid.UUID | None: ...

    @property
    def leader_epoch(self) -> int: ...

    @property
    def is_leader(self) -> bool: ...


PartitionSource = Callable[[], Iterable[TieredPartition]]
Sleep = Callable[[float], Awaitable[None]]  # the loop's clock between passes
TopicExists = Callable[[str, uuid.UUID], bool]


@dataclass
class Backoff:
    """Kafka's RLM task retry: ``retry.backoff.ms`` doubled per failure up to
    ``retry.backoff.max.ms``, times 1 +/- jitter."""

    base_ms: int
    max_ms: int
    jitter: float
    failures: int = 0
    next_attempt_ms: int = 0

    def fail(self, now_ms: int, rng: random.Random) -> int:
        self.failures += 1
        delay = min(self.max_ms, self.base_ms * (2 ** min(self.failures - 1, 30)))
        delay = int(delay * (1 + rng.uniform(-self.jitter, self.jitter)))
        self.next_attempt_ms = now_ms + max(1, delay)
        return delay

    def succeed(self) -> None:
        self.failures = 0
        self.next_attempt_ms = 0


@dataclass
class RLMTask:
    """One partition's state at this broker (Kafka's RLMCopyTask / RLMFollowerTask)."""

    tip: TopicIdPartition
    leader_epoch: int
    is_leader: bool
    backoff: Backoff
    copied: OffsetAndEpoch | None = None
    log_start_updated: bool = False
    being_copied: set[RemoteLogSegmentId] = field(default_factory=set)


class RemoteLogManager:
    def __init__(self, config: RemoteLogManagerConfig, *, broker_id: int,
                 rsm: RemoteStorageManager, rlmm: TopicBasedRemoteLogMetadataManager,
                 partitions: PartitionSource, topic_exists: TopicExists, clock: Clock,
                 metrics: RemoteLogMetrics | None = None,
                 pool: ThreadPoolExecutor | None = None, seed: int | None = None,
                 index_cache: RemoteIndexCache | None = None,
                 sleep: Sleep = asyncio.sleep) -> None:
        self.config = config
        self.sleep = sleep
        self.broker_id = broker_id
        self.index_cache = index_cache  # Kafka's RemoteIndexCache, in front of rsm
        self.rsm: RemoteStorageManager = \
            rsm if index_cache is None else CachedIndexes(rsm, index_cache)
        self.rlmm = rlmm
        self.partitions = partitions
        self.topic_exists = topic_exists
        self.clock = clock
        self.metrics = metrics if metrics is not None else RemoteLogMetrics()
        self._own_pool = pool is None
        self.pool = pool or ThreadPoolExecutor(
            config.remote_log_manager_copier_thread_pool_size,
            thread_name_prefix="tidelog-rlm-copy")
        self.tasks: dict[TopicPartition, RLMTask] = {}
        self.deleting: dict[TopicIdPartition, RLMTask] = {}  # deleted topics' partitions
        self.rng = random.Random(seed)
        self.quota = ByteRateQuota(config.remote_log_manager_copy_max_bytes_per_second, clock)
        self.fetch_quota = ByteRateQuota(
            config.remote_log_manager_fetch_max_bytes_per_second, clock)
        self._runner: asyncio.Task[None] | None = None
        # each partition's run in progress (and the deleted topics' remote deletion)
        self._runs: dict[TopicPartition, asyncio.Task[None]] = {}
        self._deletion: asyncio.Task[None] | None = None
        self._limit: tuple[asyncio.AbstractEventLoop, asyncio.Semaphore] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._stopped = False
        self.reader = RemoteLogReader(self.rsm, config.remote_log_reader_threads, self.metrics)

    # -- the periodic pass ----------------------------------------------------------------------
    def start(self) -> None:
        """Run a pass every ``remote.log.manager.task.interval.ms`` on the running loop."""
        self._runner = asyncio.get_running_loop().create_task(self._run_forever())

    async def _run_forever(self) -> None:
        interval = self.config.remote_log_manager_task_interval_ms / 1000
        while not self._stopped:
            try:
                self.start_pass()  # not waited for: each run goes on at its own pace
            except Exception:  # a pass never kills the manager
                log.exception("remote log manager pass failed")
            await self.sleep(interval)

    def background(self, work: Awaitable[None]) -> None:
        """Run ``work`` on the loop until it ends or the manager stops."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def stop(self) -> None:
        self._stopped = True
        for task in list(self._background):
            task.cancel()
        runs = [r for r in (self._runner, self._deletion, *self._runs.values()) if r is not None]
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)  # unwound before the pool stops
        self._runner = None
        if self._own_pool:
            self.pool.shutdown(wait=True)
        self.reader.close()
        if self.rlmm.forwarder is not None:
            await self.rlmm.forwarder.close()
        self.rsm.close()

    async def run_once(self) -> None:
        """One pass (``start_pass``) and the runs it started, to their end."""
        await asyncio.gather(*self.start_pass())

    def start_pass(self) -> list[asyncio.Task[None]]:
        """Start a run of each tiered partition hosted here (copy and expire at leaders,
        track copies at followers) whose previous run is over, and the remote deletion of
        deleted topics' partitions; the runs started. Nothing while
        ``__remote_log_metadata`` is not there yet (its initializer says why)."""
        if not self.rlmm.ready():
            return []
        seen: dict[TopicPartition, TieredPartition] = {}
        for p in list(self.partitions()):
            if p.topic_id is not None and p.log.remote_log_enabled and not p.log.closed:
                seen[p.topic_partition] = p
        self._forget_gone(seen)
        started: list[asyncio.Task[None]] = []
        if self.deleting and (self._deletion is None or self._deletion.done()):
            self._deletion = asyncio.ensure_future(self._delete_partitions())
            started.append(self._deletion)
        limit = self._copy_limit()
        for tp, p in seen.items():
            task = self._task(p)
            if self._running(tp):
                continue  # Kafka's fixed delay: the next run once this one is over
            run = self._runs[tp] = asyncio.ensure_future(self._run_partition(task, p, limit))
            run.add_done_callback(functools.partial(self._run_over, tp))
            started.append(run)
        return started

    def _copy_limit(self) -> asyncio.Semaphore:
        """The leaders' runs at once, across passes: ``copier.thread.pool.size`` (one per
        event loop: tests run each pass on its own)."""
        loop = asyncio.get_running_loop()
        if self._limit is None or self._limit[0] is not loop:
            size = self.config.remote_log_manager_copier_thread_pool_size
            self._limit = (loop, asyncio.Semaphore(size))
        return self._limit[1]

    def _running(self, tp: TopicPartition) -> bool:
        run = self._runs.get(tp)
        return run is not None and not run.done()

    def _run_over(self, tp: TopicPartition, run: asyncio.Task[None]) -> None:
        if self._runs.get(tp) is run:
            del self._runs[tp]
        if not run.cancelled() and run.exception() is not None:  # (failures are _guarded's)
            log.error("remote log task of %s ended", tp, exc_info=run.exception())

    def _stop_following(self, tp: TopicPartition, task: RLMTask) -> None:
        """A follower's run of ``tp`` (reads only) that no longer applies is cancelled; a
        leader's run ends by itself after its current copy (``_still_leader``), and the
        partition's next run waits for it, so two copies never overlap."""
        run = self._runs.get(tp)
        if run is not None and not task.is_leader:
            run.cancel()
            del self._runs[tp]  # over: the next run need not wait for it to unwind

    def _forget_gone(self, seen: dict[TopicPartition, TieredPartition]) -> None:
        """Drop the tasks of partitions no longer hosted here; the remote segments of a
        deleted topic's partition led here are to be deleted (``_delete_partitions``)."""
        for tp, task in list(self.tasks.items()):
            if tp in seen:
                continue
            del self.tasks[tp]
            self._stop_following(tp, task)
            self.metrics.remove_partition(tp.topic, tp.partition)
            if task.is_leader and not self.topic_exists(tp.topic, task.tip.topic_id):
                self.deleting[task.tip] = task

    async def _delete_partitions(self) -> None:
        """Each deleted topic's partition's remote segments deleted, retried (backed off)
        each pass until done; not while that partition's last copy is still going."""
        now = self.clock.milliseconds()
        for tip, task in list(self.deleting.items()):
            tp = TopicPartition(tip.topic, tip.partition)
            if task.backoff.next_attempt_ms <= now and not self._running(tp) and \
                    await self._guarded(task, self.delete_remote_partition(tip)):
                del self.deleting[tip]

    def _task(self, p: TieredPartition) -> RLMTask:
        tp = p.topic_partition
        task = self.tasks.get(tp)
        if task is None or task.leader_epoch != p.leader_epoch or task.is_leader != p.is_leader:
            assert p.topic_id is not None
            if task is not None:
                self._stop_following(tp, task)
            c = self.config
            task = RLMTask(TopicIdPartition(p.topic_id, tp.topic, tp.partition), p.leader_epoch,
                           p.is_leader, Backoff(c.remote_log_manager_task_retry_backoff_ms,
                                                c.remote_log_manager_task_retry_backoff_max_ms,
                                                c.remote_log_manager_task_retry_jitter))
            self.tasks[tp] = task
        return task

    async def _run_partition(self, task: RLMTask, p: TieredPartition,
                             limit: asyncio.Semaphore) -> None:
        """One run of a partition's task: a follower's tracking, or a leader's copy then
        expiration (at most ``remote.log.manager.copier.thread.pool.size`` at once)."""
        if task.backoff.next_attempt_ms > self.clock.milliseconds():
            return
        if not p.is_leader:
            await self._guarded(task, self._follow(task, p.log))
            return
        async with limit:
            if await self._guarded(task, self.copy_log_segments_to_remote(task, p)):
                await self._guarded(task, cleanup_expired_remote_log_segments(self, task, p.log))

    async def _guarded(self, task: RLMTask, work: Awaitable[None]) -> bool:
        """Await ``work``; any failure backs the partition off and is logged with it, as
        Kafka's RLMTask ("received error but it will be scheduled"): a warning for remote
        storage or metadata, an error with its traceback for anything else, which no longer
        ends the pass of every other partition unnamed."""
        try:
            await work
        except Exception as exc:
            delay = task.backoff.fail(self.clock.milliseconds(), self.rng)
            role = "leader" if task.is_leader else "follower"
            expected = isinstance(exc, RETRIABLE)
            log.log(logging.WARNING if expected else logging.ERROR,
                    "remote log task of %s (%s) failed (retrying in %d ms): %s", task.tip,
                    role, delay, exc if expected else repr(exc), exc_info=not expected)
            return False
        task.backoff.succeed()
        return True

    async def _follow(self, task: RLMTask, lg: Log) -> None:
        """Kafka's RLMFollowerTask: the highest copied offset, so local retention goes on."""
        cache = await self.rlmm.refresh(task.tip)
        lg.highest_offset_in_remote_storage = find_highest_remote_offset(cache, lg).offset

    # -- copy -----------------------------------------------------------------------------------
    async def copy_log_segments_to_remote(self, task: RLMTask, p: TieredPartition) -> None:
        """Kafka's copyLogSegmentsToRemote for one leader partition."""
        lg = p.log
        if task.copied is None:  # a new leader: every copy its predecessor finished first
            cache = await self.rlmm.sync(task.tip)
        else:
            cache = await self.rlmm.refresh(task.tip)
        if not task.log_start_updated:
            self.raise_log_start(lg, find_log_start_offset(cache, lg), "remote log start")
            task.log_start_updated = True
        if task.copied is None:
            task.copied = find_highest_remote_offset(cache, lg)
            lg.highest_offset_in_remote_storage = task.copied.offset
            log.info("highest offset of %s in remote storage: %s", task.tip, task.copied)
        lso = lg.last_stable_offset
        if lso <= 0 or task.copied.offset >= lso:
            self._record_lag(task, lg)
            return
        from_offset = max(task.copied.offset + 1, lg.log_start_offset)
        for candidate in candidate_log_segments(lg, from_offset, lso):
            if not self._still_leader(task, p) or self._stopped:
                return
            if self.quota.throttle_ms() > 0:
                break  # the copy quota is used up: the next pass goes on
            await self._copy_one(task, lg, candidate)
        self._record_lag(task, lg)

    def _still_leader(self, task: RLMTask, p: TieredPartition) -> bool:
        return p.is_leader and p.leader_epoch == task.leader_epoch

    async def _copy_one(self, task: RLMTask, lg: Log, candidate: EnrichedLogSegment) -> None:
        segment_id = RemoteLogSegmentId.generate_new(task.tip)
        task.being_copied.add(segment_id)
        try:
            await self._copy_log_segment(task, lg, candidate, segment_id)
        finally:
            task.being_copied.discard(segment_id)

    async def _copy_log_segment(self, task: RLMTask, lg: Log, candidate: EnrichedLogSegment,
                                segment_id: RemoteLogSegmentId) -> None:
        seg, topic = candidate.segment, task.tip.topic
        data = log_segment_data(lg, candidate)
        started = RemoteLogSegmentMetadata(
            segment_id, seg.base_offset, candidate.end_offset, seg.largest_timestamp,
            self.broker_id, self.clock.milliseconds(), segment_leader_epochs(lg, candidate),
            seg.size, txn_index_empty=seg.txn_index.is_empty)  # KIP-1058: reads skip it
        await self.rlmm.add_remote_log_segment_metadata(started)
        self.metrics.mark(topic, "remote_copy_requests")
        self.quota.record(started.segment_size_in_bytes)
        try:
            custom = await self.blocking(self.rsm.copy_log_segment_data, started, data)
        except RETRIABLE:
            self.metrics.mark(topic, "remote_copy_errors")
            log.info("copy of %s failed, deleting what it left", segment_id)
            try:
                await self.delete_remote_log_segment(started)
            except RETRIABLE as exc:
                log.info("cleanup of %s failed (retried later): %s", segment_id, exc)
            raise
        await self.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
            segment_id, self.clock.milliseconds(), custom,
            RemoteLogSegmentState.COPY_SEGMENT_FINISHED, self.broker_id))
        self.metrics.mark(topic, "remote_copy_bytes", started.segment_size_in_bytes)
        last_epoch = max(started.segment_leader_epochs)
        task.copied = OffsetAndEpoch(candidate.end_offset, last_epoch)
        lg.highest_offset_in_remote_storage = candidate.end_offset
        log.info("copied %s of %s to remote storage as %s", seg.log.path.name, task.tip,
                 segment_id)

    def _record_lag(self, task: RLMTask, lg: Log) -> None:
        size, n = local_size_and_segments(lg)
        self.metrics.set_gauge("remote_copy_lag_bytes", task.tip.topic, task.tip.partition, size)
        self.metrics.set_gauge("remote_copy_lag_segments", task.tip.topic, task.tip.partition, n)

    # -- delete ---------------------------------------------------------------------------------
    async def delete_remote_log_segment(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Kafka's deleteRemoteLogSegment: DELETE_SEGMENT_STARTED, the objects deleted off
        the loop, DELETE_SEGMENT_FINISHED."""
        topic = metadata.topic_id_partition.topic
        await self.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
            metadata.remote_log_segment_id, self.clock.milliseconds(), metadata.custom_metadata,
            RemoteLogSegmentState.DELETE_SEGMENT_STARTED, self.broker_id))
        self.metrics.mark(topic, "remote_delete_requests")
        try:
            await self.blocking(self.rsm.delete_log_segment_data, metadata)
        except RETRIABLE:
            self.metrics.mark(topic, "remote_delete_errors")
            raise
        await self.rlmm.update_remote_log_segment_metadata(RemoteLogSegmentMetadataUpdate(
            metadata.remote_log_segment_id, self.clock.milliseconds(), metadata.custom_metadata,
            RemoteLogSegmentState.DELETE_SEGMENT_FINISHED, self.broker_id))

    async def delete_remote_partition(self, tip: TopicIdPartition) -> None:
        """A deleted topic's partition: every remote segment deleted (Kafka's
        deleteRemoteLogPartition), with the partition's DELETE_PARTITION_* events."""
        def event(state: RemotePartitionDeleteState) -> RemotePartitionDeleteMetadata:
            return RemotePartitionDeleteMetadata(tip, state, self.clock.milliseconds(),
                                                 self.broker_id)

        cache = await self.rlmm.refresh(tip)
        if cache.partition_delete_state is None:  # a retry goes on where it stopped
            await self.rlmm.put_remote_partition_delete_metadata(
                event(RemotePartitionDeleteState.DELETE_PARTITION_MARKED))
        if cache.partition_delete_state is not RemotePartitionDeleteState.DELETE_PARTITION_STARTED:
            await self.rlmm.put_remote_partition_delete_metadata(
                event(RemotePartitionDeleteState.DELETE_PARTITION_STARTED))
        for metadata in list(cache.list_all()):
            if metadata.state is not RemoteLogSegmentState.DELETE_SEGMENT_FINISHED:
                await self.delete_remote_log_segment(metadata)
        await self.rlmm.put_remote_partition_delete_metadata(
            event(RemotePartitionDeleteState.DELETE_PARTITION_FINISHED))
        self.metrics.remove_partition(tip.topic, tip.partition)
        log.info("deleted the remote segments of %s", tip)

    # -- reads --------------------------------------------------------------------------------
    async def read(self, info: RemoteStorageFetchInfo, lg: Log) -> RemoteFetchResult:
        """A fetch below the local log start, read from remote storage off the loop (Kafka's
        asyncRead). The segments are chosen here, on the loop, from the replayed metadata;
        a failure is the result's ``error``."""
        try:
            cache = self.rlmm.catch_up_for(info.topic_id_partition)
            segments = segments_to_read(cache, lg.leader_epoch_cache, info.fetch_offset)
        except Exception as exc:  # the metadata partition unreadable here
            self.metrics.mark(info.topic_id_partition.topic, "remote_fetch_errors")
            return RemoteFetchResult(error=exc)
        if not segments:
            return RemoteFetchResult(aborted_transactions=[] if info.read_committed else None)
        result = await self.reader.read(info, segments)
        self.fetch_quota.record(len(result.records))
        if result.txn_search_below is not None and result.aborted_transactions is not None:
            try:
                result.aborted_transactions += await self._later_aborted_txns(
                    cache, lg, segments[-1].end_offset, info.fetch_offset,
                    result.txn_search_below)
            except Exception as exc:  # remote storage down
                self.metrics.mark(info.topic_id_partition.topic, "remote_fetch_errors")
                return RemoteFetchResult(error=exc, segments=segments)
        return result

    async def _later_aborted_txns(self, cache: RemoteLogMetadataCache, lg: Log, after: int,
                                  start: int, upper: int) -> list[AbortedTxn]:
        """Kafka's collectAbortedTransactions past the segments read: the later remote
        segments of the lineage with a transaction index (off the loop), then, the search
        still not complete, the local segments (an abort marker not tiered yet; a segment
        both tiered and still local lists its entries once)."""
        later = lineage_with_txn_index(cache, lg.leader_epoch_cache, after)
        remote = await self.reader.aborted_transactions(later, start, upper) if later \
            else TxnIndexSearchResult([], False)
        out = remote.aborted_transactions
        if not remote.is_complete:
            local = collect_aborted_txns(lg.segments.values(), start, upper)
            out += [t for t in local.aborted_transactions if t not in out]
        return out

    async def find_offset_by_timestamp(self, tip: TopicIdPartition, timestamp: int,
                                       log_start_offset: int) -> TimestampAndOffset | None:
        """ListOffsets by timestamp below the local start: the first remote record at or
        after ``timestamp`` from the log start on (None: look locally)."""
        cache = self.rlmm.catch_up_for(tip)
        segments = sorted(cache.list_remote_log_segments(), key=lambda m: m.start_offset)
        return await self.blocking(find_offset_by_timestamp, self.rsm, segments, timestamp,
                                   log_start_offset)

    def remote_log_size_bytes(self, tp: TopicPartition) -> int | None:
        """The bytes of ``tp``'s copied segments (COPY_SEGMENT_FINISHED, Kafka's
        RemoteLogSizeBytes) as this broker's metadata cache last replayed them; None when
        ``tp`` is not a tiered partition hosted here. Reads nothing remote: safe to call
        from a request handler."""
        task = self.tasks.get(tp)
        if task is None:
            return None
        segments = self.rlmm.cache(task.tip).list_remote_log_segments()
        return sum(m.segment_size_in_bytes for m in segments)

    # -- helpers --------------------------------------------------------------------------------
    async def blocking(self, fn: Callable[..., T], *args: object) -> T:
        """Run a blocking remote storage call on the thread pool."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)

    def raise_log_start(self, lg: Log, offset: int, reason: str) -> None:
        """Move the log start offset up to ``offset`` (never past the high watermark)."""
        try:
            lg.maybe_increment_log_start_offset(min(offset, lg.high_watermark), reason)
        except Exception as exc:  # out of range of a log that moved meanwhile
            log.warning("log start of %s not moved to %d: %s", lg.name, offset, exc)


class ByteRateQuota:
    """``remote.log.manager.copy.max.bytes.per.second`` (or ``fetch.``) over the last
    second: a copy quota reached stops a pass (the next one goes on), a fetch quota reached
    answers remote reads with no records until it frees up (Kafka's
    isRemoteLogFetchQuotaExceeded)."""

    def __init__(self, bytes_per_second: int, clock: Clock) -> None:
        self.limit = bytes_per_second
        self.clock = clock
        self.window: list[tuple[int, int]] = []  # (ms, bytes)

    def record(self, n: int) -> None:
        self.window.append((self.clock.milliseconds(), n))

    def throttle_ms(self) -> int:
        now = self.clock.milliseconds()
        self.window = [(t, n) for t, n in self.window if now - t < 1000]
        used = sum(n for _t, n in self.window)
        if used <= self.limit or not self.window:
            return 0
        return 1000 - (now - self.window[0][0])
