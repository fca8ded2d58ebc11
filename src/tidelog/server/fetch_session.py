"""Incremental fetch sessions (KIP-227, Kafka's FetchSession / FetchSessionCache).

A consumer that opens a session (epoch 0) gets a session id; its later requests carry only
the partitions whose fetch position changed (and the ones to forget), and the responses
carry only the partitions with something new: records, an error, or a changed high
watermark / last stable offset / log start offset. Epoch -1 is a sessionless full fetch.
A full cache makes room as Kafka's FetchSessionCache.tryEvict does, else declines the new
session by answering session id 0 (the client then sends full fetches): a session unused
for ``eviction_ms`` (Kafka's 120 s) goes first; otherwise a session older than that which is
smaller than the new one (fewer partitions) gives way, and a follower's session (privileged)
is taken only by another follower's. A consumer's session younger than ``eviction_ms`` may
be taken by a follower's at once. An incremental request that forgets the session's last
partition closes it (session id 0 in the answer).

Followers use sessions as consumers do; their requests also carry the log start offset and
last fetched epoch each partition keeps in the session. ``stats`` counts, for followers and
consumers apart, the requests and the partitions they named and were answered.

From v13 (KIP-516) requests name topics by id. Each partition is keyed by a
:class:`FetchKey` holding the id and the name it resolved to when it entered the session
("" when the id is unknown here: the partition is answered UNKNOWN_TOPIC_ID). A session
opened by id must keep using ids and the other way round (FETCH_SESSION_TOPIC_ID_ERROR).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tidelog.protocol.errors import ErrorCode
from tidelog.util.clock import Clock, SystemClock
from tidelog.util.topic_partition import TopicPartition

FINAL_EPOCH = -1
INITIAL_EPOCH = 0
ZERO_UUID = uuid.UUID(int=0)
TOPIC_ID_VERSION = 13
# Kafka's KafkaServer.MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000
# topic id -> its name here, or None
Resolver = Callable[[uuid.UUID], str | None]


class FetchKey(NamedTuple):
    """One partition of a fetch: by name (v4-v12, topic_id zero) or by id (v13+, topic ""
    when the id is unknown)."""

    topic_id: uuid.UUID
    topic: str
    partition: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def unknown_id(self) -> bool:
        return not self.topic


@dataclass(slots=True)
class CachedPartition:
    fetch_offset: int
    max_bytes: int
    high_watermark: int = -1  # the values last sent to the client
    last_stable_offset: int = -1
    log_start_offset: int = -1
    current_leader_epoch: int = -1  # as the request says (-1: not checked)
    fetcher_log_start_offset: int = -1  # a follower's own log start offset
    last_fetched_epoch: int = -1  # a follower's (v12+): the leader checks its log agrees

    def changed(self, hw: int, lso: int, start: int) -> bool:
        return (hw, lso, start) != (
            self.high_watermark,
            self.last_stable_offset,
            self.log_start_offset,
        )

    def update_request_params(self, request: CachedPartition) -> None:
        """Kafka's CachedPartition.updateRequestParams: what an incremental request says."""
        self.fetch_offset, self.max_bytes = request.fetch_offset, request.max_bytes
        self.current_leader_epoch = request.current_leader_epoch
        self.fetcher_log_start_offset = request.fetcher_log_start_offset
        self.last_fetched_epoch = request.last_fetched_epoch


@dataclass(slots=True)
class FetchSession:
    id: int
    epoch: int  # the epoch the next request must carry
    partitions: dict[FetchKey, CachedPartition] = field(default_factory=dict)
    last_used_ms: int = 0
    uses_topic_ids: bool = False
    privileged: bool = False  # a follower's
    creation_ms: int = 0

    def evictable_key(self) -> tuple[bool, int, int]:
        """Kafka's EvictableKey: the smallest goes first (consumers', then fewer partitions)."""
        return (self.privileged, len(self.partitions), self.id)


@dataclass(slots=True)
class FetchCounts:
    """Fetch requests of one kind (followers' or consumers') and their partitions."""

    requests: int = 0
    partitions_requested: int = 0  # named in the request's topics
    partitions_answered: int = 0  # in the response


@dataclass(slots=True)
class FetchSessionStats:
    evictions: int = 0  # Kafka's IncrementalFetchSessionEvictionsPerSec (a total)
    follower: FetchCounts = field(default_factory=FetchCounts)
    consumer: FetchCounts = field(default_factory=FetchCounts)

    def counts(self, follower: bool) -> FetchCounts:
        return self.follower if follower else self.consumer


@dataclass(slots=True)
class FetchPlan:
    """What one Fetch request reads, and how the response is shaped."""

    partitions: list[tuple[FetchKey, CachedPartition]]
    session: FetchSession | None = None
    incremental: bool = False
    error: ErrorCode = ErrorCode.NONE
    by_id: bool = False  # v13+: topics named by id

    @property
    def response_session_id(self) -> int:
        return self.session.id if self.session is not None else 0


class FetchSessionCache:
    """Kafka's FetchSessionCache and FetchManager.newContext (see the module docstring)."""

    def __init__(
        self,
        max_slots: int = 1000,
        clock: Clock | None = None,
        eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
    ) -> None:
        self.max_slots = max_slots
        self.sessions: dict[int, FetchSession] = {}
        self.clock: Clock = clock or SystemClock()
        self.eviction_ms = eviction_ms
        self.stats = FetchSessionStats()

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def total_partitions(self) -> int:
        """Kafka's NumIncrementalFetchPartitionsCached."""
        return sum(len(s.partitions) for s in self.sessions.values())

    def _new_id(self) -> int:
        while True:
            sid = random.randint(1, 2**31 - 1)
            if sid not in self.sessions:
                return sid

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def create(
        self,
        partitions: dict[FetchKey, CachedPartition],
        uses_topic_ids: bool = False,
        privileged: bool = False,
    ) -> FetchSession | None:
        """Kafka's maybeCreateSession: None when the cache has no room for it."""
        now = self.clock.milliseconds()
        if len(self.sessions) >= self.max_slots and not self._try_evict(
            privileged, (privileged, len(partitions), 0), now
        ):
            return None
        session = FetchSession(
            self._new_id(), INITIAL_EPOCH + 1, partitions, now, uses_topic_ids, privileged, now
        )
        self.sessions[session.id] = session
        return session

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now: int) -> bool:
        """Kafka's tryEvict: the least recently used session if stale, else the smallest
        session this one may take (``evictableByPrivileged`` / ``evictableByAll``)."""
        if not self.sessions:
            return False
        oldest = min(self.sessions.values(), key=lambda s: s.last_used_ms)
        if now - oldest.last_used_ms > self.eviction_ms:
            return self._evict(oldest)
        candidates = [
            s
            for s in self.sessions.values()
            if now - s.creation_ms > self.eviction_ms or (privileged and not s.privileged)
        ]
        if not candidates:
            return False
        first = min(candidates, key=FetchSession.evictable_key)
        return key >= first.evictable_key() and self._evict(first)

    def _evict(self, session: FetchSession) -> bool:
        del self.sessions[session.id]
        self.stats.evictions += 1
        return True

    def plan(
        self,
        request: Any,
        version: int = 12,
        resolve: Resolver | None = None,
        privileged: bool = False,
    ) -> FetchPlan:
        """``resolve`` maps topic ids to names for v13+ requests; ``privileged``: a
        follower's request."""
        sid = int(getattr(request, "session_id", 0))
        epoch = int(getattr(request, "session_epoch", FINAL_EPOCH))
        ids = version >= TOPIC_ID_VERSION
        names = _Names(resolve if ids else None)
        wanted = _requested(request, names)
        counts = self.stats.counts(privileged)
        counts.requests += 1
        counts.partitions_requested += len(wanted)
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if sid:
                self.sessions.pop(sid, None)
            session = (
                self.create(dict(wanted), ids, privileged)
                if epoch == INITIAL_EPOCH and wanted
                else None
            )
            return FetchPlan(list(wanted.items()), session, by_id=ids)
        session = self.sessions.get(sid)
        if session is None:
            return FetchPlan([], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchPlan([], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != ids:
            return FetchPlan([], error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        if ids:
            _resolve_unknown_names(session, names)
        _update(session, wanted, _forgotten(request, names))
        if not session.partitions:  # nothing left: closed, answered without a session
            del self.sessions[session.id]
            return FetchPlan(list(wanted.items()), by_id=ids)
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        session.last_used_ms = self.clock.milliseconds()
        return FetchPlan(list(session.partitions.items()), session, incremental=True, by_id=ids)

    def record_request(self, privileged: bool, partitions: int) -> None:
        """A request that took no part in sessions (``plan`` counts the others)."""
        counts = self.stats.counts(privileged)
        counts.requests += 1
        counts.partitions_requested += partitions

    def record_answer(self, privileged: bool, partitions: int) -> None:
        self.stats.counts(privileged).partitions_answered += partitions


def _resolve_unknown_names(session: FetchSession, names: _Names) -> None:
    """Kafka's CachedPartition.maybeResolveUnknownName: a topic id unknown when it entered
    the session (the metadata had not reached this broker yet) is named once it is known,
    instead of answering UNKNOWN_TOPIC_ID for as long as the session lives."""
    if not any(key.unknown_id for key in session.partitions):
        return
    resolved: dict[FetchKey, CachedPartition] = {}
    for key, cp in session.partitions.items():
        name = names.name(key.topic_id) if key.unknown_id else key.topic
        resolved[FetchKey(key.topic_id, name, key.partition) if name else key] = cp
    session.partitions = resolved


def _update(
    session: FetchSession, wanted: dict[FetchKey, CachedPartition], forgotten: Iterable[FetchKey]
) -> None:
    """Kafka's FetchSession.update: add or update what the request names, then forget."""
    for key, cp in wanted.items():
        current = session.partitions.get(key)
        if current is None:
            session.partitions[key] = cp
        else:
            current.update_request_params(cp)
    for key in forgotten:
        if session.partitions.pop(key, None) is None and key.topic_id != ZERO_UUID:
            # the id resolved differently when it entered the session (topic deleted
            # or created since): forget it by id alone
            for stale in [k for k in session.partitions if k[::2] == key[::2]]:
                del session.partitions[stale]


class _Names:
    """Topic id or name of one request entry -> (id, name), resolving each id once."""

    def __init__(self, resolve: Resolver | None) -> None:
        self._resolve = resolve
        self._cache: dict[uuid.UUID, str] = {}

    def key(self, topic_entry: Any, partition: int) -> FetchKey:
        return FetchKey(*self.topic(topic_entry), partition)

    def topic(self, topic_entry: Any) -> tuple[uuid.UUID, str]:
        """(id, name) of a request's topic entry (by name before v13: the zero id)."""
        if self._resolve is None:
            return ZERO_UUID, topic_entry.topic
        tid = topic_entry.topic_id or ZERO_UUID
        return tid, self.name(tid)

    def name(self, tid: uuid.UUID) -> str:
        """The topic's name here, "" when the id is unknown (or by-name requests)."""
        if self._resolve is None or tid == ZERO_UUID:
            return ""
        name = self._cache.get(tid)
        if name is None:
            name = self._cache[tid] = self._resolve(tid) or ""
        return name


def _requested(request: Any, names: _Names) -> dict[FetchKey, CachedPartition]:
    """The request's partitions (a consumer's sessionless Fetch names every one it reads,
    each time: the topic is resolved once, and each entry costs two small objects)."""
    out: dict[FetchKey, CachedPartition] = {}
    new_key = tuple.__new__
    for t in request.topics:
        parts = t.partitions
        if not parts:
            continue
        tid, name = names.topic(t)
        # the fields a version has, asked of its first partition (they share one class)
        first = parts[0]
        epochs = hasattr(first, "current_leader_epoch")  # v9+
        starts = hasattr(first, "log_start_offset")  # v5+
        fetched = hasattr(first, "last_fetched_epoch")  # v12+
        for p in parts:
            out[new_key(FetchKey, (tid, name, p.partition))] = CachedPartition(
                p.fetch_offset, p.partition_max_bytes, -1, -1, -1,
                p.current_leader_epoch if epochs else -1,
                p.log_start_offset if starts else -1,
                p.last_fetched_epoch if fetched else -1)
    return out


def _forgotten(request: Any, names: _Names) -> Iterable[FetchKey]:
    for t in getattr(request, "forgotten_topics_data", ()) or ():
        for p in t.partitions:
            yield names.key(t, int(p))


def rotate_to_end(session: FetchSession, served: Iterable[FetchKey]) -> None:
    """Partitions that returned data go to the back of the session's order, so a busy
    partition cannot starve the others of the response's byte budget (Kafka does this)."""
    for key in served:
        cp = session.partitions.pop(key, None)
        if cp is not None:
            session.partitions[key] = cp
