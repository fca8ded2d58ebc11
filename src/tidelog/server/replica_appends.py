"""The produce half of the ReplicaManager (a mixin, as ``replica_topics.py``): Kafka's
appendRecords / appendToLocalLog. ``append_records`` is a Produce's one door: for each
partition it picks the write path (on the loop; on a worker thread, ``append_off_loop``, for
compressed or large batches; on the log dir's writer thread, ``append_async``), then waits for
what the answer needs: the writes off the loop, the group commit's fsync of a due
``flush.messages``, and for acks=-1 the ISR (DelayedProduce). An append moves the high
watermark or hands the fsync to the group commit, and counts BytesIn / MessagesIn. A disk
error takes the log dir offline once (Kafka's LogDirFailureChannel)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from tidelog.metrics import BrokerTopicStats
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.fast import ProducePartitionResult
from tidelog.records.batch import COMPRESSION_MASK, peek_attributes
from tidelog.storage.errors import RecordValidationError
from tidelog.storage.log import Log
from tidelog.storage.log_append import LogAppendInfo
from tidelog.storage.log_writes import AppendWriters
from tidelog.storage.manager import LogManager
from tidelog.storage.validator import AppendOrigin
from tidelog.util.topic_partition import TopicPartition

from .cluster.partition import Partition
from .cluster.partition_state import NO_EPOCH
from .errors import to_error
from .group_commit import GroupCommit, Waiter
from .metadata.store import MetadataStore
from .purgatory import ReplicationPurgatory

# Worker threads for heavy appends (compressed or large batches): with MAX_DECOMPRESSED_BATCH
# (64 MiB) this bounds the decompressed bytes held by validation to 128 MiB at any time.
HEAVY_APPEND_THREADS = 2
# An append_async's outcome, on the loop once written: the error, or the group commit round
# to wait for (None: nothing to flush)
Written = tuple[BaseException | None, Waiter | None]
# Batches validated and written off the event loop (``append_off_loop``)
HEAVY_BYTES = 1 << 20
HEAVY_COMPRESSED_BYTES = 8 << 10
# one partition of a Produce: its batches and the answer ``append_records`` fills in
Entry = tuple[TopicPartition, bytes, ProducePartitionResult]
# a check of a partition's batches before they are appended (the broker's record validators)
Validate = Callable[[TopicPartition, bytes], None]
log = logging.getLogger(__name__)
_NONE = ErrorCode.NONE  # bound once: 3.11's EnumType.__getattr__ slows Enum.MEMBER
# (called through the function: a method looked up on a Log, whose attributes are too many
# for its dict to share its keys, is a generic lookup each time)
_append_plain_as_leader = Log.append_plain_as_leader


def is_heavy(records: bytes) -> bool:
    """A batch whose validation may take long: compressed (a decompression bomb is a few
    hundred KB) or large (CRC, copy and write of a huge record)."""
    n = len(records)
    if n >= HEAVY_BYTES:
        return True
    return n >= HEAVY_COMPRESSED_BYTES and peek_attributes(records) & COMPRESSION_MASK != 0


class _Produce:
    """What one Produce waits for once its appends are made, and the bytes it may still
    write on the loop (``inline_left``: tidelog.log.append.writer.inline.bytes per request)."""

    __slots__ = ("done", "inline_left", "replicated", "waits", "writes")

    def __init__(self, inline_left: int = 0) -> None:
        self.inline_left = inline_left
        self.done = 0  # the entries appended (or failed) so far
        self.waits: list[tuple[ProducePartitionResult, Waiter]] = []
        self.writes: list[tuple[ProducePartitionResult, asyncio.Future[Written]]] = []
        # acks=-1: the offset the HW must pass for each partition
        self.replicated: dict[TopicPartition, tuple[ProducePartitionResult, int]] = {}


class ReplicaAppends:
    partitions: dict[TopicPartition, Partition]
    store: MetadataStore
    topic_stats: BrokerTopicStats | None
    group_commit: GroupCommit
    append_writers: AppendWriters
    _heavy_pool: ThreadPoolExecutor | None
    delayed_produce: ReplicationPurgatory
    async_appends: bool
    inline_append_bytes: int
    logs: LogManager

    def partition_or_error(self, tp: TopicPartition, current_leader_epoch: int = NO_EPOCH, *,
                           require_leader: bool = True) -> Partition:
        raise NotImplementedError  # the ReplicaManager's

    def _notify(self, tp: TopicPartition) -> None:
        raise NotImplementedError  # the ReplicaManager's: fetches waiting for data

    def _report_io_error(self, lg: Log, exc: BaseException, op: str) -> bool:
        raise NotImplementedError  # the ReplicaManager's: the log dir offline

    async def append_records(self, acks: int, timeout_ms: int, entries: Sequence[Entry],
                             validate: Validate | None = None) -> None:
        """Kafka's appendRecords: append each entry's batches to its partition, led here, in
        order (``validate`` first, when given), and fill in its answer: the offsets, or the
        error (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, a record's INVALID_RECORD ...).
        Returns once the answers are final: the writes off the loop done, the group commit
        rounds flushed and, for acks=-1, the ISR past each batch or ``timeout_ms`` out
        (REQUEST_TIMED_OUT). Never suspends when nothing is to be waited for.

        The bytes written on the loop over all the entries stay within
        ``inline_append_bytes``: once the request has written that much there, its further
        appends go to the writer thread: an append over what is left of it goes there; one
        written here (or by a roll or a transaction's completion, which the log writes here in
        any case) spends its bytes."""
        rest = self.append_records_now(acks, timeout_ms, entries, validate)
        if rest is not None:
            await rest

    def append_records_now(self, acks: int, timeout_ms: int, entries: Sequence[Entry],
                           validate: Validate | None = None) -> Awaitable[None] | None:
        """``append_records`` without a coroutine when nothing is to be waited for (the
        common Produce: written on the loop, the ISR this broker): the answers are final on
        return when it returns None; else once the awaitable it returns is done. The
        appends themselves are all made before it returns, in order."""
        if len(entries) == 1 and validate is None and self.async_appends:
            tp, records, result = entries[0]
            return self.append_one_now(acks, timeout_ms, tp, records, result)
        produce = _Produce(self.inline_append_bytes)
        for tp, records, result in entries:
            if len(records) >= HEAVY_COMPRESSED_BYTES and is_heavy(records):
                return self._append_rest(acks, timeout_ms, entries, validate, produce)
            written = None
            try:
                if validate is not None:
                    validate(tp, records)
                if self.async_appends:  # written here up to what is left of the budget
                    left = produce.inline_left
                    below = self.inline_append_bytes if left >= self.inline_append_bytes \
                        else left + 1 if left >= 0 else 0
                    info, written, _ = self._append_async(tp, records, acks, below)
                    if written is None and not info.duplicate:
                        produce.inline_left = left - len(records)
                else:
                    info = self.append(tp, records, group_commit=True, required_acks=acks)
            except Exception as exc:
                _fail(tp, result, exc)
                produce.done += 1
                continue
            self._appended(tp, result, info, acks, written, produce)
            produce.done += 1
        if produce.writes or produce.waits:
            return self._wait_appended(timeout_ms, produce)
        if produce.replicated and (short := self._replicated_now(produce.replicated)):
            return self._wait_replicated(produce.replicated, short, timeout_ms)
        return None

    def append_one_now(self, acks: int, timeout_ms: int, tp: TopicPartition, records: bytes,
                       result: ProducePartitionResult) -> Awaitable[None] | None:
        """``append_records_now`` of a Produce of one partition (librdkafka's common one),
        without a validator, when ``async_appends``: no per-request bookkeeping unless its
        answer waits for something."""
        if len(records) >= HEAVY_COMPRESSED_BYTES and is_heavy(records):
            return self._append_rest(acks, timeout_ms, [(tp, records, result)], None,
                                     _Produce(self.inline_append_bytes))
        try:
            info, written, partition = _append_async(self, tp, records, acks,
                                                     self.inline_append_bytes)
        except Exception as exc:
            _fail(tp, result, exc)
            return None
        if written is not None:
            produce = _Produce()
            self._appended(tp, result, info, acks, written, produce)
            return self._wait_appended(timeout_ms, produce)
        return self._one_appended(acks, timeout_ms, tp, info, partition, result)

    def append_one_rest(self, acks: int, timeout_ms: int, tp: TopicPartition,
                        partition: Partition, outcome: LogAppendInfo | Exception, phase: int,
                        result: ProducePartitionResult, size: int) -> Awaitable[None] | None:
        """``append_one_now`` from where the native produce path (server/produce_one.py)
        left an append it made: ``phase`` 0, ``outcome`` was raised under the log's lock; 1,
        after it; 2, written but the HW did not move with it; 3, moved and counted, the
        ISR's answer not known there."""
        lg = partition.log
        if isinstance(outcome, Exception):
            exc = outcome
            if phase == 0 and isinstance(outcome, OSError):  # (as the Log's append raises it)
                exc = lg.local_log.storage_error(outcome, "append-async")
            self._failed_one(tp, lg, exc, result)
            return None
        if phase == 2:
            try:
                self._settle(tp, partition, lg)
            except Exception as exc:
                self._failed_one(tp, lg, exc, result)
                return None
            if self.topic_stats is not None:
                n = 0 if outcome.duplicate else outcome.num_messages
                self.topic_stats.record_append(tp.topic, size, n)
        return self._one_appended(acks, timeout_ms, tp, outcome, partition, result)

    def _failed_one(self, tp: TopicPartition, lg: Log, exc: Exception,
                    result: ProducePartitionResult) -> None:
        """``_append_async``'s failed append, answered as ``append_one_now`` answers it."""
        self._report_io_error(lg, exc, f"appending to {tp}")
        self._record_failed(tp)
        _fail(tp, result, exc)

    def _one_appended(self, acks: int, timeout_ms: int, tp: TopicPartition,
                      info: LogAppendInfo, partition: Partition,
                      result: ProducePartitionResult) -> Awaitable[None] | None:
        """``append_one_now`` of an append made and written: what its answer waits for."""
        if (pending := self.group_commit.pending) and tp in pending:
            # it waits (``waiter``; ``tp`` hashed only when a round is pending at all)
            produce = _Produce()
            self._appended(tp, result, info, acks, None, produce)
            return self._wait_appended(timeout_ms, produce)
        result.base_offset = info.first_offset  # (``_appended``)
        result.log_append_time = info.log_append_time
        result.log_start_offset = info.log_start_offset
        if acks != -1 or info.last_offset < 0:
            return None
        # (``_replicated_now`` inline, of the partition appended to: the ISR's outcome known
        # now, or parked)
        offset = info.last_offset + 1
        lg = partition.log  # (``check_enough_replicas_reached``'s done and well, inline)
        if lg.high_watermark >= offset and partition.leader_id == partition.local_broker_id \
                and lg.config.min_insync_replicas <= len(partition.state.maximal_isr):
            return None
        done, error = partition.check_enough_replicas_reached(offset)
        if error != _NONE:
            _fail_after_append(result, error, None)
        elif not done:
            return self._wait_replicated({tp: (result, offset)}, {tp: offset}, timeout_ms)
        return None

    async def _append_rest(self, acks: int, timeout_ms: int, entries: Sequence[Entry],
                           validate: Validate | None, produce: _Produce) -> None:
        """``append_records_now`` from its first heavy entry on (``produce.done`` entries
        made already): a heavy batch is validated and written on a worker thread."""
        for tp, records, result in entries[produce.done:]:
            written = None
            try:
                if validate is not None:
                    validate(tp, records)
                if len(records) >= HEAVY_COMPRESSED_BYTES and is_heavy(records):
                    info = await self.append_off_loop(tp, records, group_commit=True,
                                                      required_acks=acks)
                else:
                    info, written = self._append_here(tp, records, acks, produce)
            except Exception as exc:
                _fail(tp, result, exc)
                continue
            self._appended(tp, result, info, acks, written, produce)
        await self._wait_appended(timeout_ms, produce)

    def _append_here(self, tp: TopicPartition, records: bytes, acks: int, produce: _Produce
                     ) -> tuple[LogAppendInfo, asyncio.Future[Written] | None]:
        """A batch that is not heavy: on the loop, or handed to the writer thread once the
        request's inline budget is spent (``append_records_now`` inlines this)."""
        if not self.async_appends:
            return self.append(tp, records, group_commit=True, required_acks=acks), None
        left = produce.inline_left
        below = self.inline_append_bytes if left >= self.inline_append_bytes \
            else left + 1 if left >= 0 else 0
        info, written, _ = self._append_async(tp, records, acks, below)
        if written is None and not info.duplicate:
            produce.inline_left = left - len(records)
        return info, written

    async def _wait_appended(self, timeout_ms: int, produce: _Produce) -> None:
        """What the answers wait for once the appends are made (each wait only when it has
        something to wait for)."""
        if produce.writes:
            await _wait_written(produce)
        if produce.waits:
            await _wait_group_commit(produce.waits)
        if produce.replicated and (short := self._replicated_now(produce.replicated)):
            await self._wait_replicated(produce.replicated, short, timeout_ms)

    async def _wait_replicated(self, replicated: dict[TopicPartition, tuple[
                                   ProducePartitionResult, int]],
                               short: dict[TopicPartition, int], timeout_ms: int) -> None:
        _fail_unreplicated(replicated, await self.delayed_produce.park({}, short, timeout_ms))

    def _appended(self, tp: TopicPartition, result: ProducePartitionResult, info: LogAppendInfo,
                  acks: int, written: asyncio.Future[Written] | None, produce: _Produce) -> None:
        result.base_offset = info.first_offset
        result.log_append_time = info.log_append_time
        result.log_start_offset = info.log_start_offset
        if written is not None:
            produce.writes.append((result, written))  # its group commit round: once written
        else:
            # taken before anything suspends: the round covering this append may start any turn
            waiter = self.group_commit.waiter(tp)
            if waiter is not None:
                produce.waits.append((result, waiter))
        if acks == -1 and info.last_offset >= 0:  # a duplicate waits for its original
            produce.replicated[tp] = (result, info.last_offset + 1)

    def _replicated_now(self, replicated: dict[TopicPartition, tuple[
                            ProducePartitionResult, int]]) -> dict[TopicPartition, int]:
        """acks=-1: the ISR must have each batch (DelayedProduce). The outcomes known now are
        set at once (no coroutine parks when the ISR is this broker); returns the partitions
        still short of their offset, to park."""
        short: dict[TopicPartition, int] = {}
        for tp, (r, offset) in replicated.items():  # (a loop: a comprehension is a call)
            if r.error_code != 0:
                continue
            # (the DelayedProduce's tryComplete, ``_check_replicated``, inline)
            partition = self.partitions.get(tp)
            if partition is None:
                _fail_after_append(r, ErrorCode.NOT_LEADER_OR_FOLLOWER, None)
                continue
            done, error = partition.check_enough_replicas_reached(offset)
            if error != _NONE:
                _fail_after_append(r, error, None)
            elif not done:
                short[tp] = offset
        return short

    def append(self, tp: TopicPartition, records: bytes, *, group_commit: bool = False,
               required_acks: int = 1,
               origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
        """Append to a partition led here. ``group_commit``: a due ``flush.messages`` fsync
        joins this turn's group commit, and the HW advances after it (wait on
        ``group_commit.waiter(tp)`` to answer); with acks=-1 wait on ``wait_replicated``.
        A coordinator writes its own records with ``origin=AppendOrigin.COORDINATOR``."""
        try:
            partition = self.partition_or_error(tp)
            partition.check_append(required_acks)
            info = self._write(partition, records, group_commit, origin)
            self._after_write(partition, group_commit)
        except Exception:
            self._record_failed(tp)
            raise
        self._record_append(tp, records, info)
        return info

    def append_async(self, tp: TopicPartition, records: bytes, *, required_acks: int = 1,
                     inline_below: int | None = None
                     ) -> tuple[LogAppendInfo, asyncio.Future[Written] | None]:
        """``append(group_commit=True)`` whose segment write may run on the log dir's writer
        thread: the offsets are known on return; the future (on the loop, in append order)
        says once the bytes are written, after the HW moved or the group commit took them
        (wait on its waiter to answer). None: written already, as ``append``. A write under
        ``inline_below`` (default ``inline_append_bytes``) with none in flight is written
        here. (One call per Produce: the lookup, the checks, ``_after_write`` and
        ``_record_append`` inline in their common case.)"""
        info, written, _ = self._append_async(
            tp, records, required_acks,
            self.inline_append_bytes if inline_below is None else inline_below)
        return info, written

    def _append_async(self, tp: TopicPartition, records: bytes, required_acks: int,
                      inline_below: int
                      ) -> tuple[LogAppendInfo, asyncio.Future[Written] | None, Partition]:
        """``append_async`` with its arguments by position (a keyword costs more), and the
        partition appended to."""
        try:
            partition = self.partitions[tp]  # (a subscript: no call when hosted)
        except KeyError:
            partition = None
        try:
            if partition is None or partition.logs_version != self.logs.logs_by_dir.version or \
                    partition.leader_id != partition.local_broker_id or (required_acks == -1 and
                    len(partition.state.isr) < partition.log.config.min_insync_replicas):
                partition = None  # (what partition_or_error and check_append raise or redo)
                partition = self.partition_or_error(tp)
                partition.check_append(required_acks)
            lg = partition.log
            # the plain append, which moves the HW to the new log end with it when the ISR is
            # this broker alone and no flush is due (``advance_local_committed``'s work)
            alone = not partition.remote_replicas  # (the leader checked above)
            info = _append_plain_as_leader(lg, records, partition.leader_epoch, inline_below,
                                           alone)  # (``lg.append_plain_as_leader``)
            written = None
            moved = False
            if info is None:  # not the common case: the writer and the callback it may need
                info, written = self._append_declined(partition, records, inline_below)
            elif alone and lg.high_watermark > info.last_offset:  # (the HW moved with it)
                moved = True
                partition.local_committed_offset = lg.high_watermark
                if (notify := partition.on_high_watermark) is not None:
                    notify(tp)
            if written is None and not moved:
                self._settle(tp, partition, lg)
        except Exception as exc:
            if partition is not None:
                self._report_io_error(partition.log, exc, f"appending to {tp}")
            self._record_failed(tp)
            raise
        stats = self.topic_stats  # (``_record_append``)
        if stats is not None:
            stats.record_append(tp[0], len(records),  # (``tp.topic``: by index, no generic lookup)
                                0 if info.duplicate else info.num_messages)
        return info, written, partition

    def _settle(self, tp: TopicPartition, partition: Partition, lg: Log) -> None:
        """An append written here whose HW did not move with it (``_after_write(partition,
        True)``): a due flush to the group commit, or the HW moved by the ISR."""
        if lg.flush_due():
            self.group_commit.add(tp, lg)  # counted once the records are on disk
        elif not partition.advance_local_committed():
            self._notify(tp)  # followers fetch past the HW: they wait for appends too

    def _append_declined(self, partition: Partition, records: bytes, inline_below: int
                         ) -> tuple[LogAppendInfo, asyncio.Future[Written] | None]:
        """``_append_async`` of a batch the plain append declined: the log's async append,
        its write maybe handed to the dir's writer thread (then the future it answers)."""
        lg = partition.log
        loop = asyncio.get_running_loop()
        # the future is made only for a write handed over: ``_written`` runs on the loop, so
        # after this call put it in the cell
        cell: list[asyncio.Future[Written]] = []
        done = partial(self._written_threadsafe, loop, partition, cell)
        info, handed = lg.append_as_leader_async(
            records, partition.leader_epoch, self.append_writers.for_log(lg), done,
            inline_below=inline_below, plain_declined=True)
        if not handed:
            return info, None
        written: asyncio.Future[Written] = loop.create_future()
        cell.append(written)
        return info, written

    def _written_threadsafe(self, loop: asyncio.AbstractEventLoop, partition: Partition,
                            written: list[asyncio.Future[Written]],
                            error: BaseException | None) -> None:
        """An append's ``done`` (bound with ``partial``: no closure made per append), on the
        writer thread: ``_written`` on the loop."""
        try:
            loop.call_soon_threadsafe(self._written, partition, written, error)
        except RuntimeError:  # the loop is closed (the broker stopped): nobody waits
            pass

    def _written(self, partition: Partition, cell: list[asyncio.Future[Written]],
                 error: BaseException | None) -> None:
        tp = partition.topic_partition
        outcome: Written = (error, None)
        if error is not None:
            self._report_io_error(partition.log, error, f"appending to {tp}")
        else:
            self._after_write(partition, True)
            outcome = (None, self.group_commit.waiter(tp))
        # (put in ``cell`` on the loop once the append returned handing the write over)
        if cell and not cell[0].done():
            cell[0].set_result(outcome)

    async def append_off_loop(self, tp: TopicPartition, records: bytes, *,
                              group_commit: bool = False,
                              required_acks: int = 1) -> LogAppendInfo:
        """``append`` with the validation and the write on a worker thread: a compressed or
        large batch (decompression, CRC, copy, write) must not stall every other client.
        At most HEAVY_APPEND_THREADS run at once, which bounds the decompressed bytes in
        flight to that many times MAX_DECOMPRESSED_BATCH. The caller keeps a connection's
        requests in order."""
        loop = asyncio.get_running_loop()
        try:
            partition = self.partition_or_error(tp)
            partition.check_append(required_acks)
            info = await loop.run_in_executor(
                self._heavy_executor(), self._write, partition, records, group_commit)
            self._after_write(partition, group_commit)
        except Exception:
            self._record_failed(tp)
            raise
        self._record_append(tp, records, info)
        return info

    def _heavy_executor(self) -> ThreadPoolExecutor:
        if self._heavy_pool is None:
            self._heavy_pool = ThreadPoolExecutor(
                HEAVY_APPEND_THREADS, thread_name_prefix="tidelog-heavy-append"
            )
        return self._heavy_pool

    def _record_failed(self, tp: TopicPartition) -> None:
        if self.topic_stats is not None and tp.topic in self.store.topics:
            self.topic_stats.record_append_failed(tp.topic)  # no series for unknown names

    def _record_append(self, tp: TopicPartition, records: bytes, info: LogAppendInfo) -> None:
        # Kafka marks BytesIn for every append, MessagesIn for what was appended
        if self.topic_stats is not None:
            n = 0 if info.duplicate else info.num_messages
            self.topic_stats.record_append(tp.topic, len(records), n)

    def _write(self, partition: Partition, records: bytes, group_commit: bool,
               origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
        """Validate and write (any thread: the Log's lock orders it with everything else)."""
        try:
            return partition.append_to_log(records, defer_flush=group_commit, origin=origin)
        except Exception as exc:
            # A disk error takes the whole log dir offline once (Kafka's LogDirFailureChannel);
            # the caller answers KAFKA_STORAGE_ERROR either way.
            self._report_io_error(partition.log, exc, f"appending to {partition.topic_partition}")
            raise

    def _after_write(self, partition: Partition, group_commit: bool) -> None:
        """On the loop: the group commit, the HW, and the fetches waiting for data."""
        tp = partition.topic_partition
        if group_commit and partition.log.flush_due():
            self.group_commit.add(tp, partition.log)  # counted once the records are on disk
        elif not partition.advance_local_committed():
            self._notify(tp)  # followers fetch past the HW: they wait for appends too

    def _on_group_flushed(self, tp: TopicPartition, lg: Log, upto: int,
                          error: BaseException | None) -> None:
        if error is not None:
            self._report_io_error(lg, error, f"flushing {tp}")
            return
        partition = self.partitions.get(tp)
        if partition is not None and not partition.advance_local_committed(upto):
            self._notify(tp)



# (called through the function where a request calls it: a method looked up on the replica
# manager, whose attributes are too many for its dict to share its keys, is a generic lookup
# each time)
_append_async = ReplicaAppends._append_async


def _fail(tp: TopicPartition, result: ProducePartitionResult, exc: Exception) -> None:
    if isinstance(exc, RecordValidationError):
        result.error_code = ErrorCode[exc.kafka_error]
        result.record_errors = [(i, m) for i, m in exc.errors]
        result.error_message = exc.error_message
        return
    code, msg = to_error(exc)
    # A storage error was logged once, when its log dir went offline (repeats are counted
    # there): no traceback per request.
    if code == ErrorCode.UNKNOWN_SERVER_ERROR:
        log.error("append to %s failed", tp, exc_info=exc)
    result.error_code = code
    result.error_message = msg


def _fail_after_append(result: ProducePartitionResult, code: ErrorCode,
                       message: str | None) -> None:
    result.error_code, result.error_message = code, message
    result.base_offset = result.log_append_time = result.log_start_offset = -1


def _fail_unreplicated(replicated: dict[TopicPartition, tuple[ProducePartitionResult, int]],
                       outcome: dict[TopicPartition, ErrorCode]) -> None:
    for tp, error in outcome.items():
        if error != _NONE:
            _fail_after_append(replicated[tp][0], error, None)


async def _wait_written(produce: _Produce) -> None:
    """Appends written off the loop: a failed write fails its partition; the others join
    the group commit round that took them."""
    for p, fut in produce.writes:
        error, waiter = await fut
        if error is not None:
            _fail_after_append(p, *to_error(error))
        elif waiter is not None:
            produce.waits.append((p, waiter))


async def _wait_group_commit(waits: list[tuple[ProducePartitionResult, Waiter]]) -> None:
    """Answer only after the group commit round covering each append flushed its partition
    (``flush.messages`` reached; see server/group_commit.py); a failed flush fails them."""
    for p, fut in waits:
        error = await fut
        if error is not None:
            _fail_after_append(p, *to_error(error))
