"""The produce half of the ReplicaManager (a mixin, as ``replica_topics.py``): Kafka's
appendRecords / appendToLocalLog. An append to a partition led here validates and writes its
batch on the loop, on a worker thread (``append_off_loop``: compressed or large batches) or
on the log dir's writer thread (``append_async``), then moves the high watermark or hands a
due ``flush.messages`` fsync to the group commit, and counts BytesIn / MessagesIn. A disk
error takes the log dir offline once (Kafka's LogDirFailureChannel)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from tidelog.metrics import BrokerTopicStats
from tidelog.storage.log import Log
from tidelog.storage.log_append import LogAppendInfo
from tidelog.storage.log_writes import AppendWriters
from tidelog.storage.validator import AppendOrigin
from tidelog.util.topic_partition import TopicPartition

from .cluster.partition import Partition
from .cluster.partition_state import NO_EPOCH
from .group_commit import GroupCommit, Waiter, flush_due
from .metadata.store import MetadataStore

# Worker threads for heavy appends (compressed or large batches): with MAX_DECOMPRESSED_BATCH
# (64 MiB) this bounds the decompressed bytes held by validation to 128 MiB at any time.
HEAVY_APPEND_THREADS = 2
# An append_async's outcome, on the loop once written: the error, or the group commit round
# to wait for (None: nothing to flush)
Written = tuple[BaseException | None, Waiter | None]


class ReplicaAppends:
    partitions: dict[TopicPartition, Partition]
    store: MetadataStore
    topic_stats: BrokerTopicStats | None
    group_commit: GroupCommit
    append_writers: AppendWriters
    _heavy_pool: ThreadPoolExecutor | None

    def partition_or_error(self, tp: TopicPartition, current_leader_epoch: int = NO_EPOCH, *,
                           require_leader: bool = True) -> Partition:
        raise NotImplementedError  # the ReplicaManager's

    def _notify(self, tp: TopicPartition) -> None:
        raise NotImplementedError  # the ReplicaManager's: fetches waiting for data

    def _report_io_error(self, lg: Log, exc: BaseException, op: str) -> bool:
        raise NotImplementedError  # the ReplicaManager's: the log dir offline

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

    def append_async(self, tp: TopicPartition, records: bytes, *, required_acks: int = 1
                     ) -> tuple[LogAppendInfo, asyncio.Future[Written] | None]:
        """``append(group_commit=True)`` whose segment write may run on the log dir's writer
        thread: the offsets are known on return; the future (on the loop, in append order)
        says once the bytes are written, after the HW moved or the group commit took them
        (wait on its waiter to answer). None: written already, as ``append``."""
        loop = asyncio.get_running_loop()
        written: asyncio.Future[Written] = loop.create_future()
        partition: Partition | None = None
        try:
            partition = self.partition_or_error(tp)
            partition.check_append(required_acks)
            lg = partition.log
            writer = self.append_writers.for_log(lg)
            done = self._on_written(loop, partition, written)
            info, handed = lg.append_as_leader_async(records, partition.leader_epoch, writer,
                                                     done)
            if not handed:
                self._after_write(partition, True)
        except Exception as exc:
            if partition is not None:
                self._report_io_error(partition.log, exc, f"appending to {tp}")
            self._record_failed(tp)
            raise
        self._record_append(tp, records, info)
        return info, written if handed else None

    def _on_written(self, loop: asyncio.AbstractEventLoop, partition: Partition,
                    written: asyncio.Future[Written]) -> Callable[[BaseException | None], None]:
        def done(error: BaseException | None) -> None:  # on the writer thread
            try:
                loop.call_soon_threadsafe(self._written, partition, written, error)
            except RuntimeError:  # the loop is closed (the broker stopped): nobody waits
                pass
        return done

    def _written(self, partition: Partition, written: asyncio.Future[Written],
                 error: BaseException | None) -> None:
        tp = partition.topic_partition
        outcome: Written = (error, None)
        if error is not None:
            self._report_io_error(partition.log, error, f"appending to {tp}")
        else:
            self._after_write(partition, True)
            outcome = (None, self.group_commit.waiter(tp))
        if not written.done():
            written.set_result(outcome)

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
        if group_commit and flush_due(partition.log):
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

