"""Partition registry of a single-node broker (Kafka's ReplicaManager + the topic half of
the KRaft metadata image): topics persisted in the MetadataStore, one ``Log`` per partition.

Logs come from the storage ``LogManager`` (checkpoints, recovery points, retention, the
cleaner), which gets each topic's config overrides from the MetadataStore. All calls happen
on the broker's event-loop thread (the LogManager's periodic tasks run on its scheduler).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tidelog.config.broker_config import BrokerConfig
from tidelog.config.core import ConfigError
from tidelog.config.log_config import LogConfig
from tidelog.metrics import BrokerTopicStats
from tidelog.protocol.errors import ErrorCode
from tidelog.util.clock import Clock
from tidelog.util.topic_partition import TopicPartition, validate_topic_name

from .errors import ApiError
from .group_commit import GroupCommit, flush_due
from .metadata_store import (
    MetadataStore,
    MetadataStoreError,
    TopicInfo,
    new_topic_id,
    write_partition_metadata,
)

log = logging.getLogger(__name__)
PRODUCER_ID_BLOCK = 1000
# Worker threads for heavy appends (compressed or large batches): with MAX_DECOMPRESSED_BATCH
# (64 MiB) this bounds the decompressed bytes held by validation to 128 MiB at any time.
HEAVY_APPEND_THREADS = 2
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def _make_log_manager(config: BrokerConfig, clock: Clock, store: MetadataStore) -> Any:
    from tidelog.storage.manager import LogManager
    from tidelog.util.scheduler import KafkaScheduler

    defaults = config.log_config_defaults()

    def topic_configs(topic: str) -> dict[str, str] | None:
        info = store.topics.get(topic)
        return None if info is None else dict(info.configs)

    # the LogManager's periodic tasks (flush, retention, checkpoints) read broker keys too
    props = {**config.originals, **defaults}
    return LogManager(
        config.log_dirs, props, clock=clock, scheduler=KafkaScheduler(), topic_configs=topic_configs
    )


class ReplicaManager:
    def __init__(self, config: BrokerConfig, clock: Clock, logs: Any = None) -> None:
        self.config = config
        self.clock = clock
        self.store = MetadataStore(config.log_dirs, config.node_id, config.values["cluster.id"])
        self.logs = logs if logs is not None else _make_log_manager(config, clock, self.store)
        self._append_listeners: list[Callable[[TopicPartition], object]] = []
        # BrokerTopicMetrics (bytes/messages in, produce requests); None: not recorded
        self.topic_stats: BrokerTopicStats | None = BrokerTopicStats()
        self._heavy_pool: ThreadPoolExecutor | None = None
        self._admin_pool: ThreadPoolExecutor | None = None
        self.pending_topics: set[str] = set()
        self._pid_next = 0
        self._pid_end = 0
        self.group_commit = GroupCommit(self._on_group_flushed)

    # -- lifecycle ----------------------------------------------------------------------------
    def startup(self) -> None:
        had_metadata = self.store.path.exists()
        self.store.load()
        self.logs.startup()
        if had_metadata:  # without the topic list every log would look stray
            self._remove_stray_logs()
        for info in self.store.topics.values():
            for p in range(info.partitions):
                lg = self._open(TopicPartition(info.name, p), info)
                # Becoming leader of a one-replica ISR: the HW moves to the LEO at once
                # (Kafka's Partition.makeLeader -> maybeIncrementLeaderHW).
                lg.maybe_increment_high_watermark(lg.log_end_offset)

    def _remove_stray_logs(self) -> None:
        """Partition dirs that no topic owns: a CreateTopics cut short by a crash (the
        topic is published only after all its logs exist) or a deleted topic's dirs. Like
        Kafka's stray replica handling they are renamed ``-delete`` and removed later."""
        for lg in self.logs.all_logs():
            tp = lg.topic_partition
            info = None if tp is None else self.store.topics.get(tp.topic)
            if tp is not None and (info is None or tp.partition >= info.partitions):
                log.warning("Removing stray log %s: no topic owns partition %s", lg.dir, tp)
                self.logs.delete_log(tp)

    def shutdown(self) -> None:
        self.group_commit.shutdown()  # no fsync in flight may outlive the logs
        for pool in (self._heavy_pool, self._admin_pool):
            if pool is not None:
                pool.shutdown(wait=True)  # no append or admin work may outlive the logs
        self._heavy_pool = self._admin_pool = None
        self.logs.shutdown()

    @property
    def cluster_id(self) -> str:
        return self.store.cluster_id

    # -- topics -------------------------------------------------------------------------------
    def topic(self, name: str) -> TopicInfo | None:
        return self.store.topics.get(name)

    def topics(self) -> list[TopicInfo]:
        return list(self.store.topics.values())

    def topic_config(self, name: str) -> LogConfig:
        info = self.store.topics[name]
        return LogConfig.from_props(info.configs, self.config.log_config_defaults(), strict=False)

    def validate_new_topic(self, name: str, partitions: int, configs: Mapping[str, str]) -> None:
        try:
            validate_topic_name(name)
        except ValueError as exc:
            raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from None
        if name in self.store.topics or name in self.pending_topics:
            # pending: being created or deleted off the loop (server/topic_admin.py)
            raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if partitions < 1:
            raise ApiError(
                ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
            )
        self.validate_configs(configs)

    def validate_configs(self, configs: Mapping[str, str]) -> LogConfig:
        try:
            return LogConfig.from_props(configs, self.config.log_config_defaults())
        except ConfigError as exc:
            raise ApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        info = self.new_topic_info(name, partitions, configs)
        if validate_only:
            return info
        self.create_logs(info, range(partitions))
        self.store.topics[name] = info
        self.store.save()
        log.info("created topic %s (%d partitions, configs %s)", name, partitions, info.configs)
        return info

    def new_topic_info(self, name: str, partitions: int,
                       configs: Mapping[str, str] | None) -> TopicInfo:
        """A new topic's description, its name, partition count and configs validated."""
        configs = dict(configs or {})
        self.validate_new_topic(name, partitions, configs)
        return TopicInfo(name, new_topic_id(), partitions, configs)

    def create_logs(self, info: TopicInfo, partitions: range) -> None:
        """Create the logs of ``partitions`` of ``info``, all or none: after a failure (out
        of descriptors, a disk error) the ones created are removed at once, no trace left.
        Runs on any thread (the LogManager locks); the caller publishes the topic after."""
        created: list[TopicPartition] = []
        try:
            for p in partitions:
                tp = TopicPartition(info.name, p)
                self._open(tp, info)
                created.append(tp)
        except Exception:
            abandon = getattr(self.logs, "abandon_logs", None)
            if abandon is not None:
                abandon(created + [TopicPartition(info.name, p) for p in partitions[len(created):]])
            else:
                for tp in created:
                    self.logs.delete_log(tp)
            raise

    def admin_executor(self) -> ThreadPoolExecutor:
        """One thread for admin work that touches many files (topic_admin.py): admin
        operations run one at a time, in order, and never on the event loop."""
        if self._admin_pool is None:
            self._admin_pool = ThreadPoolExecutor(1, thread_name_prefix="tidelog-admin")
        return self._admin_pool

    def auto_create(self, name: str) -> TopicInfo | None:
        """Create ``name`` with broker defaults if auto.create.topics.enable (else None)."""
        if not self.config.values["auto.create.topics.enable"] or name in INTERNAL_TOPICS:
            return None
        try:
            return self.create_topic(name, int(self.config.values["num.partitions"]))
        except ApiError:
            return self.store.topics.get(name)

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.store.topics.get(name)
        if info is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not self.config.values["delete.topic.enable"]:
            raise ApiError(ErrorCode.TOPIC_DELETION_DISABLED)
        del self.store.topics[name]
        if self.topic_stats is not None:
            self.topic_stats.remove_topic(name)
        self.store.save()
        for p in range(info.partitions):
            self.logs.delete_log(TopicPartition(name, p))
        log.info("deleted topic %s", name)
        return info

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> None:
        info = self.store.topics.get(name)
        if info is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        if count <= info.partitions:
            raise ApiError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {info.partitions} partitions, which is higher "
                f"than or equal to the requested {count}.",
            )
        if validate_only:
            return
        old = info.partitions
        info.partitions = count
        self.store.save()
        for p in range(old, count):
            self._open(TopicPartition(name, p), info)

    def set_topic_configs(
        self, name: str, configs: Mapping[str, str], *, validate_only: bool = False
    ) -> None:
        info = self.store.topics.get(name)
        if info is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
        self.validate_configs(configs)
        if validate_only:
            return
        info.configs = dict(configs)
        self.store.save()
        self.logs.update_topic_config(name, info.configs)

    # -- partitions ---------------------------------------------------------------------------
    def get_log(self, tp: TopicPartition) -> Any:
        info = self.store.topics.get(tp.topic)
        if info is None or not 0 <= tp.partition < info.partitions:
            return None
        return self.logs.get_or_create_log(tp, info.configs)

    def _open(self, tp: TopicPartition, info: TopicInfo) -> Any:
        """Open/create the partition's log and make sure ``partition.metadata`` names the
        topic id (Kafka writes it when a replica is created or loaded)."""
        lg = self.logs.get_or_create_log(tp, info.configs)
        try:
            write_partition_metadata(Path(lg.dir), info.topic_id)
        except MetadataStoreError as exc:
            log.error("%s", exc)
        return lg

    def log_or_error(self, tp: TopicPartition) -> Any:
        lg = self.get_log(tp)
        if lg is None:
            raise ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "This server does not host this topic-partition.",
            )
        return lg

    def append(self, tp: TopicPartition, records: bytes, *, group_commit: bool = False) -> Any:
        """``group_commit``: a due ``flush.messages`` fsync joins this turn's group commit,
        and the HW advances after it (wait on ``group_commit.waiter(tp)`` to answer)."""
        try:
            info = self._append(tp, records, group_commit)
        except Exception:
            self._record_failed(tp)
            raise
        self._record_append(tp, records, info)
        return info

    async def append_off_loop(
        self, tp: TopicPartition, records: bytes, *, group_commit: bool = False
    ) -> Any:
        """``append`` with the validation and the write on a worker thread: a compressed or
        large batch (decompression, CRC, copy, write) must not stall every other client.
        At most HEAVY_APPEND_THREADS run at once, which bounds the decompressed bytes in
        flight to that many times MAX_DECOMPRESSED_BATCH. The caller keeps a connection's
        requests in order."""
        lg = self.log_or_error(tp)
        loop = asyncio.get_running_loop()
        try:
            info = await loop.run_in_executor(
                self._heavy_executor(), self._write, lg, tp, records, group_commit
            )
            info = self._after_write(tp, lg, info, group_commit)
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

    def _record_append(self, tp: TopicPartition, records: bytes, info: Any) -> None:
        # Kafka marks BytesIn for every append, MessagesIn for what was appended
        if self.topic_stats is not None:
            n = 0 if info.duplicate else info.num_messages
            self.topic_stats.record_append(tp.topic, len(records), n)

    def _append(self, tp: TopicPartition, records: bytes, group_commit: bool = False) -> Any:
        lg = self.log_or_error(tp)
        info = self._write(lg, tp, records, group_commit)
        return self._after_write(tp, lg, info, group_commit)

    def _write(self, lg: Any, tp: TopicPartition, records: bytes, group_commit: bool) -> Any:
        """Validate and write (any thread: the Log's lock orders it with everything else)."""
        try:
            return lg.append_as_leader(records, defer_flush=True) if group_commit \
                else lg.append_as_leader(records)
        except Exception as exc:
            # A disk error takes the whole log dir offline once (Kafka's LogDirFailureChannel);
            # the caller answers KAFKA_STORAGE_ERROR either way.
            self._report_io_error(lg, exc, f"appending to {tp}")
            raise

    def _after_write(self, tp: TopicPartition, lg: Any, info: Any, group_commit: bool) -> Any:
        """On the loop: the HW, the group commit and the append listeners."""
        if group_commit and flush_due(lg):
            self.group_commit.add(tp, lg)  # consumers see the records once they are on disk
            return info
        self._advance_high_watermark(tp, lg)
        return info

    def _advance_high_watermark(self, tp: TopicPartition, lg: Any, upto: int | None = None) -> None:
        # Single node: the leader is the whole ISR, so HW follows LEO at once (in durable
        # mode: the offset a group commit round put on disk).
        end = lg.log_end_offset
        lg.maybe_increment_high_watermark(end if upto is None else min(upto, end))
        for fn in self._append_listeners:
            fn(tp)

    def _on_group_flushed(
        self, tp: TopicPartition, lg: Any, upto: int, error: BaseException | None
    ) -> None:
        if error is not None:
            self._report_io_error(lg, error, f"flushing {tp}")
        else:
            self._advance_high_watermark(tp, lg, upto)

    def delete_records(self, tp: TopicPartition, offset: int) -> int:
        """Advance the log start offset to ``offset``; returns the new low watermark."""
        lg = self.log_or_error(tp)
        if hasattr(self.logs, "delete_records"):
            self.logs.delete_records(tp, offset)
        else:
            lg.maybe_increment_log_start_offset(offset, "ClientRecordDeletion")
        return int(lg.log_start_offset)

    def _report_io_error(self, lg: Any, exc: BaseException, op: str) -> bool:
        handle = getattr(self.logs, "maybe_handle_io_error", None)
        return bool(handle(lg, exc, op)) if handle is not None else False

    def maybe_handle_io_error(self, tp: TopicPartition, exc: BaseException) -> bool:
        """Report a read/flush error on ``tp``'s log; True if it took its dir offline."""
        lg = self.logs.get_log(tp)
        return lg is not None and self._report_io_error(lg, exc, f"reading {tp}")

    def offline_partitions(self, topic: str) -> frozenset[int]:
        """Partitions of ``topic`` whose log dir is offline (reported in Metadata)."""
        offline = getattr(self.logs, "offline_partitions", None)
        if offline is None:
            return frozenset()
        return frozenset(tp.partition for tp in offline() if tp.topic == topic)

    def add_all_dirs_offline_listener(self, fn: Callable[[], object]) -> None:
        add = getattr(self.logs, "add_all_dirs_offline_listener", None)
        if add is not None:
            add(fn)

    def add_append_listener(self, fn: Callable[[TopicPartition], object]) -> None:
        self._append_listeners.append(fn)

    # -- producer ids -------------------------------------------------------------------------
    def allocate_producer_id(self) -> int:
        """Ids come from blocks reserved durably ahead of use, so a crash never reuses one."""
        if self._pid_next >= self._pid_end:
            start = self.store.next_producer_id
            self.store.next_producer_id = start + PRODUCER_ID_BLOCK
            self.store.save()
            self._pid_next, self._pid_end = start, start + PRODUCER_ID_BLOCK
        pid = self._pid_next
        self._pid_next += 1
        return pid
