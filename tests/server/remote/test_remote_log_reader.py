"""Remote reads (Kafka's RemoteLogReader): after the local segments are gone, every batch
below the local start is read back from remote storage, byte for byte as it was on disk,
from any offset, within max bytes (the first batch whole), off the event loop; a failing
remote storage is the read's error, counted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tidelog.records.batch import iter_batches
from tidelog.server.remote_log_reader import RemoteFetchResult, RemoteStorageFetchInfo
from tidelog.storage.remote.metadata import RemoteLogSegmentMetadata, TopicIdPartition
from tidelog.storage.remote.storage_manager import RemoteStorageError

from .harness import TOPIC, Tiered, open_tiered


@pytest.fixture
def tiered(tmp_path: Path) -> Tiered:
    t = open_tiered(tmp_path / "logs", tmp_path / "remote")
    yield t  # type: ignore[misc]
    t.close()


def _tip(t: Tiered) -> TopicIdPartition:
    info = t.rm.topic(TOPIC)
    assert info is not None
    return TopicIdPartition(info.topic_id, TOPIC, 0)


def _read(t: Tiered, offset: int, max_bytes: int = 1 << 20) -> RemoteFetchResult:
    info = RemoteStorageFetchInfo(_tip(t), offset, max_bytes, True)
    return asyncio.run(t.rlm.read(info, t.log()))


def _tier_everything(t: Tiered, records: int = 20) -> bytes:
    """Produce, copy, delete locally; returns the bytes of the segments now only remote."""
    t.produce(records)
    lg = t.log()
    closed = list(lg.segments.values())[:-1]
    data = b"".join(s.log.path.read_bytes() for s in closed)
    t.run()
    assert lg.delete_old_segments() == len(closed)
    lg.local_log.delete_pending_files()
    return data


def test_every_tiered_batch_reads_back_byte_for_byte(tiered: Tiered) -> None:
    t = tiered
    on_disk = _tier_everything(t)
    lg = t.log()
    local_start = lg.local_log_start_offset
    assert local_start > 0 and lg.log_start_offset == 0
    read = bytearray()
    offset = 0
    while offset < local_start:
        result = _read(t, offset, max_bytes=300)  # about one batch per read
        assert result.error is None and result.records
        batches = list(iter_batches(result.records))
        assert batches[0].base_offset <= offset <= batches[0].last_offset
        read += result.records
        offset = batches[-1].next_offset
    assert bytes(read) == on_disk
    values = [r.value for b in iter_batches(read) for r in b]
    assert values == [bytes([i % 251]) * 200 for i in range(local_start)]
    stats = t.rlm.metrics.all_topics
    assert stats.remote_fetch_bytes == len(on_disk) and stats.remote_fetch_errors == 0


def test_reads_start_at_the_batch_holding_the_offset_and_respect_max_bytes(
        tiered: Tiered) -> None:
    t = tiered
    _tier_everything(t)
    result = _read(t, 5, max_bytes=1)  # below one batch: the first batch whole
    batches = list(iter_batches(result.records))
    assert len(batches) == 1 and batches[0].base_offset == 5
    result = _read(t, 5, max_bytes=10_000)
    batches = list(iter_batches(result.records))
    assert batches[0].base_offset == 5 and len(batches) >= 1
    assert len(result.records) <= 10_000
    seg_end = result.segments[0].end_offset
    assert batches[-1].last_offset <= seg_end  # one segment per read, as Kafka


class BrokenStorage:
    def __init__(self, inner: object) -> None:
        self.inner = inner

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        raise RemoteStorageError("connection refused")

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_a_failed_remote_read_is_an_error_result_and_counted(tiered: Tiered) -> None:
    t = tiered
    _tier_everything(t)
    t.rlm.reader.rsm = BrokenStorage(t.rlm.rsm)  # type: ignore[assignment]
    result = _read(t, 0)
    assert isinstance(result.error, RemoteStorageError) and result.records == b""
    assert t.rlm.metrics.topic(TOPIC).remote_fetch_errors == 1


def test_offsets_not_in_remote_storage_read_nothing(tiered: Tiered) -> None:
    t = tiered
    _tier_everything(t)
    result = _read(t, t.log().log_end_offset + 5)
    assert result.error is None and result.records == b"" and result.segments == []
