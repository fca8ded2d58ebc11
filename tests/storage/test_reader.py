"""storage/reader.py over partition dirs written in Kafka's layout (real files)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tidelog.records import CompressionType, CorruptRecordError, RecordBatchBuilder
from tidelog.storage.reader import LogDirReader, PartitionReader
from tidelog.util.topic_partition import TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
from kafka_layout import PartitionWriter, write_partition


def _rows(n: int, start: int = 0, ts0: int = 1_000_000) -> list[tuple]:
    return [
        (ts0 + i, f"k{i}".encode(), f"value-{i}".encode() * 3, [("h", str(i).encode())])
        for i in range(start, start + n)
    ]


def _batches(total: int, per_batch: int) -> list[list[tuple]]:
    return [_rows(per_batch, s) for s in range(0, total, per_batch)]


@pytest.fixture
def multi_segment(tmp_path: Path) -> PartitionWriter:
    return write_partition(
        tmp_path / "orders-3",
        _batches(2000, 10),
        segment_bytes=16 * 1024,
        index_interval_bytes=1024,
        preallocate_index_entries=100,
    )


@pytest.mark.parametrize("codec", list(CompressionType))
def test_reads_every_record_in_order(tmp_path: Path, codec: CompressionType) -> None:
    write_partition(tmp_path / "t-0", _batches(300, 7), compression=codec, segment_bytes=4096)
    reader = PartitionReader(tmp_path / "t-0")
    assert len(reader.segments()) > 1 or codec != CompressionType.NONE
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for _, r in reader.read_records()]
    want = [(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(r for b in _batches(300, 7) for r in b)]
    assert got == want


def test_seek_uses_index_and_ranges_are_exact(multi_segment: PartitionWriter) -> None:
    reader = PartitionReader(multi_segment.dir)
    assert reader.topic_partition == TopicPartition("orders", 3)
    assert len(reader.segments()) >= 5
    for start, end in [(0, 1), (5, 17), (999, 1234), (1995, 2000), (1500, None), (2000, None)]:
        offsets = [r.offset for _, r in reader.read_records(start, end)]
        assert offsets == list(range(start, 2000 if end is None else end))


def test_seek_starts_near_target_not_at_segment_start(multi_segment: PartitionWriter) -> None:
    reader = PartitionReader(multi_segment.dir)
    seg = [s for s in reader.segments() if s.base_offset <= 1500][-1]
    first = next(reader.read_batches(1500))
    assert first.base_offset <= 1500 <= first.last_offset
    assert first.position > 0 or seg.base_offset == first.base_offset


def test_earliest_latest_and_empty_active_segment(tmp_path: Path, multi_segment: PartitionWriter) -> None:
    reader = PartitionReader(multi_segment.dir)
    assert (reader.earliest_offset(), reader.latest_offset()) == (0, 2000)
    # an empty active segment (just rolled): LEO is its base offset
    (multi_segment.dir / f"{2000:020d}.log").write_bytes(b"")
    assert reader.latest_offset() == 2000
    empty = tmp_path / "e-0"
    empty.mkdir()
    (empty / f"{42:020d}.log").write_bytes(b"")
    assert (PartitionReader(empty).earliest_offset(), PartitionReader(empty).latest_offset()) == (42, 42)


def test_log_start_offset_checkpoint_is_honoured(tmp_path: Path) -> None:
    write_partition(tmp_path / "t-0", _batches(50, 5))
    (tmp_path / "log-start-offset-checkpoint").write_text("0\n1\nt 0 20\n")
    reader = PartitionReader(tmp_path / "t-0")
    assert reader.earliest_offset() == 20


def test_offset_for_timestamp(multi_segment: PartitionWriter) -> None:
    reader = PartitionReader(multi_segment.dir)
    ts0 = 1_000_000
    for target, want in [(0, 0), (ts0, 0), (ts0 + 1, 1), (ts0 + 1234, 1234), (ts0 + 1999, 1999)]:
        assert reader.offset_for_timestamp(target) == (want, ts0 + want)
    assert reader.offset_for_timestamp(ts0 + 2000) is None


def test_offset_for_timestamp_non_monotonic(tmp_path: Path) -> None:
    w = PartitionWriter(tmp_path / "t-0", index_interval_bytes=10)
    w.append([(500, None, b"a", [])])
    w.append([(100, None, b"b", []), (900, None, b"c", [])])
    w.append([(300, None, b"d", [])])
    w.flush()
    reader = PartitionReader(w.dir)
    assert reader.offset_for_timestamp(200) == (0, 500)
    assert reader.offset_for_timestamp(600) == (2, 900)


def test_partial_trailing_batch_is_invisible(tmp_path: Path) -> None:
    w = write_partition(tmp_path / "t-0", _batches(100, 10))
    log = w.dir / f"{0:020d}.log"
    full = log.read_bytes()
    extra = RecordBatchBuilder(base_offset=100)
    extra.append(1, b"k", b"v" * 500)
    tail = extra.build()
    for cut in (1, 17, 18, 61, len(tail) - 1):
        log.write_bytes(full + tail[:cut])
        reader = PartitionReader(w.dir)
        assert [r.offset for _, r in reader.read_records()] == list(range(100))
        assert reader.latest_offset() == 100
    log.write_bytes(full + tail)
    assert PartitionReader(w.dir).latest_offset() == 101


def test_torn_final_batch_with_bad_crc_is_invisible_but_inner_corruption_raises(tmp_path: Path) -> None:
    w = write_partition(tmp_path / "t-0", _batches(30, 10))
    log = w.dir / f"{0:020d}.log"
    data = bytearray(log.read_bytes())
    data[-1] ^= 0xFF  # last batch: complete length, bytes not all there yet
    log.write_bytes(bytes(data))
    for chunk in (1 << 20, len(data)):  # also when a read returns exactly the bytes asked for
        reader = PartitionReader(w.dir, chunk_bytes=chunk)
        assert [r.offset for _, r in reader.read_records()] == list(range(20))
    data[-1] ^= 0xFF
    data[70] ^= 0xFF  # inside the first batch
    log.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError):
        list(PartitionReader(w.dir).read_records())


def test_zero_filled_preallocated_tail_ends_the_log(tmp_path: Path) -> None:
    w = write_partition(tmp_path / "t-0", _batches(40, 10))
    log = w.dir / f"{0:020d}.log"
    log.write_bytes(log.read_bytes() + b"\0" * 4096)
    reader = PartitionReader(w.dir)
    assert [r.offset for _, r in reader.read_records()] == list(range(40))
    assert reader.latest_offset() == 40


def test_small_chunks_and_large_batches(tmp_path: Path) -> None:
    big = [[(1, b"k", os.urandom(5000), [])] for _ in range(5)]
    write_partition(tmp_path / "t-0", big)
    reader = PartitionReader(tmp_path / "t-0", chunk_bytes=100)
    assert [r.value for _, r in reader.read_records()] == [b[0][2] for b in big]


def test_concurrent_append_never_yields_torn_batch(tmp_path: Path) -> None:
    """Appends in small writes interleaved with reads: every read sees whole batches only."""
    d = tmp_path / "t-0"
    d.mkdir()
    log = d / f"{0:020d}.log"
    log.write_bytes(b"")
    offset = 0
    with open(log, "ab", buffering=0) as f:
        for n in range(60):
            b = RecordBatchBuilder(CompressionType.GZIP, base_offset=offset)
            for i in range(n % 7 + 1):
                b.append(i, None, f"{offset + i}".encode())
            raw = b.build()
            for cut in range(0, len(raw), 13):
                f.write(raw[cut : cut + 13])
                values = [int(r.value) for _, r in PartitionReader(d).read_records()]
                assert values == list(range(len(values)))
                assert len(values) in (offset, offset + n % 7 + 1)
            offset += n % 7 + 1
    assert PartitionReader(d).latest_offset() == offset


def test_log_dir_reader_discovers_and_skips(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_partition(a / "t-0", _batches(5, 5))
    write_partition(b / "t-1", _batches(5, 5))
    write_partition(b / "u-0", _batches(5, 5))
    write_partition(a / "t-2.0123456789abcdef0123456789abcdef-delete", _batches(5, 5))
    write_partition(a / "t-3.0123456789abcdef0123456789abcdef-future", _batches(5, 5))
    write_partition(a / "__cluster_metadata-0", _batches(5, 5))
    (a / "meta.properties").write_text("x")
    (a / "not-a-partition-dir").mkdir()
    reader = LogDirReader([a, b])
    assert reader.topics() == {"t": [0, 1], "u": [0]}
    assert reader.partition(TopicPartition("u", 0)).latest_offset() == 5
    write_partition(b / "t-0", _batches(5, 5))
    with pytest.raises(ValueError, match="two log dirs"):
        reader.partitions()
    with pytest.raises(FileNotFoundError):
        LogDirReader(tmp_path / "missing")


def test_reader_never_writes(multi_segment: PartitionWriter) -> None:
    before = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in multi_segment.dir.iterdir()}
    reader = PartitionReader(multi_segment.dir)
    list(reader.read_records(100, 1900))
    reader.offset_for_timestamp(1_000_500)
    reader.latest_offset()
    after = {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in multi_segment.dir.iterdir()}
    assert before == after
