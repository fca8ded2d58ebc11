"""One follower fetcher: Kafka's AbstractFetcherThread with ReplicaFetcherThread's partition
handling (core/src/main/scala/kafka/server/AbstractFetcherThread.scala,
ReplicaFetcherThread.scala), as one asyncio task per source broker and fetcher slot.

A partition taken from a new leader first finds where its log and the leader's agree
(OffsetForLeaderEpoch, KIP-101/279) and truncates there, unless ``truncate_on_fetch`` (Kafka's
IBP 2.7+ behaviour) leaves that to the leader's diverging-epoch answers. Each round truncates
the partitions that need it, then sends one Fetch for every partition ready to fetch, and for
each partition of the answer:

* records: appended as the leader wrote them (offsets, leader epochs, producer ids, control
  batches) through ``append_records_to_follower``, after checking the fetch offset is still
  our log end offset; a trailing partial batch (cut by ``replica.fetch.max.bytes``) waits for
  the next fetch; then the leader's high watermark (capped at our LEO) and log start offset;
* a diverging epoch (Fetch v12+): truncate to where our log and the leader's agree, as
  ``getOffsetTruncationState`` computes it, before fetching again;
* OFFSET_OUT_OF_RANGE: ask the leader for its end (and start) offset and truncate (or start
  over at the leader's log start), as ``fetchOffsetAndTruncate``;
* OFFSET_MOVED_TO_TIERED_STORAGE (a tiered partition, our offset below the leader's local
  start): the state is built from remote storage (``tier_state``, Kafka's
  ReplicaFetcherTierStateMachine) and fetching goes on after the last remote segment;
* FENCED_LEADER_EPOCH: if our epoch is the one the leader fenced, the partition waits for a
  newer LeaderAndIsr (it leaves this fetcher and joins ``failed_partitions``); otherwise
  retry after the backoff;
* any other error, or a failed request: the partition (or all) waits
  ``replica.fetch.backoff.ms`` and is retried.

A partition whose append or truncation raises is marked failed and leaves the fetcher; the
others go on. Partitions added while a fetch is in flight are in the next one; an answer for a
partition removed or moved meanwhile is ignored (its fetch offset no longer matches).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from tidelog.client.conn import KafkaClientError
from tidelog.protocol.errors import ErrorCode
from tidelog.util.topic_partition import TopicPartition

from .fetch_state import (
    FetchStateKind,
    FollowerPartition,
    OffsetTruncationState,
    PartitionFetchState,
    PartitionLookup,
    complete_batches_length,
)
from .fetcher_manager import InitialFetchState
from .leader_endpoint import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochData,
    EpochEndOffset,
    FetchedPartition,
    FetchPartition,
    FetchSettings,
    LeaderEndPoint,
    LeaderOffsetError,
)

if TYPE_CHECKING:
    from .quota import ReplicationQuotaManager

log = logging.getLogger(__name__)
# (partition, the leader's log start offset) -> the offset to fetch from next
TierStateBuilder = Callable[[TopicPartition, int], Awaitable[int]]

class ReplicaFetcher:
    """Fetches a set of partitions from one leader (see the module docstring)."""

    def __init__(
        self,
        name: str,
        leader: LeaderEndPoint,
        partitions: PartitionLookup,
        settings: FetchSettings,
        *,
        on_high_watermark: Callable[[list[TopicPartition]], None] | None = None,
        quota: ReplicationQuotaManager | None = None,
        tier_state: TierStateBuilder | None = None,
    ) -> None:
        self.name = name
        self.tier_state = tier_state
        self.quota = quota  # follower.replication.throttled.rate (replication/quota.py)
        self.leader = leader
        self.settings = settings
        self._lookup = partitions
        self._on_high_watermark = on_high_watermark
        self._states: dict[TopicPartition, PartitionFetchState] = {}
        self.failed_partitions: set[TopicPartition] = set()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.fetch_requests = 0
        self.bytes_fetched = 0

    # -- partitions -------------------------------------------------------------------------

    def add_partitions(
        self, states: Mapping[TopicPartition, InitialFetchState]
    ) -> set[TopicPartition]:
        """Kafka's addPartitions: a partition already fetched at the same leader epoch keeps
        its state; otherwise it starts from the given offset, truncating first (through
        OffsetForLeaderEpoch, or to that offset when our log has no epochs) unless
        ``truncate_on_fetch`` leaves that to the leader's diverging-epoch answer."""
        for tp, initial in states.items():
            self.failed_partitions.discard(tp)
            current = self._states.get(tp)
            if current is not None and current.current_leader_epoch == initial.leader_epoch:
                continue
            self._states[tp] = self._initial_state(tp, initial)
        self._changed.set()
        return set(states)

    def _initial_state(self, tp: TopicPartition, initial: InitialFetchState) -> PartitionFetchState:
        if initial.fetch_offset < 0:
            kind, last = FetchStateKind.RESETTING, None
        else:
            last = self._latest_epoch(tp)
            on_fetch = self.settings.truncate_on_fetch and last is not None
            kind = FetchStateKind.FETCHING if on_fetch else FetchStateKind.TRUNCATING
        return PartitionFetchState(
            initial.topic_id, initial.fetch_offset, None, initial.leader_epoch, kind, last
        )

    def remove_partitions(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, PartitionFetchState]:
        removed = {}
        for tp in tps:
            state = self._states.pop(tp, None)
            if state is not None:
                removed[tp] = state
            self.failed_partitions.discard(tp)
        return removed

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        return self._states.get(tp)

    def partition_states(self) -> dict[TopicPartition, PartitionFetchState]:
        return dict(self._states)

    @property
    def partition_count(self) -> int:
        return len(self._states)

    def max_lag(self) -> int:
        return max((s.lag or 0 for s in self._states.values()), default=0)

    # -- task -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def shutdown(self) -> None:
        self._stopping = True
        self._changed.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task})  # not await: our own cancellation must propagate
        await self.leader.close()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        while not self._stopping:
            await asyncio.sleep(0)  # a round that never suspends must not starve the loop
            # a partition added from here on (while truncating, or forgetting the session)
            # ends this round's idle wait: it is looked at in the next round
            self._changed.clear()
            try:
                await self._maybe_truncate()
                await self._maybe_fetch()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not kill replication from this leader
                log.exception("%s: fetch round failed", self.name)
                await self._idle(self.settings.backoff_ms / 1000)

    async def _idle(self, timeout_s: float, *, since_cleared: bool = False) -> None:
        """Wait for a partition change, at most ``timeout_s`` (Kafka's partitionMapCond);
        ``since_cleared``: a change since the caller cleared the flag counts (it looked at
        the partitions then, and awaited since)."""
        if not since_cleared:
            self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), max(timeout_s, 0.0))
        except TimeoutError:
            pass

    def _now(self) -> float:
        return asyncio.get_running_loop().time()

    def _delay(self, tps: Iterable[TopicPartition]) -> None:
        until = self._now() + self.settings.backoff_ms / 1000
        for tp in tps:
            state = self._states.get(tp)
            if state is not None:
                self._states[tp] = replace(state, delayed_until=until)

    def _mark_failed(self, tp: TopicPartition) -> None:
        self._states.pop(tp, None)
        self.failed_partitions.add(tp)
        log.warning("%s: partition %s marked as failed", self.name, tp)

    # -- local log --------------------------------------------------------------------------

    def _partition(self, tp: TopicPartition) -> FollowerPartition:
        p = self._lookup(tp)
        if p is None:
            raise LookupError(f"{tp} is not hosted here")
        return p

    def _latest_epoch(self, tp: TopicPartition) -> int | None:
        p = self._lookup(tp)
        return p.latest_epoch() if p is not None else None

    # -- fetch ------------------------------------------------------------------------------

    async def _maybe_fetch(self) -> None:
        now = self._now()
        request: dict[TopicPartition, FetchPartition] = {}
        for tp, state in self._states.items():
            if not state.ready_for_fetch(now):
                continue
            p = self._lookup(tp)
            if p is None or self._throttled(tp, state):
                continue
            request[tp] = FetchPartition(
                topic_id=state.topic_id,
                fetch_offset=state.fetch_offset,
                log_start_offset=p.log_start_offset,
                max_bytes=self.settings.partition_max_bytes,
                current_leader_epoch=state.current_leader_epoch,
                last_fetched_epoch=state.last_fetched_epoch,
            )
        if not request:
            await self._forget_all()
            await self._idle(self._idle_timeout(now), since_cleared=True)
            return
        await self._process_fetch(request)

    async def _forget_all(self) -> None:
        """Nothing ready: the leader's fetch session forgets what it holds for us (Kafka's
        buildFetch sends a Fetch that only forgets); nothing is sent when it holds nothing."""
        try:
            await self.leader.fetch({})
        except (KafkaClientError, OSError) as e:
            log.debug("%s: forgetting the session's partitions failed: %s", self.name, e)

    def _throttled(self, tp: TopicPartition, state: PartitionFetchState) -> bool:
        """Kafka's shouldFollowerThrottle: not caught up, throttled, over the quota."""
        in_sync = state.lag is not None and state.lag <= 0
        return self.quota is not None and self.quota.should_throttle(tp, in_sync)

    def _idle_timeout(self, now: float) -> float:
        delays = [s.delayed_until - now for s in self._states.values() if s.delayed_until > now]
        backoff = self.settings.backoff_ms / 1000
        return min([backoff, *delays])

    async def _process_fetch(self, request: dict[TopicPartition, FetchPartition]) -> None:
        self.fetch_requests += 1
        try:
            response = await self.leader.fetch(request)
        except (KafkaClientError, OSError) as e:
            if not self._stopping:
                log.info("%s: fetch from %r failed: %s", self.name, self.leader, e)
                self._delay(list(self._states))
            return
        errors: list[TopicPartition] = []
        diverging: dict[TopicPartition, EpochEndOffset] = {}
        moved_hw: list[TopicPartition] = []
        for tp, data in response.items():
            sent = request.get(tp)
            state = self._states.get(tp)
            if sent is None or state is None:
                continue
            if sent.fetch_offset != state.fetch_offset or state.kind is not FetchStateKind.FETCHING:
                continue  # removed and re-added, or truncated, while the fetch was out
            if data.error == ErrorCode.NONE:
                if data.diverging_epoch is not None:
                    diverging[tp] = data.diverging_epoch
                elif self._process_partition_data(tp, state, data):
                    moved_hw.append(tp)
            elif not await self._on_partition_error(tp, state, sent, data.error,
                                                    data.log_start_offset):
                errors.append(tp)
        if diverging:
            self._truncate_to_epoch_end_offsets(diverging, {})
        if errors:
            self._delay(errors)
        if moved_hw and self._on_high_watermark is not None:
            self._on_high_watermark(moved_hw)

    def _process_partition_data(
        self, tp: TopicPartition, state: PartitionFetchState, data: FetchedPartition
    ) -> bool:
        """Append and take the HW; True if our HW moved. A failure marks the partition."""
        try:
            p = self._partition(tp)
            if state.fetch_offset != p.log_end_offset:
                raise RuntimeError(
                    f"offset mismatch for {tp}: fetched {state.fetch_offset}, "
                    f"log end offset {p.log_end_offset}"
                )
            records = data.records[: complete_batches_length(data.records)]
            next_offset = state.fetch_offset
            last_epoch = state.last_fetched_epoch
            if records:
                info = p.append_records_to_follower(records)
                if info.last_offset >= 0:
                    next_offset = info.last_offset + 1
                last_epoch = p.latest_epoch()
                self.bytes_fetched += len(records)
                if self.quota is not None and self.quota.is_throttled(tp):
                    self.quota.record(len(records))
            moved = p.update_follower_high_watermark(data.high_watermark, data.log_start_offset)
        except Exception:
            log.exception(
                "%s: cannot take the leader's data for %s at offset %d",
                self.name,
                tp,
                state.fetch_offset,
            )
            self._mark_failed(tp)
            return False
        lag = max(0, data.high_watermark - next_offset)
        if tp in self._states:
            self._states[tp] = replace(
                state,
                fetch_offset=next_offset,
                lag=lag,
                kind=FetchStateKind.FETCHING,
                last_fetched_epoch=last_epoch,
                delayed_until=0.0,
            )
        return moved

    async def _on_partition_error(
        self, tp: TopicPartition, state: PartitionFetchState, sent: FetchPartition, error: int,
        leader_log_start: int = -1,
    ) -> bool:
        """True when handled (no backoff needed)."""
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            return await self._handle_out_of_range(tp, state)
        if error == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE and self.tier_state is not None:
            return await self._build_from_tiered(tp, state, leader_log_start)
        if error == ErrorCode.FENCED_LEADER_EPOCH:
            return self._on_partition_fenced(tp, sent.current_leader_epoch)
        log.debug("%s: %s answered %s", self.name, tp, _name(error))
        return False

    async def _build_from_tiered(self, tp: TopicPartition, state: PartitionFetchState,
                                 leader_log_start: int) -> bool:
        assert self.tier_state is not None
        try:
            offset = await self.tier_state(tp, leader_log_start)
        except Exception as e:  # remote storage or its metadata not there yet: retry
            log.info("%s: %s cannot be built from remote storage yet: %s", self.name, tp, e)
            return False
        current = self._states.get(tp)
        if current is not None and current.current_leader_epoch == state.current_leader_epoch:
            self._states[tp] = self._fetching(current, offset, 0, self._partition(tp))
        log.info("%s: %s built from remote storage, fetching from %d", self.name, tp, offset)
        return True

    def _on_partition_fenced(self, tp: TopicPartition, request_epoch: int) -> bool:
        """Kafka's onPartitionFenced: True if the partition left the fetcher (no retry)."""
        state = self._states.get(tp)
        if state is None:
            return True
        if request_epoch == state.current_leader_epoch:
            log.info(
                "%s: %s has an older epoch (%d) than the leader; awaiting LeaderAndIsr",
                self.name,
                tp,
                state.current_leader_epoch,
            )
            self._mark_failed(tp)
            return True
        return False

    # -- truncation -------------------------------------------------------------------------

    async def _maybe_truncate(self) -> None:
        with_epochs: dict[TopicPartition, EpochData] = {}
        without: list[TopicPartition] = []
        for tp, state in list(self._states.items()):
            if state.kind is FetchStateKind.RESETTING:
                await self._reset(tp, state)
            elif state.kind is FetchStateKind.TRUNCATING:
                epoch = self._latest_epoch(tp)
                if epoch is None:
                    without.append(tp)
                else:
                    with_epochs[tp] = EpochData(state.current_leader_epoch, epoch)
        if with_epochs:
            ends = await self.leader.fetch_epoch_end_offsets(with_epochs)
            # a leader change while we asked makes the answer stale for that partition
            fresh = {
                tp: e
                for tp, e in ends.items()
                if tp in with_epochs
                and (s := self._states.get(tp)) is not None
                and s.current_leader_epoch == with_epochs[tp].current_leader_epoch
            }
            self._truncate_to_epoch_end_offsets(fresh, with_epochs)
        if without:
            self._truncate_to_high_watermark(without)

    def _truncate_to_high_watermark(self, tps: list[TopicPartition]) -> None:
        done: dict[TopicPartition, OffsetTruncationState] = {}
        for tp in tps:
            state = self._states.get(tp)
            if state is None:
                continue
            truncation = OffsetTruncationState(state.fetch_offset, truncation_completed=True)
            if self._do_truncate(tp, truncation):
                done[tp] = truncation
        self._update_after_truncation(done)

    def _truncate_to_epoch_end_offsets(
        self,
        ends: Mapping[TopicPartition, EpochEndOffset],
        asked: Mapping[TopicPartition, EpochData],
    ) -> None:
        done: dict[TopicPartition, OffsetTruncationState] = {}
        errors: list[TopicPartition] = []
        for tp, end in ends.items():
            if tp not in self._states:
                continue
            if end.error == ErrorCode.NONE:
                truncation = self._offset_truncation_state(tp, end)
                log.info(
                    "%s: truncating %s to %d (leader epoch %d ends at %d)",
                    self.name,
                    tp,
                    truncation.offset,
                    end.leader_epoch,
                    end.end_offset,
                )
                if self._do_truncate(tp, truncation):
                    done[tp] = truncation
            elif end.error == ErrorCode.FENCED_LEADER_EPOCH:
                asked_epoch = asked[tp].current_leader_epoch if tp in asked else -1
                if not self._on_partition_fenced(tp, asked_epoch):
                    errors.append(tp)
            else:
                errors.append(tp)
        self._delay(errors)
        self._update_after_truncation(done)

    def _offset_truncation_state(
        self, tp: TopicPartition, leader: EpochEndOffset
    ) -> OffsetTruncationState:
        """Kafka's getOffsetTruncationState (KIP-101, KIP-279)."""
        state = self._states[tp]
        if leader.end_offset == UNDEFINED_EPOCH_OFFSET:
            return OffsetTruncationState(state.fetch_offset, truncation_completed=True)
        p = self._partition(tp)
        replica_end = p.log_end_offset
        if leader.leader_epoch == UNDEFINED_EPOCH:
            return OffsetTruncationState(min(leader.end_offset, replica_end), True)
        ours = p.end_offset_for_epoch(leader.leader_epoch)
        if ours is None:
            return OffsetTruncationState(min(leader.end_offset, replica_end), True)
        our_epoch, our_end = ours
        if our_epoch != leader.leader_epoch:
            # we do not know the leader's epoch: go back to the end of our largest smaller
            # epoch and ask again
            return OffsetTruncationState(min(our_end, replica_end), truncation_completed=False)
        return OffsetTruncationState(min(our_end, leader.end_offset, replica_end), True)

    def _do_truncate(self, tp: TopicPartition, truncation: OffsetTruncationState) -> bool:
        try:
            self._partition(tp).truncate_to(truncation.offset)
            return True
        except Exception:
            log.exception("%s: truncating %s to %d failed", self.name, tp, truncation.offset)
            self._mark_failed(tp)
            return False

    def _update_after_truncation(
        self, done: Mapping[TopicPartition, OffsetTruncationState]
    ) -> None:
        for tp, truncation in done.items():
            state = self._states.get(tp)
            if state is None:
                continue
            # an unfinished truncation asks again, unless the leader's fetch answers find
            # the rest of the divergence (KIP-279's second round)
            done_now = truncation.truncation_completed or self.settings.truncate_on_fetch
            self._states[tp] = replace(
                state,
                fetch_offset=truncation.offset,
                kind=FetchStateKind.FETCHING if done_now else FetchStateKind.TRUNCATING,
                last_fetched_epoch=self._latest_epoch(tp),
            )

    async def _handle_out_of_range(self, tp: TopicPartition, state: PartitionFetchState) -> bool:
        try:
            new_state = await self._fetch_offset_and_truncate(tp, state)
        except LeaderOffsetError as e:
            if e.error == ErrorCode.FENCED_LEADER_EPOCH:
                return self._on_partition_fenced(tp, state.current_leader_epoch)
            return False
        except (KafkaClientError, OSError, LookupError):
            return False
        if (
            tp in self._states
            and self._states[tp].current_leader_epoch == state.current_leader_epoch
        ):
            self._states[tp] = new_state
        return True

    async def _reset(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        try:
            new_state = await self._fetch_offset_and_truncate(tp, state)
        except (LeaderOffsetError, KafkaClientError, OSError, LookupError) as e:
            log.info("%s: cannot find a fetch offset for %s yet: %s", self.name, tp, e)
            current = self._states.get(tp)
            if current is not None:
                self._states[tp] = replace(
                    current, delayed_until=self._now() + self.settings.backoff_ms / 1000
                )
            return
        current = self._states.get(tp)
        if current is not None and current.current_leader_epoch == state.current_leader_epoch:
            self._states[tp] = new_state

    async def _fetch_offset_and_truncate(
        self, tp: TopicPartition, state: PartitionFetchState
    ) -> PartitionFetchState:
        """Kafka's fetchOffsetAndTruncate: after an unclean election the leader may end
        below us (truncate to its end); after retention it may start above us (start over
        at its log start)."""
        p = self._partition(tp)
        replica_end = p.log_end_offset
        leader_end = await self.leader.fetch_latest_offset(tp, state.current_leader_epoch)
        if leader_end < replica_end:
            log.warning(
                "%s: resetting %s from %d to the leader's end offset %d",
                self.name,
                tp,
                replica_end,
                leader_end,
            )
            p.truncate_to(leader_end)
            return self._fetching(state, leader_end, 0, p)
        leader_start = await self.leader.fetch_earliest_offset(tp, state.current_leader_epoch)
        offset = max(leader_start, replica_end)
        if leader_start > replica_end:
            log.warning(
                "%s: %s ends at %d, before the leader's log start %d: starting over",
                self.name,
                tp,
                replica_end,
                leader_start,
            )
            p.truncate_fully_and_start_at(leader_start)
        return self._fetching(state, offset, leader_end - offset, p)

    @staticmethod
    def _fetching(
        state: PartitionFetchState, offset: int, lag: int, p: FollowerPartition
    ) -> PartitionFetchState:
        return replace(
            state,
            fetch_offset=offset,
            lag=lag,
            kind=FetchStateKind.FETCHING,
            last_fetched_epoch=p.latest_epoch(),
            delayed_until=0.0,
        )


def _name(error: int) -> str:
    try:
        return ErrorCode(error).name
    except ValueError:
        return str(error)
