"""The classic group protocol's rebalance core (half of Kafka's GroupCoordinator), sans I/O.

Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and Dead once deleted. JoinGroup
and SyncGroup answer through callbacks because their responses wait for other members; every
timer (session expiry, rebalance timeout, initial delay, pending sync) goes through the
injected scheduler so tests drive time with a ManualClock. Everything runs on one thread (the
broker's event loop), so there are no locks.
"""

from __future__ import annotations

import logging
import uuid

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.consumer.coordinator import ConsumerGroupCoordinator
from tidelog.server.coordinator.group.consumer.migration import Migration
from tidelog.server.coordinator.group.group import GroupMetadata, GroupState
from tidelog.server.coordinator.group.group_configs import GroupConfigStore
from tidelog.server.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    JoinCallback,
    JoinRequest,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from tidelog.server.coordinator.group.metadata_manager import GroupMetadataManager
from tidelog.server.coordinator.group.pending_offsets import LoadedPartition
from tidelog.server.coordinator.group.share.coordinator import ShareGroupCoordinator
from tidelog.server.coordinator.store import OffsetsStore
from tidelog.util.clock import Clock
from tidelog.util.scheduler import ScheduledTask, Scheduler

log = logging.getLogger(__name__)

class RebalanceCore:
    """Lifecycle, JoinGroup and the rebalance timers; ``GroupCoordinator`` adds the rest."""

    def __init__(
        self,
        config: GroupConfig,
        *,
        clock: Clock,
        scheduler: Scheduler,
        store: OffsetsStore,
        node_id: int = 0,
    ) -> None:
        self.config = config
        self.clock = clock
        self.scheduler = scheduler
        self.node_id = node_id
        self.manager = GroupMetadataManager(config, clock=clock, store=store)
        # KIP-848 groups share the manager (one cache, one log, one offsets store)
        self.consumer = ConsumerGroupCoordinator(config, self.manager, clock=clock,
                                                 scheduler=scheduler,
                                                 group_error=self.group_error)
        # classic members of consumer groups; upgrades and downgrades
        self.migration = Migration(self.consumer, on_downgraded=self._on_downgraded)
        self.consumer.migration = self.migration
        self.share = ShareGroupCoordinator(config, clock=clock, scheduler=scheduler,
                                           group_error=self.group_error,
                                           other_kind=self._is_classic_or_consumer)
        # group configs (GROUP resource): one store, read by both kinds of coordinator
        self.group_configs = self.consumer.settings
        self.share.settings = self.group_configs
        self.active = False
        self._expiry_task: ScheduledTask | None = None

    def use_group_configs(self, store: GroupConfigStore) -> GroupConfigStore:
        """Another store of the group configs (a cluster's, in ZooKeeper) for both kinds of
        coordinator."""
        self.group_configs = self.consumer.settings = self.share.settings = store
        return store

    # ------------------------------------------------------------------ lifecycle

    def startup(self, load: bool = True) -> None:
        """Load every partition of ``__consumer_offsets`` (single node: we own them all)."""
        partitions = range(self.config.offsets_topic_num_partitions)
        self.manager.mark_loading(partitions)
        self.active = True
        if load:
            for p in partitions:
                self.load_partition(p)
        self._expiry_task = self.scheduler.schedule(
            "delete-expired-group-metadata",
            self.manager.cleanup_expired_offsets,
            self.config.offsets_retention_check_interval_ms,
            self.config.offsets_retention_check_interval_ms,
        )

    def load_partition(self, partition: int) -> None:
        self._on_groups_loaded(self.manager.load_partition(partition))
        self.consumer.on_loaded(partition)

    def complete_load(self, partition: int, data: LoadedPartition) -> None:
        """Install an incrementally replayed partition (see wiring._load_all)."""
        self._on_groups_loaded(self.manager.complete_load(partition, data))
        self.consumer.on_loaded(partition)

    def _on_groups_loaded(self, groups: list[GroupMetadata]) -> None:
        # Loaded members get a fresh session: they must heartbeat or be removed (Kafka's
        # onGroupLoaded).
        for group in groups:
            for member in group.members.values():
                self._complete_and_schedule_heartbeat(group, member)

    def shutdown(self) -> None:
        """Stop every timer; the groups stay in memory (a restart reloads them anyway)."""
        self.active = False
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        for group in self.manager.groups.values():
            for member in group.members.values():
                member.cancel_heartbeat()
            tasks = [group.join_task, group.sync_task, *group.pending_members.values()]
            for task in tasks:
                if task is not None:
                    task.cancel()
        self.consumer.shutdown()
        self.share.shutdown()

    def _is_classic_or_consumer(self, group_id: str) -> bool:
        return group_id in self.manager.groups or group_id in self.manager.consumer_groups

    @property
    def groups(self) -> dict[str, GroupMetadata]:
        return self.manager.groups

    def now(self) -> int:
        return self.clock.milliseconds()

    def group_error(self, group_id: str, allow_empty: bool = False) -> ErrorCode:
        """Kafka's validateGroupStatus: id, coordinator active, partition loaded."""
        if not group_id and not allow_empty:
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_owned(group_id):
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    # ------------------------------------------------------------------ JoinGroup

    def join_group(self, req: JoinRequest, callback: JoinCallback) -> None:
        if req.rebalance_timeout_ms < 0:
            req.rebalance_timeout_ms = req.session_timeout_ms
        err = self.group_error(req.group_id)
        if err == ErrorCode.NONE and not (
            self.config.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            err = ErrorCode.INVALID_SESSION_TIMEOUT
        if err != ErrorCode.NONE:
            callback(JoinResult(err, member_id=req.member_id))
            return
        consumer_group = self.consumer.groups.get(req.group_id)
        if consumer_group is not None and consumer_group.members:
            callback(self.migration.join(req))  # a classic member of a consumer group
            return
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id != UNKNOWN_MEMBER_ID:
                callback(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=req.member_id))
                return
            err = self.consumer.downgrade_if_empty(req.group_id)
            if err != ErrorCode.NONE:
                callback(JoinResult(err, member_id=req.member_id))
                return
            group = GroupMetadata(req.group_id, self.now())
            self.groups[req.group_id] = group
        if req.member_id == UNKNOWN_MEMBER_ID:
            self._join_unknown_member(group, req, callback)
        else:
            self._join_known_member(group, req, callback)
        # A group created for this join that rejected it leaves nothing behind.
        if (
            group.is_state(GroupState.EMPTY)
            and not group.members
            and not group.pending_members
            and not group.offsets
            and group.generation_id == 0
        ):
            self.groups.pop(group.group_id, None)

    def _on_downgraded(self, group: GroupMetadata) -> None:
        """A consumer group turned classic (migration.py): its members' sessions run from
        now and they rejoin in a rebalance."""
        for member in group.members.values():
            self._complete_and_schedule_heartbeat(group, member)
        self._prepare_rebalance(group, f"Downgrade group {group.group_id} from consumer to "
                                       "classic.")

    def _join_unknown_member(
        self, group: GroupMetadata, req: JoinRequest, callback: JoinCallback
    ) -> None:
        if group.is_state(GroupState.DEAD):
            callback(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            callback(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        known_static = group.static_member_id(req.group_instance_id)
        if known_static is None and self._group_is_full(group):
            callback(JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED))
            return
        new_id = f"{req.group_instance_id or req.client_id}-{uuid.uuid4()}"
        if req.group_instance_id is not None:
            self._join_static_member(group, req, new_id, known_static, callback)
        elif req.require_known_member_id:
            # KIP-394: hand out the id and wait for the member to come back with it.
            task = self.scheduler.schedule(
                f"pending-member-{new_id}",
                lambda: self._expire_pending_member(group, new_id),
                req.session_timeout_ms,
            )
            group.pending_members[new_id] = task
            callback(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=new_id))
        else:
            self._add_member_and_rebalance(group, req, new_id, callback)

    def _group_is_full(self, group: GroupMetadata) -> bool:
        return len(group.members) + len(group.pending_members) >= self.config.group_max_size

    def _join_static_member(
        self,
        group: GroupMetadata,
        req: JoinRequest,
        new_id: str,
        old_id: str | None,
        callback: JoinCallback,
    ) -> None:
        assert req.group_instance_id is not None
        if old_id is None:
            self._add_member_and_rebalance(group, req, new_id, callback)
            return
        # A known instance restarted: it takes over the old member's place under a new id.
        member = group.replace_static_member(req.group_instance_id, old_id, new_id)
        old_cb = member.awaiting_join
        member.awaiting_join = None
        if old_cb is not None:
            old_cb(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id))
        old_sync = member.awaiting_sync
        member.awaiting_sync = None
        if old_sync is not None:
            old_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if group.is_state(GroupState.STABLE) and member.matches(req.protocols):
            # Nothing changed for the group: keep the assignment, skip the rebalance.
            self._complete_and_schedule_heartbeat(group, member)
            self._try_store_group(group)
            callback(
                JoinResult(
                    ErrorCode.NONE,
                    generation_id=group.generation_id,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    leader_id=group.leader_id or "",
                    member_id=new_id,
                    members=group.current_member_metadata() if group.is_leader(new_id) else [],
                    skip_assignment=group.is_leader(new_id),
                )
            )
            return
        self._update_member_and_rebalance(group, member, req, callback)

    def _join_known_member(
        self, group: GroupMetadata, req: JoinRequest, callback: JoinCallback
    ) -> None:
        member_id = req.member_id
        if group.is_state(GroupState.DEAD):
            callback(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
            return
        if not group.supports_protocols(req.protocol_type, req.protocols):
            callback(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        if member_id in group.pending_members:
            task = group.pending_members.pop(member_id)
            if task is not None:
                task.cancel()
            self._add_member_and_rebalance(group, req, member_id, callback)
            return
        if group.is_static_member_fenced(req.group_instance_id, member_id):
            callback(JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id))
            return
        member = group.members.get(member_id)
        if member is None:
            callback(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
            return
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req, callback)
        elif group.is_state(GroupState.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # A retried join (lost response): answer with the current generation.
                callback(self._join_result(group, member_id))
            else:
                self._update_member_and_rebalance(group, member, req, callback)
        elif group.is_state(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # The leader rejoining means it wants a new assignment (e.g. metadata changed).
                self._update_member_and_rebalance(group, member, req, callback)
            else:
                callback(self._join_result(group, member_id, with_members=False))
        else:  # Empty: the member was removed meanwhile
            callback(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _join_result(
        self, group: GroupMetadata, member_id: str, with_members: bool = True
    ) -> JoinResult:
        leader = group.is_leader(member_id)
        return JoinResult(
            ErrorCode.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            member_id=member_id,
            members=group.current_member_metadata() if leader and with_members else [],
        )

    def _add_member_and_rebalance(
        self, group: GroupMetadata, req: JoinRequest, member_id: str, callback: JoinCallback
    ) -> None:
        member = MemberMetadata(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            supported_protocols=[(n, bytes(m)) for n, m in req.protocols],
            awaiting_join=callback,
            is_new=True,
        )
        group.add(member)
        # Kafka: an empty group's first join waits group.initial.rebalance.delay.ms.
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        self._complete_and_schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(group, f"Adding new member {member_id}")
        self._try_complete_join(group)

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        req: JoinRequest,
        callback: JoinCallback,
    ) -> None:
        member.supported_protocols = [(n, bytes(m)) for n, m in req.protocols]
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if member.awaiting_join is not None and member.awaiting_join is not callback:
            # A duplicate join replaces the earlier one; the earlier gets a retriable error.
            member.awaiting_join(
                JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id)
            )
        member.awaiting_join = callback
        self._complete_and_schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(group, f"Updating metadata for member {member.member_id}")
        self._try_complete_join(group)

    # ------------------------------------------------------------------ rebalance

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        if group.sync_task is not None:
            group.sync_task.cancel()
            group.sync_task = None
        initial = group.is_state(GroupState.EMPTY)
        log.info(
            "Preparing to rebalance group %s in state %s with old generation %d (reason: %s)",
            group.group_id,
            group.state.value,
            group.generation_id,
            reason,
        )
        group.transition_to(GroupState.PREPARING_REBALANCE, self.now())
        timeout = group.rebalance_timeout_ms()
        if initial and self.config.group_initial_rebalance_delay_ms > 0:
            delay = min(self.config.group_initial_rebalance_delay_ms, timeout)
            group.join_deadline_ms = self.now() + timeout
            group.new_member_added = False
            self._schedule_join(group, delay, initial_delay=True)
        else:
            group.join_deadline_ms = self.now() + timeout
            self._schedule_join(group, timeout, initial_delay=False)

    def _schedule_join(self, group: GroupMetadata, delay: int, *, initial_delay: bool) -> None:
        if group.join_task is not None:
            group.join_task.cancel()
        fn = (
            (lambda: self._on_initial_delay_expired(group, delay))
            if initial_delay
            else (lambda: self._on_join_timeout(group))
        )
        group.join_task = self.scheduler.schedule(f"join-{group.group_id}", fn, delay)
        group.initial_delay_active = initial_delay

    def _on_initial_delay_expired(self, group: GroupMetadata, delay: int) -> None:
        """Kafka's InitialDelayedJoin: wait again while members keep arriving, up to the
        rebalance timeout."""
        group.join_task = None
        remaining = group.join_deadline_ms - self.now()
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            self._schedule_join(group, min(delay, remaining), initial_delay=True)
            return
        self._complete_join(group)

    def _on_join_timeout(self, group: GroupMetadata) -> None:
        group.join_task = None
        self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        if not group.is_state(GroupState.PREPARING_REBALANCE):
            return
        if group.initial_delay_active:
            return  # the initial delay runs its course
        if group.has_all_members_joined():
            if group.join_task is not None:
                group.join_task.cancel()
                group.join_task = None
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        """Kafka's onCompleteJoin: drop members that did not rejoin, start a generation."""
        if not group.is_state(GroupState.PREPARING_REBALANCE):
            return
        group.initial_delay_active = False
        for member in group.not_yet_rejoined():
            log.info(
                "Group %s removes member %s: it did not rejoin", group.group_id, member.member_id
            )
            group.remove(member.member_id)
        for member_id, task in list(group.pending_members.items()):
            if task is not None:
                task.cancel()
            del group.pending_members[member_id]
        group.init_next_generation(self.now())
        if group.is_state(GroupState.EMPTY):
            log.info(
                "Group %s with generation %d is now empty", group.group_id, group.generation_id
            )
            self._try_store_group(group)
            return
        log.info(
            "Stabilized group %s generation %d (protocol %s) with %d members",
            group.group_id,
            group.generation_id,
            group.protocol_name,
            len(group.members),
        )
        for member in list(group.members.values()):
            result = self._join_result(group, member.member_id)
            member.complete_join(result)
            self._complete_and_schedule_heartbeat(group, member)
        self._schedule_pending_sync(group)

    def _try_store_group(self, group: GroupMetadata) -> None:
        """Persist without failing the caller (Kafka only logs when this write fails: the
        next generation's write supersedes it)."""
        try:
            self.manager.store_group(group)
        except OSError as exc:
            log.warning("failed to write group metadata of %s: %s", group.group_id, exc)

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        group.pending_sync = set(group.members)
        generation = group.generation_id
        group.sync_task = self.scheduler.schedule(
            f"sync-{group.group_id}",
            lambda: self._on_sync_timeout(group, generation),
            group.rebalance_timeout_ms(),
        )

    def _on_sync_timeout(self, group: GroupMetadata, generation: int) -> None:
        group.sync_task = None
        if generation != group.generation_id or not group.is_state(
            GroupState.COMPLETING_REBALANCE, GroupState.STABLE
        ):
            return
        pending = group.pending_sync
        if not pending:
            return
        for member_id in list(pending):
            log.info("Group %s removes member %s: no SyncGroup in time", group.group_id, member_id)
            group.remove(member_id)
        pending.clear()
        self._prepare_rebalance(group, "members failed to sync within the rebalance timeout")
        self._try_complete_join(group)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            member.complete_sync(SyncResult(error))

    # ------------------------------------------------------------------ heartbeat timers

    def _complete_and_schedule_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata
    ) -> None:
        """Kafka's completeAndScheduleNextHeartbeatExpiration. A later deadline leaves the
        armed timer alone (it re-checks when it fires), an earlier one re-arms it: e.g. a
        member whose first join outlasted its session is armed at new_member_join_timeout."""
        now = self.now()
        member.last_heartbeat_ms = now
        deadline = self._expiry_deadline(member, now)
        if member.heartbeat_task is None or member.expiry_at_ms > deadline:
            member.cancel_heartbeat()
            self._schedule_expiry(group, member, deadline - now)

    def _expiry_deadline(self, member: MemberMetadata, now: int) -> int:
        if member.is_awaiting_join and member.is_new:
            return member.last_heartbeat_ms + self.config.new_member_join_timeout_ms
        deadline = member.last_heartbeat_ms + member.session_timeout_ms
        if member.is_awaiting_join:  # waiting on the others: not its fault
            deadline = max(deadline, now + member.session_timeout_ms)
        return deadline

    def _schedule_expiry(self, group: GroupMetadata, member: MemberMetadata, delay: int) -> None:
        member.expiry_at_ms = self.now() + max(delay, 0)
        member.heartbeat_task = self.scheduler.schedule(
            f"heartbeat-{group.group_id}-{member.member_id}",
            lambda: self._on_expire_heartbeat(group, member),
            max(delay, 0),
        )

    def _on_expire_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_task = None
        if group.members.get(member.member_id) is not member:
            return  # left, replaced or expired already
        now = self.now()
        deadline = self._expiry_deadline(member, now)
        if now < deadline:
            self._schedule_expiry(group, member, deadline - now)
            return
        log.info(
            "Member %s in group %s has failed, removing it from the group",
            member.member_id,
            group.group_id,
        )
        self._remove_member_and_update_group(group, member, "session timeout expired")

    def _expire_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        if group.pending_members.pop(member_id, "absent") != "absent":
            self._try_complete_join(group)
            if (
                group.is_state(GroupState.EMPTY)
                and not group.members
                and not group.offsets
                and not group.pending_members
                and group.generation_id == 0
            ):
                self.groups.pop(group.group_id, None)

    def _remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        member.complete_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id))
        member.complete_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        group.pending_sync.discard(member.member_id)
        if group.is_state(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        elif group.is_state(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
