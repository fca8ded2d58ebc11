"""FetchSessionHandler (the follower's side of KIP-227) as Kafka's FetchSessionHandlerTest
drives it: the first build is full, later ones send what was added or altered and forget what
was dropped; the session id and epoch move with the leader's answers and fall back to a full
fetch on errors, a closed session, or an answer naming partitions outside the session; and
FetchSessionCache's eviction rules (Kafka's tryEvict) with an injected clock, and its naming
of a topic id that was unknown when the session opened."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.protocol.codec import request_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.fetch_session import CachedPartition, FetchKey, FetchSessionCache
from tidelog.server.replication.fetch_session_handler import (
    FINAL_EPOCH,
    INITIAL,
    FetchMetadata,
    FetchSessionHandler,
    next_epoch,
)
from tidelog.server.replication.leader_endpoint import FetchPartition
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition

FOO = uuid.uuid4()
BAR = uuid.uuid4()
T0, T1, B0 = TopicPartition("foo", 0), TopicPartition("foo", 1), TopicPartition("bar", 0)


def data(offset: int, topic_id: uuid.UUID | None = FOO) -> FetchPartition:
    return FetchPartition(topic_id, offset, 0, 1000, 3, 2)


def handler() -> FetchSessionHandler[FetchPartition]:
    return FetchSessionHandler[FetchPartition](1)


def test_first_build_is_full_then_only_changes_are_sent() -> None:
    h = handler()
    full = h.build({T0: data(0), T1: data(10), B0: data(5, BAR)})
    assert full.metadata == INITIAL and list(full.to_send) == [T0, T1, B0]
    assert full.can_use_topic_ids
    assert h.handle_response(ErrorCode.NONE, 123, [T0, T1, B0])
    assert h.next_metadata == FetchMetadata(123, 1)

    idle = h.build({T0: data(0), T1: data(10), B0: data(5, BAR)})
    assert idle.metadata == FetchMetadata(123, 1)
    assert idle.to_send == {} and idle.to_forget == [] and len(idle.session_partitions) == 3
    assert h.handle_response(ErrorCode.NONE, 123, [])
    assert h.next_metadata == FetchMetadata(123, 2)

    changed = h.build({T0: data(0), T1: data(12), TopicPartition("bar", 1): data(0, BAR)})
    assert list(changed.to_send) == [TopicPartition("bar", 1), T1]  # altered go last
    assert changed.to_forget == [(BAR, B0)]
    assert set(changed.session_partitions) == {T0, T1, TopicPartition("bar", 1)}
    assert h.handle_response(ErrorCode.NONE, 123, [T1])


def test_a_recreated_topic_is_replaced() -> None:
    h = handler()
    h.build({T0: data(0)})
    assert h.handle_response(ErrorCode.NONE, 7, [T0])
    new_id = uuid.uuid4()
    req = h.build({T0: data(0, new_id)})
    assert req.to_replace == [(FOO, T0)] and req.to_send == {T0: data(0, new_id)}


def test_errors_and_bad_answers_make_the_next_fetch_full() -> None:
    h = handler()
    h.build({T0: data(0)})
    assert h.handle_response(ErrorCode.NONE, 9, [T0])
    h.build({T0: data(1)})
    assert not h.handle_response(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    assert h.next_metadata == FetchMetadata(9, 0)  # close 9, open a new one
    assert h.build({T0: data(1)}).metadata.epoch == 0
    assert h.handle_response(ErrorCode.NONE, 10, [T0])
    h.build({T0: data(1)})
    assert not h.handle_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])
    assert h.next_metadata == INITIAL
    h.build({T0: data(1)})
    assert not h.handle_response(ErrorCode.NONE, 11, [])  # a full answer omitting T0
    assert h.next_metadata == INITIAL
    h.build({T0: data(1)})
    assert h.handle_response(ErrorCode.NONE, 12, [T0])
    h.build({T0: data(1)})
    assert not h.handle_response(ErrorCode.NONE, 12, [B0])  # outside the session
    assert h.next_metadata == FetchMetadata(12, 0)
    h.build({T0: data(1)})
    assert h.handle_response(ErrorCode.NONE, 13, [T0])
    h.handle_error(OSError("connection lost"))
    assert h.next_metadata == FetchMetadata(13, 0)


def test_a_closed_or_declined_session_stays_full() -> None:
    h = handler()
    h.build({T0: data(0)})
    assert h.handle_response(ErrorCode.NONE, 0, [T0])  # declined: no session
    assert h.next_metadata == INITIAL
    h.build({T0: data(0)})
    assert h.handle_response(ErrorCode.NONE, 4, [T0])
    h.build({T0: data(0)})
    assert h.handle_response(ErrorCode.NONE, 0, [])  # the leader closed it
    assert h.next_metadata == INITIAL


def test_without_topic_ids_and_disabled() -> None:
    h = handler()
    assert not h.build({T0: data(0, None)}).can_use_topic_ids
    off = FetchSessionHandler[FetchPartition](1, enabled=False)
    for _ in range(2):
        req = off.build({T0: data(0)})
        assert req.metadata.epoch == FINAL_EPOCH and list(req.to_send) == [T0]
        assert off.handle_response(ErrorCode.NONE, 0, [T0])
    assert next_epoch(2**31 - 1) == 1 and next_epoch(0) == 1 and next_epoch(-1) == -1


def parts(n: int) -> dict[FetchKey, CachedPartition]:
    return {FetchKey(uuid.UUID(int=0), "t", p): CachedPartition(0, 100) for p in range(n)}


def test_cache_eviction_follows_kafka() -> None:
    clock = ManualClock()
    cache = FetchSessionCache(2, clock, eviction_ms=1000)
    consumer = cache.create(parts(5))
    follower = cache.create(parts(3), privileged=True)
    assert consumer is not None and follower is not None
    # a young consumer session can't take a young session's place; a follower takes the
    # consumer's (privileged sessions may evict unprivileged ones at once)
    assert cache.create(parts(10)) is None
    newer = cache.create(parts(1), privileged=True)
    assert newer is not None and set(cache.sessions) == {follower.id, newer.id}
    assert cache.stats.evictions == 1
    # followers' sessions are safe from one another until they are older than eviction_ms
    assert cache.create(parts(50), privileged=True) is None
    clock.advance(1001)
    cache.sessions[follower.id].last_used_ms = clock.milliseconds()
    cache.sessions[newer.id].last_used_ms = clock.milliseconds()
    # both old now: a bigger follower session takes the smallest's place, a consumer's can't
    assert cache.create(parts(2)) is None
    bigger = cache.create(parts(2), privileged=True)
    assert bigger is not None and set(cache.sessions) == {follower.id, bigger.id}
    # unused for eviction_ms: stale, anyone may take its place
    clock.advance(1001)
    cache.sessions[bigger.id].last_used_ms = clock.milliseconds()
    late = cache.create(parts(1))
    assert late is not None and set(cache.sessions) == {bigger.id, late.id}
    assert cache.stats.evictions == 3


def v13_request(session_id: int, epoch: int, parts: dict[int, int]) -> Any:
    cls = request_class(1, 13)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    partitions = tuple(make(pcls, partition=p, fetch_offset=o, partition_max_bytes=1 << 20,
                            log_start_offset=0, current_leader_epoch=1, last_fetched_epoch=0)
                       for p, o in parts.items())  # fmt: skip
    return make(cls, replica_id=2, max_wait=0, min_bytes=1, max_bytes=1 << 20,
                isolation_level=0, session_id=session_id, session_epoch=epoch, rack_id="",
                topics=(make(tcls, topic_id=FOO, partitions=partitions),) if parts else (),
                forgotten_topics_data=())  # fmt: skip


def test_a_topic_id_unknown_when_the_session_opened_is_named_once_known() -> None:
    known: dict[uuid.UUID, str] = {}
    cache = FetchSessionCache(10, ManualClock())
    opened = cache.plan(v13_request(0, 0, {0: 5, 1: 7}), 13, known.get, privileged=True)
    assert opened.session is not None
    assert [k.topic for k, _ in opened.partitions] == ["", ""]  # UNKNOWN_TOPIC_ID for now
    known[FOO] = "foo"  # the metadata arrived
    later = cache.plan(v13_request(opened.session.id, 1, {1: 8}), 13, known.get, privileged=True)
    assert [(k.topic, k.partition, cp.fetch_offset) for k, cp in later.partitions] == [
        ("foo", 0, 5), ("foo", 1, 8)]  # fmt: skip
