"""Helpers of the remote storage tests (imported by their modules and conftest)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tidelog.storage.remote.metadata import RemoteLogSegmentMetadata
from tidelog.storage.remote.storage_manager import LogSegmentData

T0 = 1_700_000_000_000


@dataclass(frozen=True)
class ClosedSegment:
    data: LogSegmentData
    metadata: RemoteLogSegmentMetadata


def segment_files(data: LogSegmentData) -> dict[str, Path | bytes]:
    """suffix -> the local file (or bytes) each object must equal."""
    files: dict[str, Path | bytes] = {
        "log": data.log_segment, "index": data.offset_index, "timeindex": data.time_index,
        "snapshot": data.producer_snapshot_index,
        "leader_epoch_checkpoint": data.leader_epoch_index,
    }
    if data.transaction_index is not None:
        files["txnindex"] = data.transaction_index
    return files
