"""Produce (key 0): batches stay bytes; per-partition errors; acks 0/1/-1 through the
ReplicaManager (NOT_LEADER_OR_FOLLOWER where this broker does not lead, NOT_ENOUGH_REPLICAS
below min.insync.replicas; acks=-1 answers once the ISR has the batch, the DelayedProduce
purgatory, or REQUEST_TIMED_OUT after the request's timeout); the response is hand-encoded.
v11 only adds leader-change tags (not sent), v12 is v11 for transaction
version 2 producers (a client only sends it when transaction.version >= 2 is finalized, never
here); v13 names topics by id (KIP-516): an id unknown here is UNKNOWN_TOPIC_ID."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Coroutine
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from tidelog.protocol.codec import RequestHeader
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.fast import ProducePartitionResult, encode_produce_response
from tidelog.protocol.kio_util import ms
from tidelog.records.batch import ATTRIBUTES_OFFSET, RECORD_BATCH_OVERHEAD, TRANSACTIONAL_MASK
from tidelog.util.slotted import slotted_maker
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..coordinator.transaction.verification import verify_transactional_produce
from ..quota import QuotaType
from ..quota.wiring import has_quota, throttle, wait_until_unmuted
from ..registry import NOT_NOW
from ..replica_appends import (
    HEAVY_BYTES,
    HEAVY_COMPRESSED_BYTES,
    Entry,
    ReplicaAppends,
    Validate,
    is_heavy,
)
from ..replica_manager import INTERNAL_TOPICS
from ..security import AclOperation, ResourceType

if TYPE_CHECKING:
    from ..cluster.partition import Partition

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 13
TOPIC_ID_VERSION = 13
log = logging.getLogger(__name__)
NO_TOPIC_ID = uuid.UUID(int=0)
# the enum members read per request, bound once (3.11's EnumType.__getattr__ hook makes every
# ``Enum.MEMBER`` read of a class attribute cost ~1 us)
_PRODUCE, _WRITE, _TOPIC = QuotaType.PRODUCE, AclOperation.WRITE, ResourceType.TOPIC
_new_tuple = tuple.__new__
# (made without their Python __init__/__new__: util/slotted.py)
_new_result = slotted_maker(ProducePartitionResult)
_new_tp = slotted_maker(TopicPartition)
_TXN_BYTE = ATTRIBUTES_OFFSET + 1  # the attributes' low byte, with the transactional bit
# (called through the function: a method looked up on the ReplicaManager, whose attributes
# are too many for its dict to share its keys, is a generic lookup each time)
_append_one_now = ReplicaAppends.append_one_now
_API_VERSION: Final = 1  # RequestHeader's fields, read by index
_CORRELATION_ID: Final = 2
assert RequestHeader._fields[_API_VERSION] == "api_version"
assert RequestHeader._fields[_CORRELATION_ID] == "correlation_id"
__all__ = ["HEAVY_BYTES", "HEAVY_COMPRESSED_BYTES", "handle", "is_heavy"]


def _entry(ctx: RequestContext, tp: TopicPartition, records: bytes | None, exists: bool,
           entries: list[Entry]) -> ProducePartitionResult:
    """A partition's answer; its batches join ``entries`` when they may be appended."""
    result = _new_result(tp.partition)
    if records is None or len(records) == 0:
        result.error_code = ErrorCode.CORRUPT_MESSAGE
        result.error_message = "empty record set"
    elif not exists:
        result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    else:
        txn_error = verify_transactional_produce(ctx.broker, tp, records)
        if txn_error is not None:
            result.error_code = txn_error
        else:
            entries.append((tp, records, result))
    return result


def _validator(ctx: RequestContext) -> Validate:
    """The broker's record validators (validated topics): the first refusal is raised."""
    validators = ctx.broker.record_validators
    rm = ctx.broker.replica_manager

    def validate(tp: TopicPartition, records: bytes) -> None:
        info = rm.topic(tp.topic)
        configs = info.configs if info is not None else {}
        for check in validators:
            refused = check(tp.topic, configs, records)
            if refused is not None:
                raise refused

    return validate


class _Named(NamedTuple):
    """A Produce's topics as ``_topics`` read them, in one pass over its partitions."""

    topics: list[tuple[str | None, uuid.UUID, bool]]  # (name or None, id, known here)
    may_create: bool  # a topic unknown here: its creation may suspend the request
    heavy: bool  # a batch appended off the loop (``is_heavy``)
    request_bytes: int  # the batches' bytes (the produce quota's)


def _topics(ctx: RequestContext, request: Any) -> _Named:
    """Each topic's (name, or None for an id unknown here; its id from v13; whether it is
    known here), whether one is not: its creation (``auto.create.topics.enable``) may
    suspend the request before its appends, so later requests of the connection queue
    behind it; whether a batch is heavy; the batches' bytes. (Loops, not generators: this
    runs for every request.)"""
    rm = ctx.broker.replica_manager
    named = []
    may_create = heavy = False
    n = 0
    for t in request.topic_data:
        name, topic_id = _topic_of(ctx, t)
        known = name is not None and rm.topic(name) is not None
        may_create = may_create or (name is not None and not known)
        named.append((name, topic_id, known))
        for p in t.partition_data:
            records = p.records
            if records is not None:
                size = len(records)
                n += size
                if size >= HEAVY_COMPRESSED_BYTES and not heavy:
                    heavy = is_heavy(records)
    return _new_tuple(_Named, (named, may_create, heavy, n))  # (no Python __new__ call)


def handle(ctx: RequestContext, request: Any) -> Coroutine[Any, Any, Any]:
    """A connection's produce requests append in the order they arrived (an idempotent
    producer pipelines them): once one goes off the loop, later ones of the same connection
    queue behind it; the others never wait. (A function returning the coroutine: the
    common request makes one coroutine, ``_handle``'s.)"""
    try:
        # a client with a produce quota is served one request at a time, as Kafka's muted
        # channel reads them (quota/wiring.py)
        quotas = ctx.broker.client_quotas  # (no call for the common case: no quota at all)
        quota = (quotas is None or bool(quotas.store.entries)) and has_quota(ctx, _PRODUCE)
        named = _topics(ctx, request)
    except Exception as exc:
        return _raise(exc)
    if ctx.connection_state.produce_tail is None and not quota and not named.may_create \
            and not named.heavy:
        return _handle(ctx, request, named)  # never suspends before its appends are done
    return _queued(ctx, request, named, quota)


async def _raise(exc: Exception) -> Any:
    raise exc


async def _queued(ctx: RequestContext, request: Any, named: _Named, quota: bool) -> Any:
    """``_handle`` once the connection's earlier produce requests are done and its
    produce quota's mute is over."""
    state = ctx.connection_state
    previous = state.produce_tail
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    state.produce_tail = done
    try:
        if previous is not None:
            await previous
        if quota:
            await wait_until_unmuted(ctx)
        return await _handle(ctx, request, named)
    finally:
        done.set_result(None)
        if state.produce_tail is done:
            state.produce_tail = None


def _topic_entries(ctx: RequestContext, t: Any, name: str, denied: ErrorCode | None,
                   acks: int, exists: bool, entries: list[Entry]
                   ) -> list[ProducePartitionResult]:
    """The answers of a topic's partitions; those that may be appended join ``entries``."""
    parts = []
    for p in t.partition_data:
        if denied is not None:
            parts.append(ProducePartitionResult(p.index, denied))
        elif acks not in (0, 1, -1):
            parts.append(ProducePartitionResult(p.index, ErrorCode.INVALID_REQUIRED_ACKS))
        elif name in INTERNAL_TOPICS:
            # Only the coordinators write internal topics (they append to the log directly).
            refused = ProducePartitionResult(p.index, ErrorCode.INVALID_TOPIC_EXCEPTION)
            refused.error_message = f"Cannot append to internal topic {name}"
            parts.append(refused)
        else:
            tp = _new_tp(name, p.index)
            parts.append(_entry(ctx, tp, p.records, exists, entries))
    return parts


def _creates(t: Any, name: str, denied: ErrorCode | None, acks: int) -> bool:
    """A topic unknown here that this request would append to: auto-created first."""
    return (denied is None and acks in (0, 1, -1) and name not in INTERNAL_TOPICS
            and any(p.records for p in t.partition_data))


def handle_now(ctx: RequestContext, request: Any) -> Any:
    """The common Produce answered without a coroutine (registry.py): no quota, no produce
    of the connection still running, no topic to create, no heavy batch. Its answer, or a
    coroutine when its appends wait for something (the ISR, the group commit, the writer
    thread), or NOT_NOW (nothing done): ``handle``'s. librdkafka's, one partition of one
    topic named (not by id), acks 1 or -1, no authorizer, no record validator, takes one path
    here: the checks ``_topics``, ``_denied`` and ``_topic_entries`` make, answered as they
    answer; any other, ``_handle_now_many``."""
    broker = ctx.broker
    quotas = broker.client_quotas
    if quotas is None or quotas.store.entries or ctx.connection_state.produce_tail is not None:
        return NOT_NOW
    topic_data = request.topic_data
    header = ctx.header
    # (a named tuple's fields by index: its field by name is a generic lookup each time)
    version = header[_API_VERSION]
    if len(topic_data) != 1 or len(topic_data[0].partition_data) != 1 or \
            broker.authorizer is not None or broker.record_validators or \
            version >= TOPIC_ID_VERSION or request.acks not in (-1, 1):
        return _handle_now_many(ctx, request)
    t = topic_data[0]
    name = t.name
    p = t.partition_data[0]
    records = p.records
    rm = broker.replica_manager
    if records is None or not 0 < len(records) < HEAVY_COMPRESSED_BYTES or \
            name in INTERNAL_TOPICS or rm.store.topics.get(name) is None:  # (``rm.topic``)
        return _handle_now_many(ctx, request)  # (empty, heavy maybe, internal, to create)
    tp = _new_tp(name, p.index)
    result = _new_result(p.index)
    topics = [(name, [result])]
    # (verify_transactional_produce's own first test: a call only for a transactional batch)
    txn_error = None if len(records) < RECORD_BATCH_OVERHEAD or \
        not records[_TXN_BYTE] & TRANSACTIONAL_MASK else \
        verify_transactional_produce(broker, tp, records)
    if txn_error is not None:
        result.error_code = txn_error
    else:
        try:
            timeout = request.timeout_ms  # (decoded in place: kept in ms as read)
        except AttributeError:  # (kio's request)
            timeout = ms(request.timeout)
        waits = _append_one_now(rm, request.acks, timeout, tp, records, result) \
            if rm.async_appends else rm.append_records_now(request.acks, timeout,
                                                           [(tp, records, result)])
        if waits is not None:
            return _answer_one_after(ctx, request, name, len(records), topics, waits)
    return encode_produce_response(header[_CORRELATION_ID], version, topics, 0)


def answer_one_rest(ctx: RequestContext, request: Any,
                    rest: tuple[Partition, TopicPartition, Any, int]) -> Any:
    """``handle_now``'s answer of the Produce the native produce path appended and left
    here (server/produce_one.py: ``rest``, its partition, the outcome and where it
    stopped): the ReplicaManager's ``append_one_rest``, then answered as ``handle_now``
    answers."""
    partition, tp, outcome, phase = rest
    t = request.topic_data[0]
    p = t.partition_data[0]
    result = _new_result(p.index)
    topics = [(t.name, [result])]
    size = len(p.records)
    waits = ctx.broker.replica_manager.append_one_rest(
        request.acks, request.timeout_ms, tp, partition, outcome, phase, result, size)
    if waits is not None:
        return _answer_one_after(ctx, request, t.name, size, topics, waits)
    header = ctx.header
    return encode_produce_response(header[_CORRELATION_ID], header[_API_VERSION], topics, 0)


def _answer_one_after(ctx: RequestContext, request: Any, name: str, size: int,
                      topics: list[tuple[str, list[ProducePartitionResult]]],
                      waits: Awaitable[None]) -> Any:
    """``handle_now``'s answer of one partition once what it waits for is done."""
    named = _new_tuple(_Named, ([(name, NO_TOPIC_ID, True)], False, False, size))
    return _answer_after(ctx, request, named, topics, waits)


def _handle_now_many(ctx: RequestContext, request: Any) -> Any:
    """``handle_now`` of any Produce but the one-partition one it answers itself."""
    named = _topics(ctx, request)
    if named.may_create or named.heavy:
        return NOT_NOW
    acks = request.acks
    tid_denied = _tid_denied(ctx, request)
    topics: list[tuple[str, list[ProducePartitionResult]]] = []
    entries: list[Entry] = []
    names = named.topics  # (a loop: a comprehension is a call)
    for i, t in enumerate(request.topic_data):
        name, _, known = names[i]
        denied = _denied(ctx, name, tid_denied)
        name = name or ""
        topics.append((name, _topic_entries(ctx, t, name, denied, acks, known, entries)))
    waits = _append(ctx, request, entries) if entries else None
    if waits is not None:
        return _answer_after(ctx, request, named, topics, waits)
    return _answer(ctx, request, named, topics)


def _tid_denied(ctx: RequestContext, request: Any) -> bool:
    """The transactional id's WRITE refused (checked once per request, first)."""
    if ctx.broker.authorizer is None:  # (what ctx.authorize answers first)
        return False
    tid = getattr(request, "transactional_id", None)
    return tid is not None and not ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid)


def _denied(ctx: RequestContext, name: str | None, tid_denied: bool) -> ErrorCode | None:
    """Why a topic's partitions may not be written: Kafka's order is the transactional id,
    then WRITE on the topic, before the topic's existence (an unauthorized producer cannot
    tell a missing topic from a forbidden one)."""
    if name is None:
        return ErrorCode.UNKNOWN_TOPIC_ID
    if tid_denied:
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if ctx.broker.authorizer is None or ctx.authorize(_WRITE, _TOPIC, name):
        return None
    return ErrorCode.TOPIC_AUTHORIZATION_FAILED


async def _handle(ctx: RequestContext, request: Any, named: _Named) -> Any:
    acks = request.acks
    topics: list[tuple[str, list[ProducePartitionResult]]] = []
    entries: list[Entry] = []
    tid_denied = _tid_denied(ctx, request)
    names = named.topics  # (read in the same order: no zip object per request)
    for i, t in enumerate(request.topic_data):
        name, _, known = names[i]
        denied = _denied(ctx, name, tid_denied)
        name = name or ""
        if not known and _creates(t, name, denied, acks):  # (it may exist by now: queued)
            known = (ctx.broker.replica_manager.topic(name) is not None
                     or await ctx.broker.admin_manager.auto_create(name) is not None)
        topics.append((name, _topic_entries(ctx, t, name, denied, acks, known, entries)))
    if entries:
        waits = _append(ctx, request, entries)
        if waits is not None:  # (none: the answers final already, no coroutine made)
            await waits
    return _answer(ctx, request, named, topics)


def _append(ctx: RequestContext, request: Any, entries: list[Entry]) -> Awaitable[None] | None:
    """The entries appended (ReplicaManager.append_records_now): what their answers still
    wait for, or None."""
    validate = _validator(ctx) if ctx.broker.record_validators else None
    timeout_ms = getattr(request, "timeout_ms", None)  # (in place: kept in ms as read)
    return ctx.broker.replica_manager.append_records_now(
        request.acks, ms(request.timeout) if timeout_ms is None else timeout_ms, entries,
        validate)


async def _answer_after(ctx: RequestContext, request: Any, named: _Named,
                        topics: list[tuple[str, list[ProducePartitionResult]]],
                        waits: Awaitable[None]) -> Any:
    await waits
    return _answer(ctx, request, named, topics)


def _answer(ctx: RequestContext, request: Any, named: _Named,
            topics: list[tuple[str, list[ProducePartitionResult]]]) -> Any:
    """The response once the answers are final (None for acks=0: a failure closes)."""
    # producer_byte_rate: the response carries the throttle and the connection mutes itself
    quotas = ctx.broker.client_quotas  # (no call without any quota: ``throttle``'s answer)
    throttle_ms = throttle(ctx, _PRODUCE, named.request_bytes) \
        if quotas is None or quotas.store.entries else 0
    if request.acks == 0:
        failed = [
            f"{name}-{p.index}: {ErrorCode(p.error_code).name}"
            for name, parts in topics
            for p in parts
            if p.error_code
        ]
        if failed:
            ctx.close_reason = f"acks=0 produce failed ({', '.join(failed[:5])})"
        return None
    header = ctx.header
    if header.api_version >= TOPIC_ID_VERSION:
        by_id = [(n[1], parts) for n, (_, parts) in zip(named.topics, topics, strict=True)]
        return encode_produce_response(header.correlation_id, header.api_version, by_id,
                                       throttle_ms)
    return encode_produce_response(header.correlation_id, header.api_version, topics,
                                   throttle_ms)


def _topic_of(ctx: RequestContext, t: Any) -> tuple[str | None, uuid.UUID]:
    """(the topic's name, or None for an id unknown here; its id from v13)."""
    if ctx.header.api_version < TOPIC_ID_VERSION:
        return t.name, NO_TOPIC_ID
    tid = t.topic_id or NO_TOPIC_ID
    topic = ctx.broker.metadata_cache.image.topic_by_id(tid)
    return (topic.name if topic is not None else None), tid
