"""Incremental fetch sessions (KIP-227, Kafka's FetchSession / FetchSessionCache).

A consumer that opens a session (epoch 0) gets a session id; its later requests carry only
the partitions whose fetch position changed (and the ones to forget), and the responses
carry only the partitions with something new: records, an error, or a changed high
watermark / last stable offset / log start offset. Epoch -1 is a sessionless full fetch.
A full cache declines new sessions by answering session id 0 (the client then sends full
fetches), as Kafka does.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tidelog.protocol.errors import ErrorCode
from tidelog.util.topic_partition import TopicPartition

FINAL_EPOCH = -1
INITIAL_EPOCH = 0


@dataclass(slots=True)
class CachedPartition:
    fetch_offset: int
    max_bytes: int
    high_watermark: int = -1  # the values last sent to the client
    last_stable_offset: int = -1
    log_start_offset: int = -1

    def changed(self, hw: int, lso: int, start: int) -> bool:
        return (hw, lso, start) != (
            self.high_watermark,
            self.last_stable_offset,
            self.log_start_offset,
        )


@dataclass(slots=True)
class FetchSession:
    id: int
    epoch: int  # the epoch the next request must carry
    partitions: dict[TopicPartition, CachedPartition] = field(default_factory=dict)
    last_used: int = 0


@dataclass(slots=True)
class FetchPlan:
    """What one Fetch request reads, and how the response is shaped."""

    partitions: list[tuple[TopicPartition, CachedPartition]]
    session: FetchSession | None = None
    incremental: bool = False
    error: ErrorCode = ErrorCode.NONE

    @property
    def response_session_id(self) -> int:
        return self.session.id if self.session is not None else 0


class FetchSessionCache:
    def __init__(self, max_slots: int = 1000) -> None:
        self.max_slots = max_slots
        self.sessions: dict[int, FetchSession] = {}
        self._clock = itertools.count(1)

    def __len__(self) -> int:
        return len(self.sessions)

    def _new_id(self) -> int:
        while True:
            sid = random.randint(1, 2**31 - 1)
            if sid not in self.sessions:
                return sid

    def create(self, partitions: dict[TopicPartition, CachedPartition]) -> FetchSession | None:
        if len(self.sessions) >= self.max_slots:
            # evict the least recently used session, else decline (session id 0)
            if not self.sessions:
                return None
            oldest = min(self.sessions.values(), key=lambda s: s.last_used)
            del self.sessions[oldest.id]
        session = FetchSession(self._new_id(), INITIAL_EPOCH + 1, partitions, next(self._clock))
        self.sessions[session.id] = session
        return session

    def plan(self, request: Any) -> FetchPlan:
        sid = int(getattr(request, "session_id", 0))
        epoch = int(getattr(request, "session_epoch", FINAL_EPOCH))
        wanted = _requested(request)
        if epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if sid:
                self.sessions.pop(sid, None)
            session = self.create(dict(wanted)) if epoch == INITIAL_EPOCH and wanted else None
            return FetchPlan(list(wanted.items()), session)
        session = self.sessions.get(sid)
        if session is None:
            return FetchPlan([], error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchPlan([], error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        session.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
        session.last_used = next(self._clock)
        for tp, cp in wanted.items():
            current = session.partitions.get(tp)
            if current is None:
                session.partitions[tp] = cp
            else:
                current.fetch_offset, current.max_bytes = cp.fetch_offset, cp.max_bytes
        for tp in _forgotten(request):
            session.partitions.pop(tp, None)
        return FetchPlan(list(session.partitions.items()), session, incremental=True)


def _requested(request: Any) -> dict[TopicPartition, CachedPartition]:
    return {
        TopicPartition(t.topic, p.partition): CachedPartition(p.fetch_offset, p.partition_max_bytes)
        for t in request.topics
        for p in t.partitions
    }


def _forgotten(request: Any) -> Iterable[TopicPartition]:
    for t in getattr(request, "forgotten_topics_data", ()) or ():
        for p in t.partitions:
            yield TopicPartition(t.topic, int(p))


def rotate_to_end(session: FetchSession, served: Iterable[TopicPartition]) -> None:
    """Partitions that returned data go to the back of the session's order, so a busy
    partition cannot starve the others of the response's byte budget (Kafka does this)."""
    for tp in served:
        cp = session.partitions.pop(tp, None)
        if cp is not None:
            session.partitions[tp] = cp
