"""ListOffsets by timestamp into tiered data (Kafka's RemoteLogManager.findOffsetByTimestamp,
the asyncOffsetRead of KIP-405/KIP-1075): the first remote segment whose largest timestamp
reaches the target, its remote time index for a start, then its batches for the first record
at or after the target. Blocking: the RemoteLogManager runs it on its thread pool."""

from __future__ import annotations

import struct

from tidelog.records.batch import iter_batches
from tidelog.storage.file_records import TimestampAndOffset
from tidelog.storage.remote.metadata import RemoteLogSegmentMetadata
from tidelog.storage.remote.storage_manager import (
    IndexType,
    RemoteResourceNotFoundError,
    RemoteStorageManager,
)

from .remote_log_reader import start_position

_TIME_ENTRY = struct.Struct(">qi")  # time index: timestamp, relative offset


def time_index_offset(index: bytes, base_offset: int, timestamp: int) -> int:
    """The offset of the last time index entry below ``timestamp`` (the segment's base when
    none): every record at or after the target is at or after it."""
    offset = base_offset
    size = _TIME_ENTRY.size
    for i in range(0, len(index) - len(index) % size, size):
        ts, rel = _TIME_ENTRY.unpack_from(index, i)
        if (i > 0 and ts == 0 and rel == 0) or ts >= timestamp:
            break
        offset = base_offset + rel
    return offset


def _index(rsm: RemoteStorageManager, metadata: RemoteLogSegmentMetadata,
           kind: IndexType) -> bytes:
    try:
        return rsm.fetch_index(metadata, kind)
    except RemoteResourceNotFoundError:
        return b""


def find_offset_by_timestamp(rsm: RemoteStorageManager,
                             segments: list[RemoteLogSegmentMetadata], timestamp: int,
                             starting_offset: int) -> TimestampAndOffset | None:
    """The first record at or after ``timestamp`` (and ``starting_offset``) in the remote
    segments (by start offset), or None when none reaches it."""
    for m in segments:
        if m.max_timestamp_ms < timestamp or m.end_offset < starting_offset:
            continue
        near = max(starting_offset, time_index_offset(
            _index(rsm, m, IndexType.TIMESTAMP), m.start_offset, timestamp))
        pos = start_position(_index(rsm, m, IndexType.OFFSET), m.start_offset, near)
        data = rsm.fetch_log_segment(m, pos)
        for batch in iter_batches(data, validate=False):
            if batch.max_timestamp < timestamp or batch.last_offset < starting_offset:
                continue
            for rec in batch:
                if rec.timestamp >= timestamp and rec.offset >= starting_offset:
                    epoch = batch.partition_leader_epoch
                    return TimestampAndOffset(rec.timestamp, rec.offset,
                                              epoch if epoch >= 0 else None)
    return None
