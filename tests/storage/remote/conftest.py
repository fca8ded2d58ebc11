"""Fixtures of the remote storage tests: a real closed segment to copy."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from remote_support import T0, ClosedSegment

from tidelog.config.log_config import LogConfig
from tidelog.records import CompressionType, build_batch
from tidelog.storage.log import Log
from tidelog.storage.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from tidelog.storage.remote.storage_manager import LogSegmentData
from tidelog.util.clock import ManualClock


@pytest.fixture
def closed_segment(tmp_path: Path) -> ClosedSegment:
    """A real Log written by tidelog.storage (two leader epochs, a transaction index), rolled
    twice: the first segment is closed and offered for copying, as the RemoteLogManager
    would offer it."""
    props = {"segment.index.bytes": "4096", "index.interval.bytes": "100"}
    log = Log.open(tmp_path / "orders-3", LogConfig.from_props(props), clock=ManualClock(T0))
    try:
        for i in range(40):
            records = [(T0 + i, f"k{i}-{j}".encode(), bytes(200)) for j in range(5)]
            log.append_as_leader(build_batch(records, CompressionType.NONE), leader_epoch=i // 20)
        first = log.roll()
        log.roll()
        log.flush()
    finally:
        log.close()
    directory = tmp_path / "orders-3"
    base = f"{0:020d}"
    next_base = f"{first.base_offset:020d}"
    txn = directory / f"{base}.txnindex"
    data = LogSegmentData(
        directory / f"{base}.log", directory / f"{base}.index", directory / f"{base}.timeindex",
        txn if txn.exists() else None, directory / f"{next_base}.snapshot",
        b"0\n2\n0 0\n1 100\n")
    tip = TopicIdPartition(uuid.uuid4(), "orders", 3)
    metadata = RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate_new(tip), 0, first.base_offset - 1, T0 + 39, 1, T0,
        {0: 0, 1: 100}, data.log_segment.stat().st_size)
    return ClosedSegment(data, metadata)
