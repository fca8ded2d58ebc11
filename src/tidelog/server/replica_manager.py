"""The broker's partitions (Kafka's ReplicaManager): the partition map, the append and fetch
fan-out, and LeaderAndIsr / StopReplica applied to it. Logs come from the storage
``LogManager`` (checkpoints, recovery points, retention, the cleaner), which gets each
topic's config overrides from the metadata store; the topic half lives in
``replica_topics.py``, the append path in ``replica_appends.py``.

Without ZooKeeper the broker is a one-broker cluster: every partition of every topic is
hosted here and made leader with ISR [self] as soon as its log exists. All calls happen on
the broker's event-loop thread (the LogManager's periodic tasks run on its scheduler, the
logs a LeaderAndIsr needs are made on the log-creation thread: ``replica_manager_lai.py``)."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from tidelog.config.broker_config import BrokerConfig
from tidelog.metrics import BrokerTopicStats
from tidelog.protocol.errors import ErrorCode
from tidelog.storage.log import Log
from tidelog.storage.log_read import FetchIsolation
from tidelog.storage.log_writes import AppendWriters
from tidelog.storage.manager import LogManager
from tidelog.util.clock import Clock
from tidelog.util.scheduler import KafkaScheduler
from tidelog.util.topic_partition import TopicPartition

from .cluster.partition import AlterPartitionSender, Partition
from .cluster.partition_state import NO_EPOCH, LeaderAndIsrPartitionState
from .errors import ApiError
from .group_commit import GroupCommit
from .log_dir_description import LogDirDescription, describe_log_dirs
from .metadata.cache import MetadataCache
from .metadata.image import BrokerInfo
from .metadata.local_store import (
    LocalMetadataStore,
    write_partition_metadata,
)
from .metadata.store import MetadataStore, MetadataStoreError, TopicInfo
from .purgatory import FetchPurgatory, ReplicationPurgatory
from .quiet_table import QuietTable
from .replica_appends import ReplicaAppends, Written
from .replica_fetches import RemoteFetch
from .replica_manager_lai import LeaderAndIsrResult, PreparedLogs, ReplicaStateChanges, prepare_log
from .replica_topics import INTERNAL_TOPICS, ReplicaTopics
from .replication.fetcher_manager import FetcherManager, InitialFetchState, NoFetchers
from .sessionless_fetches import SessionlessFetches

if TYPE_CHECKING:
    from tidelog.storage.producer_state import ProducerStateEntry

    from .free_space_replication import FloorReplicationHold

log = logging.getLogger(__name__)
PRODUCER_ID_BLOCK = 1000
__all__ = ["INTERNAL_TOPICS", "LeaderAndIsrResult", "ReplicaManager", "Written"]


def _make_log_manager(config: BrokerConfig, clock: Clock, store: MetadataStore) -> LogManager:
    defaults = config.log_config_defaults()

    def topic_configs(topic: str) -> dict[str, str] | None:
        info = store.topics.get(topic)
        return None if info is None else dict(info.configs)

    # the LogManager's periodic tasks (flush, retention, checkpoints) read broker keys too
    props = {**config.originals, **defaults}
    return LogManager(
        config.log_dirs, props, clock=clock, scheduler=KafkaScheduler(), topic_configs=topic_configs
    )


class ReplicaManager(ReplicaTopics, ReplicaAppends, SessionlessFetches, ReplicaStateChanges):
    def __init__(self, config: BrokerConfig, clock: Clock, logs: LogManager | None = None, *,
                 metadata_cache: MetadataCache | None = None,
                 store: MetadataStore | None = None,
                 fetcher_manager: FetcherManager | None = None,
                 alter_partition_sender: AlterPartitionSender | None = None) -> None:
        self.config = config
        self.clock = clock
        self.node_id = config.node_id
        self.store = store if store is not None else LocalMetadataStore(
            config.log_dirs, config.node_id, config.values["cluster.id"])
        # without zookeeper.connect: every partition here, led here, the image published from
        # the store
        self.one_broker = config.zookeeper_connect is None
        self.metadata_cache = metadata_cache if metadata_cache is not None else MetadataCache()
        self.local_broker = BrokerInfo(config.node_id, {}, config.values["broker.rack"])
        self._publish_lock = threading.Lock()
        self.logs = logs if logs is not None else _make_log_manager(config, clock, self.store)
        self.partitions: dict[TopicPartition, Partition] = {}
        self.partitions_made = self.partitions_dropped = 0  # counted for server/heap.py
        # sessionless_fetches.py: partition index -> Partition per topic, and what it was
        # built from (partitions made, dropped, the log manager's logs_version)
        self._quiet_tables: dict[str, QuietTable] = {}
        self._quiet_hosted: dict[str, list[int]] = {}
        self._quiet_key = (-1, -1, -1, -1)
        self.fetcher_manager: FetcherManager = fetcher_manager or NoFetchers()
        self.alter_partition_sender = alter_partition_sender
        self.controller_epoch = 0
        self.replica_lag_time_max_ms = int(config.values["replica.lag.time.max.ms"])
        self._init_purgatories()
        # the remote tier's reads (replica_fetches.py): None, no tier
        self.remote_fetch: RemoteFetch | None = None
        # BrokerTopicMetrics (bytes/messages in, produce requests); None: not recorded
        self.topic_stats: BrokerTopicStats | None = BrokerTopicStats()
        self._init_pools()
        self.pending_topics: set[str] = set()
        self._pid_next = 0
        self._pid_end = 0
        self._isr_expiration: asyncio.TimerHandle | None = None
        self._init_appends(config)
        # in a cluster: replicas in a dir below log.dir.min.free.bytes held out of replication
        self.floor_hold: FloorReplicationHold | None = None

    def _init_pools(self) -> None:
        """The thread pools work goes off the loop to (made when first needed), and the
        state changes' one-at-a-time order."""
        self._heavy_pool: ThreadPoolExecutor | None = None
        self._admin_pool: ThreadPoolExecutor | None = None
        # LeaderAndIsr's new logs made off the loop, one state change at a time
        # (replica_manager_lai.py)
        self._log_pool: ThreadPoolExecutor | None = None
        self._state_change_lock: asyncio.Lock | None = None
        self._state_changes: set[asyncio.Task[object]] = set()

    def _init_appends(self, config: BrokerConfig) -> None:
        """How produce appends are written (storage/log_writes.py)."""
        self.group_commit = GroupCommit(self._on_group_flushed)
        # produce appends written off the loop, one writer thread per log dir (log_writes)
        self.async_appends = bool(config.values["tidelog.log.append.writer.enable"])
        # ... but those under this many bytes with none in flight on the loop (log_writes)
        self.inline_append_bytes = int(config.values["tidelog.log.append.writer.inline.bytes"])
        self.append_writers = AppendWriters()

    def _init_purgatories(self) -> None:
        """Kafka's DelayedProduce, DelayedDeleteRecords and DelayedFetch purgatories; the
        fetch one is woken by every append."""
        self.delayed_produce = ReplicationPurgatory(self._check_replicated)
        self.delayed_delete_records = ReplicationPurgatory(self._check_low_watermark)
        self._append_listeners: list[Callable[[TopicPartition], object]] = []
        # DelayedFetch: woken by HW moves and appends
        self.delayed_fetch = FetchPurgatory()  # (woken before the listeners: ``_notify``)
        # partitions led here since a LeaderAndIsr whose followers have not all fetched yet
        self._first_fetch_pending: set[TopicPartition] = set()

    # -- lifecycle ----------------------------------------------------------------------------
    def startup(self) -> None:
        had_metadata = self.store.load()
        if not self.one_broker:
            # the controller's UpdateMetadata fills the image; the cluster id is /cluster/id's
            # from the start (Kafka's ZkMetadataCache is made with it)
            self.metadata_cache.publish(replace(self.metadata_cache.image, cluster_id=self.cluster_id))
        self.logs.startup()
        # an offline dir's partitions go offline in the image
        self.logs.failure_channel.add_listener(lambda _path: self.publish_image())
        if had_metadata:  # without the topic list every log would look stray
            self._remove_stray_logs()
        if self.one_broker:
            for info in self.store.topics.values():
                for p in range(info.partitions):
                    self._open(TopicPartition(info.name, p), info)
                self._host_topic(info)
        self.publish_image()

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
        if self._isr_expiration is not None:
            self._isr_expiration.cancel()
            self._isr_expiration = None
        self.append_writers.stop()  # the writes queued end first: their flushes follow
        self.group_commit.shutdown()  # no fsync in flight may outlive the logs
        for pool in (self._log_pool, self._heavy_pool, self._admin_pool):
            if pool is not None:  # no log creation, append or admin work may outlive the logs
                pool.shutdown(wait=True)
        self._log_pool = self._heavy_pool = self._admin_pool = None
        self.logs.shutdown()

    # -- the partition map --------------------------------------------------------------------
    def _new_partition(self, tp: TopicPartition, lg: Log,
                       topic_id: uuid.UUID | None) -> Partition:
        self.partitions_made += 1
        return Partition(tp, lg, local_broker_id=self.node_id, clock=self.clock,
                         replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                         alter_partition_sender=self.alter_partition_sender,
                         on_high_watermark=self._on_high_watermark, topic_id=topic_id)

    def _host_topic(self, info: TopicInfo) -> None:
        """One-broker mode: each partition of ``info`` (its log made) is led here, ISR [self],
        at the epoch its log last saw (Kafka's makeLeader: the HW moves to the LEO at once)."""
        if not self.one_broker:
            return
        for p in range(info.partitions):
            tp = TopicPartition(info.name, p)
            if tp in self.partitions:
                continue
            lg = self.logs.get_log(tp)
            if lg is None:
                continue  # offline: opened (and refused) on first use
            partition = self._new_partition(tp, lg, info.topic_id)
            self.partitions[tp] = partition
            epoch = lg.leader_epoch_cache.latest_epoch() or 0
            node = (self.node_id,)
            partition.make_leader(LeaderAndIsrPartitionState(
                tp.topic, p, self.controller_epoch, self.node_id, epoch, node, 0, node))

    def _unhost_topic(self, name: str) -> None:
        for tp in [tp for tp in self.partitions if tp.topic == name]:
            del self.partitions[tp]
            self.partitions_dropped += 1
            self._on_high_watermark(tp)  # waiting produces and fetches answer now

    def _leader_epochs(self) -> Mapping[TopicPartition, int]:
        return {tp: p.leader_epoch for tp, p in list(self.partitions.items())}

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        """The hosted partition, its log current (an AlterReplicaLogDirs move swaps it);
        KafkaStorageError when its log dir is offline; None when not hosted here."""
        partition = self.partitions.get(tp)
        if partition is None:
            info = self.store.topics.get(tp.topic)
            if not self.one_broker or info is None or not 0 <= tp.partition < info.partitions:
                return None
            self._open(tp, info)  # raises KafkaStorageError for an offline dir
            self._host_topic(info)
            return self.partitions.get(tp)
        version = self.logs.logs_version
        if partition.logs_version == version:
            return partition  # no log stored or removed since its log was found current
        lg = self.logs.get_log(tp)
        if lg is None:  # its dir went offline: answer as Kafka does for an offline replica
            info = self.store.topics.get(tp.topic)
            self.logs.get_or_create_log(tp, None if info is None else dict(info.configs))
        else:
            partition.log = lg
            partition.quiet = None
            partition.logs_version = version
        return partition

    def hosted_topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic of that id with a partition here (a scan: for ids the
        metadata image does not know yet)."""
        return next((tp.topic for tp, p in self.partitions.items() if p.topic_id == topic_id), None)

    def partition_or_error(self, tp: TopicPartition, current_leader_epoch: int = NO_EPOCH, *,
                           require_leader: bool = True) -> Partition:
        """Kafka's getPartitionOrException + validation: not hosted here, the error of
        ``_not_hosted``; NOT_LEADER_OR_FOLLOWER when ``require_leader`` and not led here,
        FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for another epoch."""
        partition = self.get_partition(tp)  # (not _hosted: every append asks this)
        if partition is None:
            raise self._not_hosted(tp)
        partition.check_leader_epoch(current_leader_epoch, require_leader=require_leader)
        return partition

    def _hosted(self, tp: TopicPartition) -> Partition:
        partition = self.get_partition(tp)
        if partition is None:
            raise self._not_hosted(tp)
        return partition

    def _not_hosted(self, tp: TopicPartition) -> ApiError:
        """Kafka's getPartitionOrError for a partition with no replica here: one the metadata
        knows is NOT_LEADER_OR_FOLLOWER (the client refreshes its metadata and finds the
        leader), any other UNKNOWN_TOPIC_OR_PARTITION."""
        if self.metadata_cache.image.partition(tp) is not None:
            return ApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                            f"This broker is not a replica of {tp}.")
        return ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        "This server does not host this topic-partition.")

    def get_log(self, tp: TopicPartition) -> Log | None:
        partition = self.get_partition(tp)
        return None if partition is None else partition.log

    def _open(self, tp: TopicPartition, info: TopicInfo) -> Log:
        """Open/create the partition's log and make sure ``partition.metadata`` names the
        topic id (Kafka writes it when a replica is created or loaded). Any thread."""
        lg = self.logs.get_or_create_log(tp, dict(info.configs))
        try:
            write_partition_metadata(Path(lg.dir), info.topic_id)
        except MetadataStoreError as exc:
            log.error("%s", exc)
        return lg

    # -- LeaderAndIsr / StopReplica ------------------------------------------------------------
    def become_leader_or_follower(
        self, controller_id: int, controller_epoch: int,
        states: Iterable[LeaderAndIsrPartitionState],
        topic_ids: Mapping[str, uuid.UUID], prepared: PreparedLogs | None = None,
        checkpoints: list[Log] | None = None,
    ) -> LeaderAndIsrResult:
        """Kafka's becomeLeaderOrFollower: a stale controller epoch refuses the request; a
        partition's state applies only at a newer leader epoch (an older one is
        STALE_CONTROLLER_EPOCH); new followers stop fetching, then fetch from their leader.
        New partitions take their log from ``prepared`` (made off the loop:
        ``apply_leader_and_isr``), or make it here. New leader epochs' checkpoints are
        written here, or left to the caller in ``checkpoints`` (``Partition.make_leader``)."""
        result = LeaderAndIsrResult()
        if controller_epoch < self.controller_epoch:
            result.error = ErrorCode.STALE_CONTROLLER_EPOCH
            return result
        self.controller_epoch = controller_epoch
        leaders: list[tuple[Partition, LeaderAndIsrPartitionState]] = []
        followers: list[tuple[Partition, LeaderAndIsrPartitionState]] = []
        for state in states:
            tp = TopicPartition(state.topic_name, state.partition_index)
            error, partition = self._accept_state(tp, state, topic_ids.get(tp.topic), prepared)
            result.errors[tp] = error
            if partition is not None:
                (leaders if state.leader == self.node_id else followers).append(
                    (partition, state))
        for partition, state in leaders:
            self.fetcher_manager.remove_fetcher_for_partitions([partition.topic_partition])
            if partition.make_leader(state, checkpoints):
                result.new_leaders.append(partition.topic_partition)
                if partition.remote_replicas:
                    self._first_fetch_pending.add(partition.topic_partition)
        self._make_followers(followers, topic_ids, result)
        if self.one_broker:
            self.publish_image()
        return result

    def _accept_state(self, tp: TopicPartition, state: LeaderAndIsrPartitionState,
                      topic_id: uuid.UUID | None, prepared: PreparedLogs | None,
                      ) -> tuple[ErrorCode, Partition | None]:
        if self.logs.offline_partition_dir(tp) is not None:  # Kafka's HostedPartition.Offline
            return ErrorCode.KAFKA_STORAGE_ERROR, None
        partition = self.partitions.get(tp)
        if partition is None:
            refused = self._refused_before_log(tp, state)
            if refused is not None:
                return refused, None
            made = None if prepared is None else prepared.get(tp)
            if made is None:
                made = prepare_log(self.logs, tp, self._topic_overrides(tp.topic), topic_id,
                                   self.admin_executor())
            if made.log is None or made.error != ErrorCode.NONE:
                return made.error, None
            partition = self.partitions[tp] = self._new_partition(tp, made.log, topic_id)
        if topic_id is not None and partition.topic_id not in (None, topic_id):
            return ErrorCode.INCONSISTENT_TOPIC_ID, None
        hold = self.floor_hold  # a dir below its floor answers as an offline one
        held = hold is not None and hold.holds(partition, state.leader, tuple(state.isr))
        resumed = (hold is not None and not held and state.leader_epoch >= partition.leader_epoch
                   and hold.resumes(partition))  # fmt: skip
        if state.leader_epoch < partition.leader_epoch or (
                state.leader_epoch == partition.leader_epoch and not resumed):  # fmt: skip
            return ErrorCode.KAFKA_STORAGE_ERROR if held else ErrorCode.STALE_CONTROLLER_EPOCH, None
        if self.node_id not in state.replicas:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        if resumed and state.leader_epoch == partition.leader_epoch and state.leader != self.node_id:
            partition.leader_epoch = -1  # taken as a new epoch: the fetcher starts again
        return (ErrorCode.KAFKA_STORAGE_ERROR if held else ErrorCode.NONE), partition

    def _make_followers(self, followers: list[tuple[Partition, LeaderAndIsrPartitionState]],
                        topic_ids: Mapping[str, uuid.UUID], result: LeaderAndIsrResult) -> None:
        moved = [p for p, state in followers if p.make_follower(state)]
        if not moved:
            return
        tps = [p.topic_partition for p in moved]
        self.fetcher_manager.remove_fetcher_for_partitions(tps)
        for tp in tps:  # produces and fetches waiting here answer NOT_LEADER_OR_FOLLOWER
            self._on_high_watermark(tp)
        fetch = {}
        hold = self.floor_hold
        for p in moved:
            tp = p.topic_partition
            if hold is not None and tp in hold.held:
                continue  # below its dir's floor: follows the leader, fetches nothing
            p.log.wait_for_writes()  # appends queued as leader land before the LEO is read
            offset = p.log_end_offset  # Kafka's initialFetchOffset: the LEO
            result.new_followers[tp] = (p.leader_id, offset)
            fetch[tp] = InitialFetchState(p.leader_id, p.leader_epoch, offset,
                                          topic_ids.get(tp.topic))
        self.fetcher_manager.add_fetcher_for_partitions(fetch)

    def _topic_overrides(self, topic: str) -> dict[str, str] | None:
        info = self.store.topics.get(topic)
        return None if info is None else dict(info.configs)

    def maybe_shrink_isr(self) -> None:
        """Kafka's isr-expiration task (every replica.lag.time.max.ms / 2)."""
        now = self.clock.milliseconds()
        for partition in list(self.partitions.values()):
            partition.maybe_shrink_isr(now)

    def start_isr_expiration(self) -> None:
        """Run ``maybe_shrink_isr`` every replica.lag.time.max.ms / 2 on the running loop."""
        loop = asyncio.get_running_loop()
        period = self.replica_lag_time_max_ms / 2000

        def tick() -> None:
            try:
                self.maybe_shrink_isr()
            finally:
                self._isr_expiration = loop.call_later(period, tick)

        self._isr_expiration = loop.call_later(period, tick)

    def set_alter_partition_sender(self, sender: AlterPartitionSender | None) -> None:
        """Where ISR changes go (the cluster's AlterPartition channel), for every partition."""
        self.alter_partition_sender = sender
        for partition in self.partitions.values():
            partition.alter_partition_sender = sender

    def _on_high_watermark(self, tp: TopicPartition) -> None:
        # (each ``tp in`` only when something is parked at all: an empty map is told by its
        # size, without hashing ``tp``)
        if (watched := self.delayed_produce.watched) and tp in watched:  # (a call only then)
            self.delayed_produce.check_and_complete(tp)
        if (watched := self.delayed_delete_records.watched) and tp in watched:
            self.delayed_delete_records.check_and_complete(tp)
        fetch = self.delayed_fetch  # (``_notify`` inline: once per append, no call)
        if (fetch.by_partition and tp in fetch.by_partition) or \
                (fetch.by_topic and tp.topic in fetch.by_topic):  # a call only then
            fetch.check_and_complete(tp)
        if self._first_fetch_pending and tp in self._first_fetch_pending:
            self._wake_first_fetchers(tp)
        if self._append_listeners:
            for fn in self._append_listeners:
                fn(tp)

    def _notify(self, tp: TopicPartition) -> None:
        fetch = self.delayed_fetch
        if tp in fetch.by_partition or tp.topic in fetch.by_topic:  # a call only then
            fetch.check_and_complete(tp)
        if tp in self._first_fetch_pending:  # (a dropped partition leaves it here)
            self._wake_first_fetchers(tp)
        for fn in self._append_listeners:
            fn(tp)

    def _wake_first_fetchers(self, tp: TopicPartition) -> None:
        """Records on a partition an in-sync follower has not fetched since this broker
        leads it (a new topic): that follower's parked Fetch, which cannot name it yet, is
        answered now, so the next one does and the high watermark need not wait out
        ``replica.fetch.wait.max.ms`` first (Kafka's follower waits)."""
        p = self.partitions.get(tp)
        waiting = [] if p is None or not p.is_leader else [
            b for b, r in p.remote_replicas.items() if b in p.isr and not r.fetched]  # fmt: skip
        if not waiting:
            self._first_fetch_pending.discard(tp)
        for broker_id in waiting:
            self.delayed_fetch.wake_replica(broker_id)

    def _check_replicated(self, tp: TopicPartition, required_offset: int
                          ) -> tuple[bool, ErrorCode]:
        partition = self.partitions.get(tp)
        if partition is None:
            return False, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition.check_enough_replicas_reached(required_offset)

    async def wait_replicated(self, required: dict[TopicPartition, int],
                              timeout_ms: int) -> dict[TopicPartition, ErrorCode]:
        """acks=-1: each partition's outcome once its HW passed ``required[tp]`` (the offset
        after the batch), its error, or REQUEST_TIMED_OUT (DelayedProduce)."""
        return await self.delayed_produce.wait(required, timeout_ms)

    def delete_records(self, tp: TopicPartition, offset: int) -> int:
        """Kafka's deleteRecordsOnLeader: advance the leader's log start offset to ``offset``
        (-1: the high watermark; OFFSET_OUT_OF_RANGE below 0 or past the HW); returns that
        offset, which the followers reach later (``wait_low_watermark``)."""
        hw = self.partition_or_error(tp).high_watermark
        if offset == -1:
            offset = hw
        if offset < 0 or offset > hw:
            raise ApiError(ErrorCode.OFFSET_OUT_OF_RANGE,
                           f"Cannot delete records of {tp} to {offset}: its HW is {hw}")
        self.logs.delete_records(tp, offset)
        return offset

    def describe_log_dirs(self, partitions: Iterable[TopicPartition],
                          futures: Mapping[TopicPartition, Log]) -> list[LogDirDescription]:
        """Kafka's describeLogDirs: each log dir with the replicas of ``partitions`` it holds
        and the ``futures`` (replicas being moved) in it, and whether it failed."""
        return describe_log_dirs(self.logs, self.config.log_dirs, partitions, futures)

    def live_log_dirs(self) -> list[Path]:
        """The log dirs that have not failed."""
        return list(self.logs.live_log_dirs)

    def active_producer_state(self, tp: TopicPartition) -> list[tuple[int, ProducerStateEntry]]:
        """Kafka's activeProducerState of a partition led here: (producer id, its state),
        by id."""
        return self.partition_or_error(tp).active_producers()

    def _alive(self, broker_id: int) -> bool:
        return broker_id in self.metadata_cache.image.brokers

    def low_watermark(self, tp: TopicPartition) -> int:
        return self.partition_or_error(tp).low_watermark_if_leader(self._alive)

    def _check_low_watermark(self, tp: TopicPartition, required_offset: int
                             ) -> tuple[bool, ErrorCode]:
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader:
            return False, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition.low_watermark_if_leader(self._alive) >= required_offset, ErrorCode.NONE

    async def wait_low_watermark(self, required: dict[TopicPartition, int],
                                 timeout_ms: int) -> dict[TopicPartition, ErrorCode]:
        """DeleteRecords: each partition's outcome once every live replica's log start
        offset passed ``required[tp]``, its error, or REQUEST_TIMED_OUT
        (DelayedDeleteRecords)."""
        return await self.delayed_delete_records.wait(required, timeout_ms)

    # -- ListOffsets, OffsetForLeaderEpoch ------------------------------------------------------
    def fetch_offset_for_timestamp(self, tp: TopicPartition, timestamp: int,
                                   isolation: FetchIsolation, current_leader_epoch: int,
                                   fetch_only_from_leader: bool = True) -> tuple[int, int, int]:
        """Kafka's fetchOffsetForTimestamp: ``Partition.fetch_offset_for_timestamp`` of a
        partition hosted here (UNKNOWN_TOPIC_OR_PARTITION otherwise)."""
        return self._hosted(tp).fetch_offset_for_timestamp(
            timestamp, isolation, current_leader_epoch, fetch_only_from_leader)

    def last_offset_for_leader_epoch(self, tp: TopicPartition, current_leader_epoch: int,
                                     leader_epoch: int) -> tuple[int, int]:
        """Kafka's lastOffsetForLeaderEpoch: (epoch, end offset) from the leader's log."""
        return self._hosted(tp).last_offset_for_leader_epoch(current_leader_epoch, leader_epoch)

    # -- log dirs -----------------------------------------------------------------------------
    def _report_io_error(self, lg: Log, exc: BaseException, op: str) -> bool:
        return bool(self.logs.maybe_handle_io_error(lg, exc, op))

    def maybe_handle_io_error(self, tp: TopicPartition, exc: BaseException) -> bool:
        """Report a read/flush error on ``tp``'s log; True if it took its dir offline."""
        lg = self.logs.get_log(tp)
        return lg is not None and self._report_io_error(lg, exc, f"reading {tp}")

    def offline_partitions(self, topic: str) -> frozenset[int]:
        """Partitions of ``topic`` whose log dir is offline (reported in Metadata)."""
        return frozenset(tp.partition for tp in self.logs.offline_partitions()
                         if tp.topic == topic)

    def add_all_dirs_offline_listener(self, fn: Callable[[], object]) -> None:
        self.logs.add_all_dirs_offline_listener(fn)

    def add_append_listener(self, fn: Callable[[TopicPartition], object]) -> None:
        """``fn(tp)`` when ``tp``'s high watermark moves or records are appended to it."""
        self._append_listeners.append(fn)

    def notify_append(self, tp: TopicPartition) -> None:
        """Records were written to ``tp`` outside ``append`` (a coordinator's own write)."""
        self._notify(tp)

    # -- producer ids -------------------------------------------------------------------------
    def allocate_producer_id(self) -> int:
        """Ids come from blocks reserved durably ahead of use, so a crash never reuses one."""
        if self._pid_next >= self._pid_end:
            start = self.store.claim_producer_id_block(PRODUCER_ID_BLOCK)
            self._pid_next, self._pid_end = start, start + PRODUCER_ID_BLOCK
        pid = self._pid_next
        self._pid_next += 1
        return pid
