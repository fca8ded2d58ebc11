"""Share groups (KIP-932): ShareGroupHeartbeat membership, share sessions and the
share-partitions, sans I/O.

Members are assigned the partitions of the topics they subscribe to by Kafka's SimpleAssignor
(assignor.py): spread over the members, shared only when members outnumber partitions (then
records, not partitions, are handed out). A member fetches through a share session
(ShareFetch epoch 0 opens it, -1 closes it, each request otherwise names the next epoch) and
acknowledges what it acquired, in the fetch itself or with ShareAcknowledge. What a member
holds is given back when its share session closes, its group session times out, or a
heartbeat interval after it left (its client closes the session itself then).
The share-partitions live on the leader of their data partition: it reads each one's state
from its share coordinator on first use (``load_partition``, through the persister of
durable.py) and writes it back whenever acknowledgements or a leaving member change it; what
was acknowledged stays so, what was only acquired is offered again. A data partition led
elsewhere now drops its share-partitions (``drop_partitions``). Membership lives on the group
coordinator: a share-partition leader that is not it takes any member's share session.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.coordinator.group.consumer.records import Assignment, TopicMetadata
from tidelog.server.coordinator.group.group_configs import GroupConfigStore
from tidelog.server.coordinator.group.share.assignor import assign
from tidelog.server.coordinator.group.share.durable import (
    DurableShareState,
    PartitionKey,
    persister_error,
)
from tidelog.server.coordinator.group.share.partition import AcquiredRange, SharePartition
from tidelog.server.coordinator.share.records import ShareState
from tidelog.server.coordinator.share.state_coordinator import (
    UNINITIALIZED_START_OFFSET,
    ShareStateCoordinator,
)
from tidelog.util.clock import Clock
from tidelog.util.scheduler import ScheduledTask, Scheduler
from tidelog.util.topic_partition import TopicPartition

log = logging.getLogger(__name__)

SHARE_GROUP_TYPE = "share"
TopicSource = Callable[[], Mapping[str, TopicMetadata]]
FINAL_EPOCH = -1
Slot = tuple[uuid.UUID, int]


@dataclass
class ShareMember:
    member_id: str
    member_epoch: int = 0
    subscribed_topic_names: tuple[str, ...] = ()
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    assigned: Assignment = field(default_factory=dict)
    session_task: ScheduledTask | None = None


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    # the SimpleAssignor's last target, the epoch it was computed at and the subscribed
    # topics' metadata it was computed from (a change bumps the group epoch)
    target: dict[str, Assignment] = field(default_factory=dict)
    assignment_epoch: int = -1
    subscription_metadata: dict[str, TopicMetadata] = field(default_factory=dict)

    def state(self) -> str:
        return "Stable" if self.members else "Empty"


@dataclass
class ShareSession:
    next_epoch: int
    partitions: set[Slot] = field(default_factory=set)
    # the member left its group: only the final ShareFetch/ShareAcknowledge (epoch -1),
    # which the client sends alongside its leave, may still use the session
    closing: ScheduledTask | None = None


@dataclass(frozen=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    subscribed_topic_names: tuple[str, ...] | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class ShareHeartbeatResult:
    error: ErrorCode
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None
    message: str | None = None


class ShareGroupCoordinator:
    def __init__(self, config: GroupConfig, *, clock: Clock, scheduler: Scheduler,
                 group_error: Callable[[str], ErrorCode],
                 other_kind: Callable[[str], bool]) -> None:
        self.config = config
        self.clock = clock
        self.scheduler = scheduler
        # the share-partition leader's persistence, and the share coordinator of the
        # __share_group_state partitions led here (both wired at broker start)
        self.durable = DurableShareState()
        self.durable.on_fenced = self._drop
        self.state_coordinator: ShareStateCoordinator | None = None
        self.topic_ids: dict[tuple[str, TopicPartition], uuid.UUID] = {}
        self.group_error = group_error
        self.other_kind = other_kind  # the id names a classic or consumer group
        self.topics: TopicSource = dict
        self.settings = GroupConfigStore(config)  # per-group overrides, shared by the owner
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[tuple[str, TopicPartition], SharePartition] = {}
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loads: dict[PartitionKey, asyncio.Task[ErrorCode]] = {}

    # ------------------------------------------------------------------ membership

    def heartbeat(self, req: ShareHeartbeat) -> ShareHeartbeatResult:
        err = ErrorCode.INVALID_REQUEST if not req.group_id or not req.member_id else \
            self.group_error(req.group_id)
        if err == ErrorCode.NONE and self.other_kind(req.group_id):
            return ShareHeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND,
                                        message=f"Group {req.group_id} is not a share group.")
        if err != ErrorCode.NONE:
            return ShareHeartbeatResult(err)
        group = self.groups.get(req.group_id)
        if req.member_epoch == FINAL_EPOCH:
            if group is None or req.member_id not in group.members:
                return ShareHeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
            self._remove(group, group.members[req.member_id], "left the group", leaving=True)
            return ShareHeartbeatResult(ErrorCode.NONE, req.member_id, FINAL_EPOCH)
        if req.member_epoch == 0 and not req.subscribed_topic_names:
            return ShareHeartbeatResult(ErrorCode.INVALID_REQUEST,
                                        message="SubscribedTopicNames must be set in first "
                                                "request.")
        member = group.members.get(req.member_id) if group is not None else None
        if member is None and req.member_epoch != 0:
            return ShareHeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if member is not None and req.member_epoch not in (0, member.member_epoch):
            return ShareHeartbeatResult(ErrorCode.FENCED_MEMBER_EPOCH)
        if group is None:
            group = self.groups[req.group_id] = ShareGroup(req.group_id)
        return self._update(group, member, req)

    def _update(self, group: ShareGroup, member: ShareMember | None,
                req: ShareHeartbeat) -> ShareHeartbeatResult:
        bump = member is None
        if member is None:
            member = group.members[req.member_id] = ShareMember(req.member_id)
        if (req.subscribed_topic_names is not None
                and tuple(req.subscribed_topic_names) != member.subscribed_topic_names):
            member.subscribed_topic_names = tuple(req.subscribed_topic_names)
            bump = True
        topics = self.topics()
        metadata = {n: topics[n] for m in group.members.values()
                    for n in m.subscribed_topic_names if n in topics}
        if bump or metadata != group.subscription_metadata:
            group.group_epoch += 1
            group.subscription_metadata = metadata
        if group.group_epoch > group.assignment_epoch:
            group.target = assign({m.member_id: m.subscribed_topic_names
                                   for m in group.members.values()}, topics, group.target)
            group.assignment_epoch = group.group_epoch
            log.info("share group %s: epoch %d, assignment %s", group.group_id,
                     group.group_epoch, {m: {str(t): sorted(ps) for t, ps in a.items()}
                                         for m, a in group.target.items()})
        member.client_id, member.client_host = req.client_id, req.client_host
        member.rack_id = req.rack_id or member.rack_id
        target = group.target.get(member.member_id, {})
        changed = target != member.assigned or member.member_epoch != group.group_epoch
        member.assigned, member.member_epoch = target, group.group_epoch
        self._schedule_session(group.group_id, member)
        return ShareHeartbeatResult(
            ErrorCode.NONE, member.member_id, member.member_epoch,
            self.settings.number(group.group_id, "share.heartbeat.interval.ms"),
            dict(target) if changed or req.member_epoch == 0 else None)

    def _schedule_session(self, group_id: str, member: ShareMember) -> None:
        if member.session_task is not None:
            member.session_task.cancel()

        def expire() -> None:
            group = self.groups.get(group_id)
            if group is not None and group.members.get(member.member_id) is member:
                self._remove(group, member, "session timeout")

        member.session_task = self.scheduler.schedule(
            f"share-session-{group_id}-{member.member_id}", expire,
            self.settings.number(group_id, "share.session.timeout.ms"))

    def _remove(self, group: ShareGroup, member: ShareMember, why: str,
                leaving: bool = False) -> None:
        """A member goes; the others get a new assignment on their next heartbeat. What it
        holds is released with its share session: a leaving member's client closes that
        session itself right after (its final acknowledgements must not find the records
        already offered again), so it is closed here only if that does not come within a
        heartbeat interval."""
        log.info("share group %s: member %s removed: %s", group.group_id, member.member_id, why)
        if member.session_task is not None:
            member.session_task.cancel()
        del group.members[member.member_id]
        group.group_epoch += 1
        session = self.sessions.get((group.group_id, member.member_id))
        if not leaving or session is None:
            self.close_session(group.group_id, member.member_id)
        elif session.closing is None:
            gid, mid = group.group_id, member.member_id

            def close() -> None:
                if self.sessions.get((gid, mid)) is session:
                    self.close_session(gid, mid)

            session.closing = self.scheduler.schedule(
                f"share-leave-{gid}-{mid}", close,
                self.settings.number(gid, "share.heartbeat.interval.ms"))

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups: only a share group without members; its share-partitions go too."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        for key in [k for k in self.partitions if k[0] == group_id]:
            del self.partitions[key]
        return ErrorCode.NONE

    def shutdown(self) -> None:
        for task in list(self._loads.values()):
            task.cancel()
        for group in self.groups.values():
            for member in group.members.values():
                if member.session_task is not None:
                    member.session_task.cancel()

    # ------------------------------------------------------------------ sessions

    def session(self, group_id: str, member_id: str, epoch: int) -> tuple[ErrorCode,
                                                                         ShareSession | None]:
        """Open (epoch 0), continue (the session's next epoch) or, for -1, look up the
        session to close once its acknowledgements are applied."""
        err = self.group_error(group_id)
        if err in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            # the share-partition leader of a group coordinated elsewhere knows no members
            if not member_id:
                return ErrorCode.INVALID_REQUEST, None
        elif err != ErrorCode.NONE:
            return err, None
        else:
            group = self.groups.get(group_id)
            left = self.sessions.get((group_id, member_id))
            # a member that has just left keeps its session for a heartbeat interval: its
            # last acknowledgements (a commit_async, the close's final epoch) may arrive
            # after the leave on another connection, and count, as Kafka checks only the
            # share session (SharePartitionManager.acknowledgeSessionUpdate)
            after_leave = epoch != 0 and left is not None and left.closing is not None
            if not after_leave and (group is None or member_id not in group.members):
                return ErrorCode.UNKNOWN_MEMBER_ID, None
        key = (group_id, member_id)
        if epoch == 0:
            if key in self.sessions:
                self.close_session(group_id, member_id)
            self.sessions[key] = ShareSession(1)
            return ErrorCode.NONE, self.sessions[key]
        found = self.sessions.get(key)
        if found is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch == FINAL_EPOCH:
            return ErrorCode.NONE, found
        if epoch != found.next_epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        found.next_epoch += 1
        return ErrorCode.NONE, found

    def close_session(self, group_id: str, member_id: str, by_client: bool = False) -> None:
        """The share session ends and what the member holds is offered again; closed by the
        client (the final ShareFetch/ShareAcknowledge) without counting a delivery."""
        session = self.sessions.pop((group_id, member_id), None)
        if session is not None and session.closing is not None:
            session.closing.cancel()
        for (gid, tp), sp in list(self.partitions.items()):
            if gid == group_id and sp.release_member(member_id, delivered=not by_client):
                self.persist(gid, tp)

    # ------------------------------------------------------------------ share-partitions

    def share_partition(self, group_id: str, tp: TopicPartition, start: int,
                        topic_id: uuid.UUID | None = None,
                        stored: ShareState | None = None) -> SharePartition:
        """The group's share-partition: in memory, else created from its stored state or at
        ``start`` (share.auto.offset.reset latest: the high watermark when the group first
        fetches)."""
        key = (group_id, tp)
        self._forget_if_recreated(key, topic_id)
        sp = self.partitions.get(key)
        if sp is None:
            c = self.config
            sp = self.partitions[key] = SharePartition(
                start, scheduler=self.scheduler,
                lock_ms=self.settings.number(group_id, "share.record.lock.duration.ms"),
                delivery_limit=c.group_share_delivery_count_limit,
                max_locks=self.settings.number(group_id, "share.partition.max.record.locks"))
            if stored is not None and stored.start_offset != UNINITIALIZED_START_OFFSET:
                sp.restore(stored.start_offset, stored.batches)
        if topic_id is not None:
            self.topic_ids[key] = topic_id
        return sp

    def begin_load(self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID, start: int,
                   leader_epoch: int, earliest: int | None = None
                   ) -> asyncio.Task[ErrorCode] | None:
        """None when the share-partition is in memory, else its ``load_partition`` running
        as a task of its own (one per share-partition at a time): Kafka's SharePartition
        initialises asynchronously and a ShareFetch waits for it no longer than its max wait.
        A load that ended without loading is handed out once more, done, for its error to be
        answered; the next call reads again."""
        key = (group_id, tp)
        self._forget_if_recreated(key, topic_id)
        if key in self.partitions or self.durable.persister is None:
            self._loads.pop(key, None)
            self.share_partition(group_id, tp, self._start(group_id, start, earliest), topic_id)
            return None
        task = self._loads.get(key)
        if task is not None and task.done():
            del self._loads[key]
            return task
        if task is None:
            task = self._loads[key] = asyncio.get_running_loop().create_task(
                self.load_partition(group_id, tp, topic_id, start, leader_epoch, earliest))
        return task

    def _start(self, group_id: str, latest: int, earliest: int | None) -> int:
        """Where a new share-partition starts: ``earliest`` under share.auto.offset.reset
        earliest (when the caller knows it), else ``latest``."""
        if earliest is not None and \
                self.settings.get(group_id, "share.auto.offset.reset") == "earliest":
            return earliest
        return latest

    def load_answered(self, group_id: str, tp: TopicPartition,
                      task: asyncio.Task[ErrorCode]) -> None:
        """A fetch answered the end of ``task``: the next ``begin_load`` starts anew."""
        if self._loads.get((group_id, tp)) is task:
            del self._loads[(group_id, tp)]

    async def load_partition(self, group_id: str, tp: TopicPartition, topic_id: uuid.UUID,
                             start: int, leader_epoch: int, earliest: int | None = None
                             ) -> ErrorCode:
        """Kafka's SharePartition.maybeInitialize: on first use the leader reads the
        share-partition's state from its share coordinator (fencing older leaders); with
        none stored it starts at ``start`` (``earliest`` under share.auto.offset.reset
        earliest, the group's config as stored now: one just set through another broker
        counts) and writes that down."""
        key = (group_id, tp)
        self._forget_if_recreated(key, topic_id)
        if key in self.partitions or self.durable.persister is None:
            self.share_partition(group_id, tp, self._start(group_id, start, earliest), topic_id)
            return ErrorCode.NONE
        r = await self.durable.read(key, (group_id, topic_id, tp.partition), leader_epoch)
        if key in self.partitions:  # another fetch loaded it meanwhile
            return ErrorCode.NONE
        if r.error != ErrorCode.NONE:
            return persister_error(r.error)
        if r.state is None:
            return ErrorCode.UNKNOWN_SERVER_ERROR
        if r.state.start_offset == UNINITIALIZED_START_OFFSET and earliest is not None:
            await self.settings.reread(group_id)
            if key in self.partitions:
                return ErrorCode.NONE
            start = self._start(group_id, start, earliest)
        self.share_partition(group_id, tp, start, topic_id, r.state)
        if r.state.start_offset == UNINITIALIZED_START_OFFSET:
            self.persist(group_id, tp)
        return ErrorCode.NONE

    def _forget_if_recreated(self, key: PartitionKey, topic_id: uuid.UUID | None) -> None:
        """Kafka keys share-partition state by topic id: a topic deleted and created again
        under its name is another share-partition (its state is read, or starts, anew)."""
        known = self.topic_ids.get(key)
        if topic_id is not None and known is not None and known != topic_id:
            self._drop(key)
            del self.topic_ids[key]
        if topic_id is not None and key not in self.partitions:
            self.topic_ids[key] = topic_id  # a load under way is this topic's

    def on_topics_deleted(self, topics: set[str]) -> list[tuple[str, uuid.UUID, int]]:
        """The share-partitions of deleted topics go, in memory here; returns the keys of
        their stored state, for the caller to delete (Kafka deletes share-group state with
        its topic)."""
        gone = [k for k in {*self.partitions, *self.topic_ids} if k[1].topic in topics]
        keys = []
        for key in gone:
            self._drop(key)
            topic_id = self.topic_ids.pop(key, None)
            if topic_id is not None:
                keys.append((key[0], topic_id, key[1].partition))
        return keys

    def forget_topics(self, topics: set[str]) -> None:
        """``on_topics_deleted``, and their stored state deleted in the background (the
        DeleteTopics answer does not wait for the share coordinators)."""
        keys = self.on_topics_deleted(topics)
        persister = self.durable.persister
        if not keys or persister is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop (sans-I/O use): nothing stored to delete

        async def delete_all() -> None:
            for key in keys:
                err = await persister.delete(key)
                if err != ErrorCode.NONE:
                    log.warning("share state of %s not deleted with its topic: %s", key,
                                err.name)

        task = loop.create_task(delete_all())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def drop_partitions(self, tps: set[TopicPartition]) -> int:
        """The data partitions are no longer led here: their share-partitions go (what they
        hold is read back from the share coordinator by the next leader)."""
        gone = [k for k in self.partitions if k[1] in tps]
        for key in gone:
            self._drop(key)
        return len(gone)

    def _drop(self, key: PartitionKey) -> None:
        load = self._loads.pop(key, None)
        if load is not None:  # what it reads is stale now
            load.cancel()
        sp = self.partitions.pop(key, None)
        if sp is not None:
            for rec in sp.records.values():
                rec.unlock()
        self.durable.forget(key)

    # ------------------------------------------------------------------ durable state

    async def alter_start(self, group_id: str, topic_id: uuid.UUID, partition: int,
                          start: int) -> ErrorCode:
        """AlterShareGroupOffsets: the share-partition starts over at ``start`` under a new
        state epoch (a leader holding the old state is fenced and reads it again)."""
        assert self.durable.persister is not None
        skey = (group_id, topic_id, partition)
        r = await self.durable.persister.summary(skey)
        if r.error != ErrorCode.NONE or r.state is None:
            return r.error
        self._drop_state_key(group_id, topic_id, partition)
        return await self.durable.persister.initialize(skey, r.state.state_epoch + 1, start)

    async def forget(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode:
        """DeleteShareGroupOffsets: the share-partition's state goes (a tombstone)."""
        assert self.durable.persister is not None
        self._drop_state_key(group_id, topic_id, partition)
        return await self.durable.persister.delete((group_id, topic_id, partition))

    def _drop_state_key(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        for key, tid in list(self.topic_ids.items()):
            if key[0] == group_id and tid == topic_id and key[1].partition == partition:
                self._drop(key)

    def empty_group_error(self, group_id: str) -> ErrorCode:
        """The offsets admin APIs need a share group (made if unknown) with no members."""
        err = self.group_error(group_id)
        if err != ErrorCode.NONE:
            return err
        if self.other_kind(group_id):
            return ErrorCode.GROUP_ID_NOT_FOUND
        group = self.groups.setdefault(group_id, ShareGroup(group_id))
        return ErrorCode.NON_EMPTY_GROUP if group.members else ErrorCode.NONE

    def persist(self, group_id: str, tp: TopicPartition) -> None:
        """Write the share-partition's state to its share coordinator (soon; ``flush``
        awaits it)."""
        key = (group_id, tp)
        sp = self.partitions.get(key)
        topic_id = self.topic_ids.get(key)
        if sp is None or topic_id is None:
            return
        self.durable.schedule(key, (group_id, topic_id, tp.partition),
                              lambda: (sp.start_offset, tuple(sp.snapshot())))

    def acknowledge(self, group_id: str, member_id: str, tp: TopicPartition,
                    batches: list[tuple[int, int, list[int]]]) -> ErrorCode:
        sp = self.partitions.get((group_id, tp))
        if sp is None:
            return ErrorCode.INVALID_RECORD_STATE
        err = ErrorCode.NONE
        for first, last, types in batches:
            err = sp.acknowledge(member_id, first, last, types)
            if err != ErrorCode.NONE:
                break
        self.persist(group_id, tp)
        return err

    def acquire(self, group_id: str, member_id: str, tp: TopicPartition, offsets: list[int],
                max_records: int) -> list[AcquiredRange]:
        return self.share_partition(group_id, tp, offsets[0] if offsets else 0).acquire(
            member_id, offsets, max_records)
