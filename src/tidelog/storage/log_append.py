"""Append-side data of a Log: LogAppendInfo, the validated batches of a leader's or a
follower's append, and the producer-state analysis that runs before any byte is written
(Kafka's UnifiedLog.analyzeAndValidateProducerState)."""

from __future__ import annotations

from dataclasses import dataclass

from tidelog.config.log_config import LogConfig
from tidelog.records import NO_PRODUCER_ID, RecordBatch

from .errors import RecordBatchTooLargeError
from .index.txn_index import AbortedTxn
from .leader_epoch import LeaderEpochFileCache
from .producer_state import BatchMetadata, CompletedTxn, ProducerAppendInfo, ProducerStateManager
from .segment import LogSegment
from .validator import AppendOrigin, FollowerAnalysis, validate_and_assign_offsets

_CLIENT = AppendOrigin.CLIENT  # bound once: 3.11's EnumType.__getattr__ slows Enum.MEMBER


@dataclass(slots=True)
class LogAppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    log_append_time: int = -1
    log_start_offset: int = 0
    num_messages: int = 0
    valid_bytes: int = 0
    duplicate: bool = False


@dataclass(slots=True)
class AppendBatches:
    """A validated record set ready to append."""

    records: bytes | bytearray | memoryview
    batches: list[RecordBatch]
    info: LogAppendInfo


@dataclass(slots=True)
class ProducerAnalysis:
    updates: dict[int, ProducerAppendInfo]
    completed: list[CompletedTxn]
    duplicate: BatchMetadata | None = None


def leader_batches(records: bytes | bytearray | memoryview, config: LogConfig, *,
                   now_ms: int, offset: int, leader_epoch: int, origin: AppendOrigin,
                   name: str, log_start_offset: int) -> AppendBatches:
    """A leader's records validated, their offsets assigned from ``offset``."""
    res = validate_and_assign_offsets(
        records, config, now_ms=now_ms, offset=offset, leader_epoch=leader_epoch,
        origin=origin, topic_partition=name)
    info = LogAppendInfo(
        res.first_offset, res.last_offset, res.max_timestamp, res.offset_of_max_timestamp,
        res.log_append_time, log_start_offset, res.num_messages, res.batch.size_in_bytes)
    return AppendBatches(res.records, [res.batch], info)


def follower_info(a: FollowerAnalysis, log_start_offset: int) -> LogAppendInfo:
    """The answer to a follower's append of the replicated batches ``a``."""
    return LogAppendInfo(a.first_offset, a.last_offset, a.max_timestamp,
                         a.offset_of_max_timestamp, -1, log_start_offset, a.num_messages,
                         a.valid_bytes)


def analyze_append(v: AppendBatches, origin: AppendOrigin, psm: ProducerStateManager,
                   config: LogConfig, *, name: str, log_start_offset: int
                   ) -> ProducerAnalysis | None:
    """The size check and the producer state analysis (Kafka's
    analyzeAndValidateProducerState); None for a client's retry of a recent batch, whose
    ``v.info`` then answers with the original offsets."""
    size = len(v.records)
    if size > config.segment_bytes:
        raise RecordBatchTooLargeError(
            f"Message batch size is {size} bytes in append to partition {name}, which "
            f"exceeds the maximum configured segment size of {config.segment_bytes}.")
    analysis = analyze_producer_state(psm, v.batches, origin)
    if analysis.duplicate is None:
        return analysis
    duplicate_info(v.info, analysis.duplicate, log_append_time=config.log_append_time,
                   log_start_offset=log_start_offset)
    return None


def analyze_producer_state(psm: ProducerStateManager, batches: list[RecordBatch],
                           origin: AppendOrigin) -> ProducerAnalysis:
    """Sequence/epoch checks per producer; a client retry of one of the last 5 batches is
    reported as ``duplicate`` (checked before the sequence rules, as Kafka)."""
    out = ProducerAnalysis({}, [])
    for batch in batches:
        pid = batch.producer_id
        if pid <= NO_PRODUCER_ID:  # (RecordBatch.has_producer_id, its field read once)
            continue
        if origin is _CLIENT:
            entry = psm.last_entry(pid)
            dup = entry.find_duplicate_batch(batch) if entry is not None else None
            if dup is not None:
                out.duplicate = dup
                return out
        upd = out.updates.get(pid) or psm.prepare_update(pid, origin)
        out.updates[pid] = upd
        c = upd.append(batch)
        if c is not None:
            out.completed.append(c)
    return out


def duplicate_info(info: LogAppendInfo, dup: BatchMetadata, *, log_append_time: bool,
                   log_start_offset: int) -> LogAppendInfo:
    """The answer to a retried batch: its original offsets, nothing appended."""
    info.first_offset, info.last_offset = dup.first_offset, dup.last_offset
    info.log_append_time = dup.timestamp if log_append_time else -1
    info.max_timestamp = dup.timestamp
    info.offset_of_max_timestamp = dup.last_offset
    info.duplicate = True
    info.valid_bytes = 0
    info.log_start_offset = log_start_offset
    return info


def settle_producer_state(psm: ProducerStateManager, analysis: ProducerAnalysis,
                          info: LogAppendInfo, segment: LogSegment | None = None) -> None:
    """Apply an append's producer updates and completed transactions (an aborted one enters
    ``segment``'s transaction index when the append is written there)."""
    for upd in analysis.updates.values():
        psm.update(upd)
    for c in analysis.completed:
        lso = psm.last_stable_offset(c)
        if c.is_aborted and segment is not None:
            segment.update_txn_index(AbortedTxn(c.producer_id, c.first_offset, c.last_offset,
                                                lso))
        psm.complete_txn(c)
    psm.update_map_end_offset(info.last_offset + 1)


def assign_epochs_of(cache: LeaderEpochFileCache, batches: list[RecordBatch],
                     flush: bool = True) -> bool:
    """A batch of a newer leader epoch starts it in the cache; True if one did."""
    assigned = False
    for b in batches:
        epoch = b.partition_leader_epoch
        latest = cache.latest_epoch()
        if epoch >= 0 and (latest is None or epoch > latest):
            assigned |= cache.assign(epoch, b.base_offset, flush=flush)
    return assigned
