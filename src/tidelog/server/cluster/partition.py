"""A hosted partition (Kafka's kafka.cluster.Partition): between the ReplicaManager and the
log. It holds the leader epoch and the assignment the controller sent, the leader's view of
each follower, the ISR, and moves the high watermark to the smallest log end offset in the
ISR. ISR changes (partition_isr.py) leave through an injected ``AlterPartitionSender``
(AlterPartition to the controller) and only count once the controller committed them;
high-watermark moves are reported through ``on_high_watermark`` (the ReplicaManager wakes
its purgatories). It never imports the ReplicaManager.

Runs on the event loop, but for ``append_to_log`` (any thread: the log locks)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.fast import FetchPartitionData, quiet_partition
from tidelog.storage.errors import UnexpectedAppendOffsetError
from tidelog.storage.log_read import FetchIsolation
from tidelog.storage.segment import LogOffsetMetadata
from tidelog.storage.validator import AppendOrigin
from tidelog.util.clock import Clock
from tidelog.util.topic_partition import TopicPartition

from ..errors import ApiError
from ..sendfile import slice_records
from .fetch_params import FetchParams, PartitionFetchData
from .partition_isr import AlterPartitionSender as AlterPartitionSender  # (exported)
from .partition_isr import PartitionIsrChanges
from .partition_state import (
    NO_EPOCH,
    NO_LEADER,
    LeaderAndIsrPartitionState,
    PartitionState,
    high_watermark_candidate,
    leader_epoch_error,
)
from .quiet_answer import QuietAnswer
from .replica import Replica

if TYPE_CHECKING:
    from tidelog.storage.log import Log
    from tidelog.storage.log_append import LogAppendInfo
    from tidelog.storage.producer_state import ProducerStateEntry
    from tidelog.storage.segment import FetchDataInfo

log = logging.getLogger(__name__)
_NOWHERE = LogOffsetMetadata(-1)  # a position not known
_NONE = ErrorCode.NONE  # bound once: 3.11's EnumType.__getattr__ slows Enum.MEMBER
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000
# ListOffsets' special timestamps (Kafka's ListOffsetsRequest)
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP = -1, -2, -4
# earliest local, latest tiered, earliest pending upload: offsets the log keeps, never
# bounded by what a consumer may fetch
TIERED_SPECIALS = (EARLIEST_LOCAL_TIMESTAMP, -5, -6)
UNDEFINED_EPOCH_OFFSET = -1


class Partition(PartitionIsrChanges):
    # kept quiet answers dropped (a leadership change, a new log), all partitions together:
    # whoever keeps copies of them (server/quiet_table.py) starts again when it moved
    quiet_drops: ClassVar[int] = 0

    def __init__(self, tp: TopicPartition, log: Log, *, local_broker_id: int, clock: Clock,
                 replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
                 alter_partition_sender: AlterPartitionSender | None = None,
                 on_high_watermark: Callable[[TopicPartition], object] | None = None,
                 topic_id: uuid.UUID | None = None) -> None:
        self.topic_partition = tp
        self.log = log
        # the LogManager's logs_version when ``log`` was last found current there
        # (ReplicaManager.get_partition; -1: not yet)
        self.logs_version = -1
        self.local_broker_id = local_broker_id
        self.clock = clock
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.alter_partition_sender = alter_partition_sender
        self.on_high_watermark = on_high_watermark
        self.topic_id = topic_id
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.controller_epoch = -1
        self.leader_epoch_start_offset: int | None = None
        self.assignment: tuple[int, ...] = ()
        self.remote_replicas: dict[int, Replica] = {}
        self.state = PartitionState.committed(frozenset())
        # the leader's own part of the high watermark: its log end offset, or what a durable
        # group commit has flushed of it
        self.local_committed_offset = 0
        self._alter_task: asyncio.Task[None] | None = None
        # a consumer's answer to a read at the high watermark, while nothing changed
        # (``quiet_answer``); dropped on a leadership change or a new log
        self.quiet: QuietAnswer | None = None

    # -- state --------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return int(self.log.high_watermark)

    @property
    def log_end_offset(self) -> int:
        return int(self.log.log_end_offset)

    @property
    def log_start_offset(self) -> int:
        return int(self.log.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        return int(self.log.last_stable_offset)

    @property
    def local_log_start_offset(self) -> int:
        """Where the local log starts: below it, with remote storage, records are in the
        remote tier (Kafka's UnifiedLog.localLogStartOffset)."""
        return int(self.log.local_log_start_offset)

    @property
    def remote_storage_enabled(self) -> bool:
        """The topic's ``remote.storage.enable``."""
        return bool(self.log.config.remote_storage_enable)

    @property
    def isr(self) -> frozenset[int]:
        return self.state.isr

    @property
    def min_insync_replicas(self) -> int:
        return int(self.log.config.min_insync_replicas)

    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.state.isr) < self.min_insync_replicas

    def check_leader_epoch(self, current_leader_epoch: int, *, require_leader: bool) -> None:
        """Raise what Kafka answers a request naming ``current_leader_epoch`` (-1: none):
        NOT_LEADER_OR_FOLLOWER when ``require_leader`` and this broker does not lead,
        FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH when the epochs differ."""
        if current_leader_epoch != NO_EPOCH:  # (a produce names none)
            error = leader_epoch_error(current_leader_epoch, self.leader_epoch)
            if error is not None:
                raise ApiError(error, f"{self.topic_partition}: leader epoch "
                                      f"{current_leader_epoch} in the request, "
                                      f"{self.leader_epoch} here")
        if require_leader and self.leader_id != self.local_broker_id:  # (is_leader)
            raise ApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                           f"Broker {self.local_broker_id} is not the leader of "
                           f"{self.topic_partition}")

    # -- becoming leader or follower ---------------------------------------------------------
    def make_leader(self, state: LeaderAndIsrPartitionState,
                    checkpoints: list[Log] | None = None) -> bool:
        """Become (or stay) leader as ``state`` says; False when the request is stale (an
        older partition epoch) or changes nothing (this leader epoch already). A new epoch's
        checkpoint is written here, or pending with the log put in ``checkpoints``."""
        if state.partition_epoch < self.partition_epoch:
            return False
        self.controller_epoch = state.controller_epoch
        now = self.clock.milliseconds()
        is_new_leader = not self.is_leader
        is_new_epoch = state.leader_epoch > self.leader_epoch
        self._update_assignment_and_isr(state.replicas, frozenset(state.isr))
        if is_new_epoch:
            start = self.log_end_offset
            # a LeaderAndIsr's every new epoch, the first too (Kafka's makeLeader), its
            # checkpoint written off the loop before the answer; one broker leading its own
            # logs (no ``checkpoints``) started epoch 0 when the topic was made (create_logs)
            if state.leader_epoch > 0 or checkpoints is not None:
                changed = self.log.leader_epoch_cache.assign(
                    state.leader_epoch, start, pending=checkpoints is not None)
                if changed and checkpoints is not None:
                    checkpoints.append(self.log)
            for replica in self.remote_replicas.values():
                replica.reset(now, start, is_new_leader, replica.broker_id in state.isr)
            self.leader_epoch = state.leader_epoch
            self.leader_epoch_start_offset = start
        self.partition_epoch = state.partition_epoch
        self.leader_id = self.local_broker_id
        self.drop_quiet()
        if is_new_leader:
            self.local_committed_offset = self.log_end_offset
        self.maybe_increment_leader_hw(now)
        return is_new_leader or is_new_epoch

    def make_follower(self, state: LeaderAndIsrPartitionState) -> bool:
        """Follow ``state.leader``; True when the leader epoch is new (the fetcher must
        restart from the new leader), False when the request is stale or changes nothing."""
        if state.partition_epoch < self.partition_epoch:
            return False
        self.controller_epoch = state.controller_epoch
        is_new_epoch = state.leader_epoch > self.leader_epoch
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.drop_quiet()
        self.leader_epoch_start_offset = None
        self.partition_epoch = state.partition_epoch
        self._update_assignment_and_isr(state.replicas, frozenset())
        return is_new_epoch

    def _update_assignment_and_isr(self, replicas: tuple[int, ...], isr: frozenset[int]) -> None:
        self.assignment = tuple(replicas)
        remote = [r for r in replicas if r != self.local_broker_id]
        self.remote_replicas = {r: self.remote_replicas.get(r) or Replica(r) for r in remote}
        self.state = PartitionState.committed(isr)

    # -- the leader's log --------------------------------------------------------------------
    def check_append(self, required_acks: int) -> None:
        """Kafka's appendRecordsToLeader checks: leader here, and for acks=-1 an ISR at
        least ``min.insync.replicas`` large."""
        if self.leader_id != self.local_broker_id:  # (is_leader)
            raise ApiError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                           f"Leader not local for partition {self.topic_partition} on broker "
                           f"{self.local_broker_id}")
        if required_acks != -1:
            return
        min_isr = self.log.config.min_insync_replicas
        if len(self.state.isr) < min_isr:
            raise ApiError(ErrorCode.NOT_ENOUGH_REPLICAS,
                           f"The size of the current ISR {sorted(self.state.isr)} is "
                           f"insufficient to satisfy the min.isr requirement of {min_isr} "
                           f"for partition {self.topic_partition}")

    def append_to_log(self, records: bytes, *, defer_flush: bool = False,
                      origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
        """Append as leader, the batches stamped with the leader epoch (any thread);
        ``origin`` COORDINATOR for a coordinator's own records (Kafka's AppendOrigin)."""
        return self.log.append_as_leader(records, self.leader_epoch, origin,
                                         defer_flush=defer_flush)

    def append_records_to_leader(self, records: bytes, *, required_acks: int,
                                 group_commit: bool = False) -> LogAppendInfo:
        """Check, append; the high watermark moves once the leader's own part is committed
        (``advance_local_committed``: at once, or after the group commit's flush)."""
        self.check_append(required_acks)
        return self.append_to_log(records, defer_flush=group_commit)

    def advance_local_committed(self, offset: int | None = None) -> bool:
        """The leader's log is committed up to ``offset`` (None: its end); True if the high
        watermark moved."""
        lg = self.log
        if self.remote_replicas or self.leader_id != self.local_broker_id:
            end = lg.log_end_offset
            self.local_committed_offset = end if offset is None else min(offset, end)
            return self.maybe_increment_leader_hw(None, end)  # (the time read only then)
        # the whole ISR is this broker: ``maybe_increment_leader_hw``'s HW is the committed
        # offset (the LEO, after each append: read and moved to in one call of the log)
        if offset is None:
            self.local_committed_offset, moved = lg.high_watermark_to_end()
        else:
            self.local_committed_offset = committed = min(offset, lg.log_end_offset)
            moved = lg.maybe_increment_high_watermark(committed) is not None
        if not moved:
            return False
        notify = self.on_high_watermark  # (an attribute called as a method: a generic lookup)
        if notify is not None:
            notify(self.topic_partition)
        return True

    # -- reads: Fetch, ListOffsets, OffsetForLeaderEpoch ------------------------------------
    def fetch_offset_snapshot(self, current_leader_epoch: int, fetch_only_from_leader: bool,
                              out: FetchPartitionData) -> int:
        """The leader epoch checked (``check_leader_epoch``), then the offsets a Fetch answers
        (HW, LSO, log start) set on ``out``; returns the log end offset of that moment
        (Kafka's fetchOffsetSnapshot)."""
        self.check_leader_epoch(current_leader_epoch, require_leader=fetch_only_from_leader)
        lg = self.log
        out.high_watermark = lg.high_watermark
        out.last_stable_offset = lg.last_stable_offset
        out.log_start_offset = lg.log_start_offset
        return int(lg.log_end_offset)

    def fetch_records(self, params: FetchParams, fetch: PartitionFetchData,
                      out: FetchPartitionData, max_bytes: int, min_one_message: bool,
                      throttled: bool = False) -> None:
        """Kafka's Partition.fetchRecords, answered into ``out``: the leader epoch checked
        (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER where only the
        leader may answer), the offsets, then for a follower whose log forked from ours the
        diverging epoch and no records; else the read (a file slice: the batches stay bytes,
        sent with sendfile when large; nothing for a ``throttled`` follower) and for a
        follower its fetch state, ISR expansion and the HW. Raises OffsetOutOfRangeError for
        an offset outside the log (the ReplicaManager's remote-read seam catches it)."""
        follower = params.replica_id >= 0
        # (inline, as fetch_offset_snapshot: this runs for every partition of every Fetch;
        # the checks called only when the epochs differ or this broker does not lead)
        epoch = fetch.current_leader_epoch
        if not ((epoch == NO_EPOCH or epoch == self.leader_epoch)
                and self.leader_id == self.local_broker_id):
            self.check_leader_epoch(epoch,
                                    require_leader=follower or params.client_metadata is None)
        lg = self.log
        leader_end = lg.log_end_offset if follower else -1  # (a follower's state only)
        out.high_watermark = lg.high_watermark
        out.last_stable_offset = lg.last_stable_offset
        out.log_start_offset = lg.log_start_offset
        if follower and fetch.last_fetched_epoch >= 0:
            diverging = self._diverging_epoch(fetch)
            if diverging is not None:  # no records, no follower state: it truncates first
                out.records = b""
                if diverging[1] < 0:
                    out.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                else:
                    out.diverging_epoch = diverging
                return
        if throttled:
            out.records = b""  # a throttled replica outside the ISR gets nothing for now
        else:
            info = lg.read(fetch.fetch_offset, max_bytes, params.isolation, min_one_message)
            # Kafka (fetch v3+) sends nothing rather than a cut batch: a client can't decode
            # the piece, and the partition gets its whole batch once it comes first later.
            out.records = b"" if info.first_entry_incomplete else slice_records(info.records)
            aborted = info.aborted_transactions
            if aborted:
                out.aborted_transactions = [(a.producer_id, a.first_offset) for a in aborted]
        if follower:
            self.update_follower_fetch_state(params.replica_id, fetch.fetch_offset,
                                             fetch.fetcher_log_start_offset,
                                             params.replica_epoch, self.clock.milliseconds(),
                                             leader_end)
            out.high_watermark = lg.high_watermark  # it may have moved with this fetch

    def drop_quiet(self) -> None:
        """Forget the kept quiet answer (its leadership or log changed), and count it."""
        self.quiet = None
        Partition.quiet_drops += 1

    def quiet_answer(self, version: int) -> QuietAnswer | None:
        """What a consumer's Fetch of ``version`` is answered for this partition when it reads
        at the high watermark with nothing past it (``fetch_records`` with no error and no
        records), kept in ``quiet`` with the log's state stamp under which it was read; None
        when that does not hold here: not the leader, a transaction open (the LSO below the
        HW), the log closed."""
        if self.leader_id != self.local_broker_id:  # (``is_leader`` inline)
            return None
        lg = self.log
        lock = lg.lock
        lock.acquire()  # the stamp and what it covers read together (no context manager:
        try:  # this runs for each partition that moved, in every Fetch that names it)
            hw = lg.high_watermark
            ps = lg.producer_state  # no transaction undecided or unreplicated: the LSO is
            if lg.closed or ((ps.ongoing_txns or ps.unreplicated_txns)  # the HW, unasked
                             and lg.last_stable_offset != hw):
                return None
            start = lg.log_start_offset
            at = lg.high_watermark_metadata
            stamp = lg.state_stamp
        finally:
            lock.release()
        if at is None or at.message_offset != hw:
            at = _NOWHERE
        q = self.quiet = QuietAnswer(
            stamp, hw, self.leader_epoch, version,
            quiet_partition(self.topic_partition.partition, hw, hw, start, version),
            at.segment_base_offset, at.relative_position_in_segment, start)
        return q

    def read_records(self, fetch_offset: int, max_bytes: int, isolation: FetchIsolation,
                     min_one_message: bool) -> FetchDataInfo:
        """The local log's read from ``fetch_offset`` up to what ``isolation`` allows (Kafka's
        Partition.readRecords, its checks done by the caller)."""
        return self.log.read(fetch_offset, max_bytes, isolation, min_one_message)

    def _diverging_epoch(self, fetch: PartitionFetchData) -> tuple[int, int] | None:
        """A follower's last fetched epoch (Fetch v12+) against ours: the largest epoch of
        ours at or below it and where that epoch ends, when the follower's log does not agree
        with ours up to its fetch offset ((-1, -1): we know no such epoch)."""
        epoch, end = self.log.end_offset_for_epoch(fetch.last_fetched_epoch)
        if epoch < fetch.last_fetched_epoch or end < fetch.fetch_offset:
            return int(epoch), int(end)
        return None

    def fetch_offset_for_timestamp(self, timestamp: int, isolation: FetchIsolation,
                                   current_leader_epoch: int,
                                   fetch_only_from_leader: bool = True) -> tuple[int, int, int]:
        """Kafka's fetchOffsetForTimestamp: (timestamp, offset, leader epoch) for ListOffsets.
        Latest (-1) is the log end for a follower (``LOG_END``), else the LSO or HW; earliest
        (-2) the log start; any other timestamp (max timestamp, earliest local, a time) is
        looked up, and nothing found at or past what ``isolation`` may fetch is (-1, -1, -1)."""
        self.check_leader_epoch(current_leader_epoch, require_leader=fetch_only_from_leader)
        lg = self.log
        if timestamp == LATEST_TIMESTAMP:
            end = (lg.log_end_offset if isolation is FetchIsolation.LOG_END
                   else lg.last_stable_offset if isolation is FetchIsolation.TXN_COMMITTED
                   else lg.high_watermark)
            return -1, int(end), max(self.leader_epoch, 0)
        if timestamp == EARLIEST_TIMESTAMP:
            return -1, int(lg.log_start_offset), 0
        found = lg.fetch_offset_by_timestamp(timestamp)
        fetchable = (lg.last_stable_offset if isolation is FetchIsolation.TXN_COMMITTED
                     else lg.high_watermark)
        if found is None or (timestamp not in TIERED_SPECIALS and found.offset >= fetchable):
            return -1, -1, -1
        epoch = found.leader_epoch
        return found.timestamp, found.offset, 0 if epoch is None else epoch

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int,
                                     fetch_only_from_leader: bool = True) -> tuple[int, int]:
        """Kafka's lastOffsetForLeaderEpoch: (epoch, end offset) from the leader-epoch cache;
        an epoch the log never saw or newer than its latest is (-1, -1)."""
        self.check_leader_epoch(current_leader_epoch, require_leader=fetch_only_from_leader)
        lg = self.log
        latest = lg.leader_epoch_cache.latest_epoch()
        if latest is None or leader_epoch > latest:
            return UNDEFINED_EPOCH_OFFSET, UNDEFINED_EPOCH_OFFSET
        epoch, offset = lg.end_offset_for_epoch(leader_epoch)
        return int(epoch), int(offset)

    def active_producers(self) -> list[tuple[int, ProducerStateEntry]]:
        """The log's active producers (DescribeProducers), by id."""
        return sorted(self.log.producer_state.active_producers.items())

    # -- the followers, as the leader sees them ---------------------------------------------
    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int,
                                    log_start_offset: int, broker_epoch: int,
                                    now_ms: int, leader_end_offset: int | None = None) -> None:
        """A Fetch from follower ``replica_id`` at ``fetch_offset``, answered when the leader's
        log ended at ``leader_end_offset`` (default: now): its state, ISR expansion, HW."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None or not self.is_leader:
            return
        previous_end, previous_start = replica.log_end_offset, replica.log_start_offset
        end = self.log_end_offset if leader_end_offset is None else leader_end_offset
        replica.update_fetch_state(fetch_offset, log_start_offset, now_ms, end, broker_epoch)
        self.maybe_expand_isr(replica, now_ms)
        moved = previous_end != replica.log_end_offset and self.maybe_increment_leader_hw(now_ms)
        if (not moved and previous_start != replica.log_start_offset
                and self.on_high_watermark is not None):
            self.on_high_watermark(self.topic_partition)  # a DeleteRecords may complete

    def maybe_increment_leader_hw(self, now_ms: int | None = None,
                                  leader_end: int | None = None) -> bool:
        """The smallest end offset among the leader and the replicas that count: the maximal
        ISR, and caught-up replicas about to join it (Kafka's maybeIncrementLeaderHW).
        ``now_ms``: the time (None: the clock's, read when there are followers);
        ``leader_end``: the log end offset just read (None: read here)."""
        if self.leader_id != self.local_broker_id:  # (is_leader)
            return False
        lg = self.log
        if leader_end is None:
            leader_end = lg.log_end_offset
        local = min(self.local_committed_offset, leader_end)
        if self.remote_replicas:
            if now_ms is None:
                now_ms = self.clock.milliseconds()
            counted = set(self.state.maximal_isr)
            ends = {}
            for r, replica in self.remote_replicas.items():
                ends[r] = replica.log_end_offset
                if replica.is_caught_up(leader_end, now_ms, self.replica_lag_time_max_ms):
                    counted.add(r)
            hw = high_watermark_candidate(local, ends, frozenset(counted))
        else:  # the whole ISR is this broker
            hw = local
        if lg.maybe_increment_high_watermark(hw) is None:
            return False
        if self.on_high_watermark is not None:
            self.on_high_watermark(self.topic_partition)
        return True

    def low_watermark_if_leader(self, alive: Callable[[int], bool]) -> int:
        """The smallest log start offset among the leader and its live followers (Kafka's
        lowWatermarkIfLeader): what a DeleteRecords waits for."""
        low = self.log_start_offset
        for r, replica in self.remote_replicas.items():
            if alive(r) and replica.log_start_offset < low:
                low = replica.log_start_offset
        return low

    def check_enough_replicas_reached(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """For DelayedProduce: (done, error). Done once the HW reached ``required_offset``;
        NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell below min.insync.replicas
        meanwhile; NOT_LEADER_OR_FOLLOWER once this broker no longer leads."""
        if self.leader_id != self.local_broker_id:  # (is_leader)
            return False, ErrorCode.NOT_LEADER_OR_FOLLOWER
        lg = self.log
        if lg.high_watermark >= required_offset:
            if lg.config.min_insync_replicas <= len(self.state.maximal_isr):
                return True, _NONE
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, _NONE

    # -- the follower's log (the replication fetcher calls these) ---------------------------
    def latest_epoch(self) -> int | None:
        return self.log.leader_epoch_cache.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int] | None:
        found_epoch, end = self.log.end_offset_for_epoch(epoch)
        return None if end < 0 else (found_epoch, end)

    def append_records_to_follower(self, records: bytes) -> LogAppendInfo:
        """The leader's batches as they are. An empty log whose start (the leader's, after
        DeleteRecords) falls inside the first fetched batch starts over at that batch's
        base offset (Kafka's doAppendRecordsToFollowerOrFutureReplica)."""
        lg = self.log
        try:
            return lg.append_as_follower(records)
        except UnexpectedAppendOffsetError as e:
            end = lg.log_end_offset
            if not (end == lg.log_start_offset and e.first_offset < end <= e.last_offset):
                raise
            lg.truncate_fully_and_start_at(e.first_offset)
            return lg.append_as_follower(records)

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)

    def update_follower_high_watermark(self, high_watermark: int, log_start_offset: int) -> bool:
        """The leader's high watermark, capped at our end (it may go down after a
        truncation), and its log start offset (DeleteRecords and retention follow)."""
        lg = self.log
        old = lg.high_watermark
        new = lg.update_high_watermark(min(high_watermark, lg.log_end_offset))
        if log_start_offset > lg.log_start_offset:
            lg.maybe_increment_log_start_offset(min(log_start_offset, new), "leader offset")
        return bool(new != old)
