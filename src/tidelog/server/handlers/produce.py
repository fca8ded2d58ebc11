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
from typing import Any

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.fast import ProducePartitionResult, encode_produce_response
from tidelog.protocol.kio_util import ms
from tidelog.records.batch import COMPRESSION_MASK, peek_attributes
from tidelog.server.coordinator.transaction.verification import verify_transactional_produce
from tidelog.storage.errors import RecordValidationError
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..errors import to_error
from ..group_commit import Waiter
from ..quota import QuotaType
from ..quota.wiring import has_quota, throttle, wait_until_unmuted
from ..replica_manager import INTERNAL_TOPICS, Written
from ..security import AclOperation, ResourceType

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 13
TOPIC_ID_VERSION = 13
log = logging.getLogger(__name__)
# Batches validated and written off the event loop (ReplicaManager.append_off_loop).
HEAVY_BYTES = 1 << 20
HEAVY_COMPRESSED_BYTES = 8 << 10
NO_TOPIC_ID = uuid.UUID(int=0)


def is_heavy(records: bytes) -> bool:
    """A batch whose validation may take long: compressed (a decompression bomb is a few
    hundred KB) or large (CRC, copy and write of a huge record)."""
    n = len(records)
    if n >= HEAVY_BYTES:
        return True
    return n >= HEAVY_COMPRESSED_BYTES and peek_attributes(records) & COMPRESSION_MASK != 0


Replicated = dict[TopicPartition, tuple[ProducePartitionResult, int]]
Writes = list[tuple[ProducePartitionResult, "asyncio.Future[Written]"]]


async def _append(
    ctx: RequestContext, tp: TopicPartition, records: bytes | None, acks: int,
    waits: list[tuple[ProducePartitionResult, Waiter]], replicated: Replicated,
    writes: Writes,
) -> ProducePartitionResult:
    rm = ctx.broker.replica_manager
    result = ProducePartitionResult(tp.partition)
    if records is None or len(records) == 0:
        result.error_code = ErrorCode.CORRUPT_MESSAGE
        result.error_message = "empty record set"
        return result
    if rm.topic(tp.topic) is None and await ctx.broker.admin_manager.auto_create(tp.topic) is None:
        result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        return result
    txn_error = verify_transactional_produce(ctx.broker, tp, records)
    if txn_error is not None:
        result.error_code = txn_error
        return result
    try:
        _check_records(ctx, tp, records)
        written = None
        if is_heavy(records):
            info = await rm.append_off_loop(tp, records, group_commit=True,
                                            required_acks=acks)
        elif rm.async_appends:
            info, written = rm.append_async(tp, records, required_acks=acks)
        else:
            info = rm.append(tp, records, group_commit=True, required_acks=acks)
    except RecordValidationError as exc:
        result.error_code = ErrorCode[exc.kafka_error]
        result.record_errors = [(i, m) for i, m in exc.errors]
        result.error_message = exc.error_message
        return result
    except Exception as exc:
        code, msg = to_error(exc)
        # A storage error was logged once, when its log dir went offline (repeats are
        # counted there): no traceback per request.
        if code == ErrorCode.UNKNOWN_SERVER_ERROR:
            log.error("append to %s failed", tp, exc_info=exc)
        result.error_code = code
        result.error_message = msg
        return result
    result.base_offset = info.first_offset
    result.log_append_time = info.log_append_time
    result.log_start_offset = info.log_start_offset
    if written is not None:
        writes.append((result, written))  # its group commit round is known once written
    else:
        # taken before anything suspends: the round covering this append may start any turn
        waiter = rm.group_commit.waiter(tp)
        if waiter is not None:
            waits.append((result, waiter))
    if acks == -1 and info.last_offset >= 0:  # a duplicate waits for its original
        replicated[tp] = (result, info.last_offset + 1)
    return result


def _check_records(ctx: RequestContext, tp: TopicPartition, records: bytes) -> None:
    """The broker's record validators (validated topics): raise the first refusal."""
    validators = ctx.broker.record_validators
    if not validators:
        return
    info = ctx.broker.replica_manager.topic(tp.topic)
    configs = info.configs if info is not None else {}
    for validate in validators:
        refused = validate(tp.topic, configs, records)
        if refused is not None:
            raise refused


def _replicated_now(ctx: RequestContext, replicated: Replicated
                    ) -> dict[TopicPartition, int]:
    """acks=-1: the ISR must have each batch (Kafka's DelayedProduce). The outcomes known now
    are set (an error fails its partition); returns the partitions still short of their
    offset, for ``_wait_replicated`` (none when the ISR is this broker: no coroutine)."""
    required = {tp: offset for tp, (r, offset) in replicated.items() if r.error_code == 0}
    if not required:
        return required
    known, short = ctx.broker.replica_manager.replicated_now(required)
    _fail_unreplicated(replicated, known)
    return short


async def _wait_replicated(ctx: RequestContext, request: Any, replicated: Replicated,
                           short: dict[TopicPartition, int]) -> None:
    outcome = await ctx.broker.replica_manager.park_replicated({}, short, ms(request.timeout))
    _fail_unreplicated(replicated, outcome)


def _fail_unreplicated(replicated: Replicated, outcome: dict[TopicPartition, ErrorCode]
                       ) -> None:
    for tp, error in outcome.items():
        if error != ErrorCode.NONE:
            r = replicated[tp][0]
            r.error_code, r.error_message = error, None
            r.base_offset = r.log_append_time = r.log_start_offset = -1


async def _wait_written(writes: Writes, waits: list[tuple[ProducePartitionResult, Waiter]]
                        ) -> None:
    """Appends written off the loop: a failed write fails its partition; the others join
    the group commit round that took them."""
    for p, fut in writes:
        error, waiter = await fut
        if error is not None:
            p.error_code, p.error_message = to_error(error)
            p.base_offset = p.log_append_time = p.log_start_offset = -1
        elif waiter is not None:
            waits.append((p, waiter))


async def _wait_group_commit(waits: list[tuple[ProducePartitionResult, Waiter]]) -> None:
    """Answer only after the group commit round covering each append flushed its partition
    (``flush.messages`` reached; see server/group_commit.py); a failed flush fails them."""
    for p, fut in waits:
        error = await fut
        if error is not None:
            p.error_code, p.error_message = to_error(error)
            p.base_offset = p.log_append_time = p.log_start_offset = -1


def _has_heavy(request: Any) -> bool:
    for t in request.topic_data:  # (loops, not a generator: this runs for every request)
        for p in t.partition_data:
            if p.records is not None and is_heavy(p.records):
                return True
    return False


async def handle(ctx: RequestContext, request: Any) -> Any:
    """A connection's produce requests append in the order they arrived (an idempotent
    producer pipelines them): once one goes off the loop, later ones of the same connection
    queue behind it; the others never wait."""
    state = ctx.connection_state
    previous = state.produce_tail
    # a client with a produce quota is served one request at a time, as Kafka's muted
    # channel reads them (quota/wiring.py)
    quota = has_quota(ctx, QuotaType.PRODUCE)
    if previous is None and not quota and not _has_heavy(request):
        return await _handle(ctx, request)  # never suspends before its appends are done
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    state.produce_tail = done
    try:
        if previous is not None:
            await previous
        if quota:
            await wait_until_unmuted(ctx)
        return await _handle(ctx, request)
    finally:
        done.set_result(None)
        if state.produce_tail is done:
            state.produce_tail = None


async def _handle(ctx: RequestContext, request: Any) -> Any:
    acks = request.acks
    topics: list[tuple[str, list[ProducePartitionResult]]] = []
    # Kafka's order: transactional id, then WRITE on each topic, before the topic's existence
    # (an unauthorized producer cannot tell a missing topic from a forbidden one)
    tid = getattr(request, "transactional_id", None)
    tid_denied = tid is not None and not ctx.authorize(
        AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid
    )
    ids: list[uuid.UUID] = []
    waits: list[tuple[ProducePartitionResult, Waiter]] = []
    replicated: Replicated = {}
    writes: Writes = []
    for t in request.topic_data:
        parts = []
        name, topic_id = _topic_of(ctx, t)
        ids.append(topic_id)
        denied = (
            ErrorCode.UNKNOWN_TOPIC_ID if name is None
            else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED if tid_denied
            else None if ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, name)
            else ErrorCode.TOPIC_AUTHORIZATION_FAILED
        )
        name = name or ""
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
                parts.append(
                    await _append(ctx, TopicPartition(name, p.index), p.records, acks, waits,
                                  replicated, writes)
                )
        topics.append((name, parts))
    if writes:  # (each wait only when it has something to wait for: a coroutine costs)
        await _wait_written(writes, waits)
    if waits:
        await _wait_group_commit(waits)
    if replicated and (short := _replicated_now(ctx, replicated)):
        await _wait_replicated(ctx, request, replicated, short)
    # producer_byte_rate: the response carries the throttle and the connection mutes itself
    throttle_ms = throttle(ctx, QuotaType.PRODUCE, _request_bytes(request))
    if acks == 0:
        failed = [
            f"{name}-{p.index}: {ErrorCode(p.error_code).name}"
            for name, parts in topics
            for p in parts
            if p.error_code
        ]
        if failed:
            ctx.close_reason = f"acks=0 produce failed ({', '.join(failed[:5])})"
        return None
    if ctx.api_version >= TOPIC_ID_VERSION:
        by_id = [(tid, parts) for tid, (_, parts) in zip(ids, topics, strict=True)]
        return encode_produce_response(ctx.correlation_id, ctx.api_version, by_id, throttle_ms)
    return encode_produce_response(ctx.correlation_id, ctx.api_version, topics, throttle_ms)


def _topic_of(ctx: RequestContext, t: Any) -> tuple[str | None, uuid.UUID]:
    """(the topic's name, or None for an id unknown here; its id from v13)."""
    if ctx.api_version < TOPIC_ID_VERSION:
        return t.name, NO_TOPIC_ID
    tid = t.topic_id or NO_TOPIC_ID
    topic = ctx.broker.metadata_cache.image.topic_by_id(tid)
    return (topic.name if topic is not None else None), tid


def _request_bytes(request: Any) -> int:
    n = 0
    for t in request.topic_data:
        for p in t.partition_data:
            if p.records is not None:
                n += len(p.records)
    return n
