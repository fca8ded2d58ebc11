"""Kafka's RemoteIndexCache over a real S3 server (SeaweedFS): a segment's offset, time and
transaction indexes are fetched once, kept under ``<log dir>/remote-log-index-cache`` with
Kafka's file names and the objects' bytes, served from there afterwards (no more index
GETs), taken back by a new cache on the same directory (a restart), evicted least recently
used past ``remote.log.index.file.cache.total.size.bytes``, and removed with the segment."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from remote_support import ClosedSegment

from tidelog.storage.remote.factory import create_remote_storage_manager
from tidelog.storage.remote.index_cache import CachedIndexes, RemoteIndexCache
from tidelog.storage.remote.metadata import RemoteLogSegmentId, RemoteLogSegmentMetadata
from tidelog.storage.remote.rsm import RemoteStorageManager
from tidelog.storage.remote.storage_manager import IndexType, LogSegmentData
from tidelog.testing.seaweedfs import S3Bucket


class Counting:
    """The S3 storage manager, counting the index objects fetched."""

    def __init__(self, inner: RemoteStorageManager) -> None:
        self.inner = inner
        self.index_fetches = 0

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        return self.inner.copy_log_segment_data(metadata, data)

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        return self.inner.fetch_log_segment(metadata, start_position, end_position)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        self.index_fetches += 1
        return self.inner.fetch_index(metadata, index_type)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        self.inner.delete_log_segment_data(metadata)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture
def s3(s3_bucket: S3Bucket) -> Iterator[Counting]:
    manager = create_remote_storage_manager(dict(s3_bucket.rsm_configs))
    assert isinstance(manager, RemoteStorageManager)
    yield Counting(manager)
    manager.close()


def _copy(s3: Counting, segment: ClosedSegment, n: int) -> list[RemoteLogSegmentMetadata]:
    """``n`` remote segments with the closed segment's files, each its own id."""
    out = []
    for _ in range(n):
        tip = segment.metadata.topic_id_partition
        m = dataclasses.replace(segment.metadata,
                                remote_log_segment_id=RemoteLogSegmentId.generate_new(tip))
        s3.copy_log_segment_data(m, segment.data)
        out.append(m)
    return out


def test_indexes_are_fetched_once_and_kept_on_disk(tmp_path: Path, s3: Counting,
                                                   closed_segment: ClosedSegment) -> None:
    (m,) = _copy(s3, closed_segment, 1)
    cache = RemoteIndexCache(1 << 30, s3, tmp_path)
    offset_index = cache.fetch_index(m, IndexType.OFFSET)
    assert s3.index_fetches == 3  # the entry: offset, time and transaction indexes
    assert offset_index == closed_segment.data.offset_index.read_bytes()
    for _ in range(3):
        assert cache.fetch_index(m, IndexType.OFFSET) == offset_index
        assert cache.fetch_index(m, IndexType.TIMESTAMP) == \
            closed_segment.data.time_index.read_bytes()
        assert cache.fetch_index(m, IndexType.TRANSACTION) == (
            closed_segment.data.transaction_index.read_bytes()
            if closed_segment.data.transaction_index is not None else b"")
    assert s3.index_fetches == 3 and cache.misses == 1 and cache.hits == 9
    prefix = f"{m.start_offset}_{m.remote_log_segment_id.id}"
    on_disk = tmp_path / "remote-log-index-cache"
    assert sorted(p.name for p in on_disk.iterdir()) == \
        sorted(prefix + s for s in (".index", ".timeindex", ".txnindex"))
    assert (on_disk / f"{prefix}.index").read_bytes() == offset_index

    (on_disk / "leftover.index.tmp").write_bytes(b"x")  # a write cut by a crash
    incomplete = on_disk / f"7_{uuid.uuid4()}.timeindex"  # its other two files are gone
    incomplete.write_bytes(b"")
    again = RemoteIndexCache(1 << 30, s3, tmp_path)  # a restart
    assert len(again) == 1 and not (on_disk / "leftover.index.tmp").exists()
    assert not incomplete.exists()
    assert again.fetch_index(m, IndexType.OFFSET) == offset_index
    assert s3.index_fetches == 3 and again.hits == 1


def test_least_recently_used_entries_go_past_the_size(tmp_path: Path, s3: Counting,
                                                      closed_segment: ClosedSegment) -> None:
    a, b, c = _copy(s3, closed_segment, 3)
    data = closed_segment.data
    entry = data.offset_index.stat().st_size + data.time_index.stat().st_size + (
        data.transaction_index.stat().st_size if data.transaction_index is not None else 0)
    cache = RemoteIndexCache(2 * entry, s3, tmp_path)
    cache.fetch_index(a, IndexType.OFFSET)
    cache.fetch_index(b, IndexType.OFFSET)
    cache.fetch_index(a, IndexType.OFFSET)  # a is now the most recent
    cache.fetch_index(c, IndexType.OFFSET)  # b goes
    assert cache.size_bytes == 2 * entry and len(cache) == 2
    names = {p.name.split(".")[0] for p in (tmp_path / "remote-log-index-cache").iterdir()}
    assert names == {f"{m.start_offset}_{m.remote_log_segment_id.id}" for m in (a, c)}
    fetched = s3.index_fetches
    cache.fetch_index(b, IndexType.OFFSET)  # fetched again
    assert s3.index_fetches == fetched + 3

    tiny = RemoteIndexCache(1, s3, tmp_path / "tiny")  # nothing fits: every read fetches
    assert tiny.fetch_index(a, IndexType.OFFSET) == data.offset_index.read_bytes()
    assert len(tiny) == 0 and list((tmp_path / "tiny" / "remote-log-index-cache").iterdir()) == []


def test_a_deleted_segment_leaves_the_cache(tmp_path: Path, s3: Counting,
                                            closed_segment: ClosedSegment) -> None:
    (m,) = _copy(s3, closed_segment, 1)
    cache = RemoteIndexCache(1 << 30, s3, tmp_path)
    rsm = CachedIndexes(s3, cache)
    rsm.fetch_index(m, IndexType.OFFSET)
    assert len(cache) == 1
    rsm.delete_log_segment_data(m)
    assert len(cache) == 0 and list((tmp_path / "remote-log-index-cache").iterdir()) == []
