"""Append-side data of a Log: LogAppendInfo, and the producer-state analysis that runs
before any byte is written (Kafka's UnifiedLog.analyzeAndValidateProducerState)."""

from __future__ import annotations

from dataclasses import dataclass

from tidelog.records import NO_PRODUCER_ID, RecordBatch

from .producer_state import BatchMetadata, CompletedTxn, ProducerAppendInfo, ProducerStateManager
from .validator import AppendOrigin


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


def analyze_producer_state(psm: ProducerStateManager, batches: list[RecordBatch],
                           origin: AppendOrigin) -> ProducerAnalysis:
    """Sequence/epoch checks per producer; a client retry of one of the last 5 batches is
    reported as ``duplicate`` (checked before the sequence rules, as Kafka)."""
    out = ProducerAnalysis({}, [])
    for batch in batches:
        pid = batch.producer_id
        if pid <= NO_PRODUCER_ID:  # (RecordBatch.has_producer_id, its field read once)
            continue
        if origin is AppendOrigin.CLIENT:
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
