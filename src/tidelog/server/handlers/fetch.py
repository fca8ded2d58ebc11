"""Fetch (key 1): long poll through the purgatory (woken by appends), max_bytes and
per-partition limits, at least one batch even when larger than the limits (while the
response is still empty), HW / LSO / log start offset, OFFSET_OUT_OF_RANGE. No fetch
sessions: the response always carries session_id 0 (clients then send full fetches)."""

from __future__ import annotations

import asyncio
from typing import Any

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.fast import FetchPartitionData, encode_fetch_response
from tidelog.protocol.kio_util import ms
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..errors import to_error
from ..sendfile import close_chunks, slice_records

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 12
READ_COMMITTED = 1


def _isolation(committed: bool) -> Any:
    from tidelog.storage.log import FetchIsolation

    return FetchIsolation.TXN_COMMITTED if committed else FetchIsolation.HIGH_WATERMARK


def _read_partition(
    ctx: RequestContext, tp: TopicPartition, p: Any, max_bytes: int, min_one: bool, isolation: Any
) -> FetchPartitionData:
    out = FetchPartitionData(p.partition)
    try:
        lg = ctx.broker.replica_manager.log_or_error(tp)
        out.high_watermark = lg.high_watermark
        out.last_stable_offset = lg.last_stable_offset
        out.log_start_offset = lg.log_start_offset
        info = lg.read(p.fetch_offset, max_bytes, isolation, min_one)
        out.records = slice_records(info.records)
        aborted = getattr(info, "aborted_transactions", None)
        if aborted:
            out.aborted_transactions = [(a.producer_id, a.first_offset) for a in aborted]
    except Exception as exc:
        out.error_code, _ = to_error(exc)
        out.records = b""
    return out


def _read_all(
    ctx: RequestContext, request: Any, isolation: Any
) -> tuple[list[tuple[str, list[FetchPartitionData]]], int, bool]:
    budget = max(0, int(getattr(request, "max_bytes", 2**31 - 1)))
    budget = min(budget, int(ctx.broker.config.values["fetch.max.bytes"]))
    total = 0
    error = False
    topics: list[tuple[str, list[FetchPartitionData]]] = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            limit = max(0, min(p.partition_max_bytes, budget - total))
            data = _read_partition(
                ctx, TopicPartition(t.topic, p.partition), p, limit, total == 0, isolation
            )
            n = len(data.records or b"")
            total += n
            error = error or data.error_code != ErrorCode.NONE
            parts.append(data)
        topics.append((t.topic, parts))
    return topics, total, error


async def handle(ctx: RequestContext, request: Any) -> Any:
    isolation = _isolation(getattr(request, "isolation_level", 0) == READ_COMMITTED)
    loop = asyncio.get_running_loop()
    max_wait = ms(request.max_wait)
    deadline = loop.time() + max_wait / 1000
    tps = [TopicPartition(t.topic, p.partition) for t in request.topics for p in t.partitions]
    topics: list[tuple[str, list[FetchPartitionData]]] = []
    try:
        while True:
            topics, total, error = _read_all(ctx, request, isolation)
            remaining = int((deadline - loop.time()) * 1000)
            if total >= request.min_bytes or error or remaining <= 0 or not tps:
                break
            _release(topics)  # parked: the read is redone when woken
            topics = []
            woke = await ctx.broker.purgatory.wait(tps, remaining)
            if not woke:
                topics, total, error = _read_all(ctx, request, isolation)
                break
        return encode_fetch_response(ctx.correlation_id, ctx.api_version, topics)
    except BaseException:
        _release(topics)
        raise


def _release(topics: list[tuple[str, list[FetchPartitionData]]]) -> None:
    close_chunks(p.records for _, parts in topics for p in parts)
