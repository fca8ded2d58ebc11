"""FileRecords / FileSlice: Kafka's behaviours #23-#25 and the `.log` reading rules (1.7)."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record import MemoryRecords

from tidelog.records import CompressionType, CorruptRecordError, RecordBatchBuilder, build_batch
from tidelog.storage.errors import StorageError
from tidelog.storage.file_records import FileRecords, FileSlice, LogOffsetPosition

VALUES = [b"abcd", b"efgh", b"ijkl"]


def batch(offset: int, *values: bytes, ts: int = 1000, codec: int = 0, epoch: int = -1) -> bytes:
    b = RecordBatchBuilder(codec, base_offset=offset, partition_leader_epoch=epoch)
    for i, v in enumerate(values):
        b.append(ts + i, b"k%d" % i, v)
    return b.build()


@pytest.fixture
def fr(tmp_path: Path) -> Iterator[FileRecords]:
    f = FileRecords.open(tmp_path / "00000000000000000000.log")
    yield f
    f.close_handlers()


def test_append_and_iterate(fr: FileRecords) -> None:
    data = [batch(i, v) for i, v in enumerate(VALUES)]
    positions = []
    for d in data:
        positions.append(fr.size_in_bytes)
        assert fr.append(d) == len(d)
    assert fr.size_in_bytes == sum(map(len, data))
    got = list(fr.batches())
    assert [b.base_offset for b in got] == [0, 1, 2]
    assert [b.position for b in got] == positions
    assert [bytes(b.buf) for b in got] == data
    assert [h.position for h in fr.headers()] == positions
    assert [next(iter(b)).value for b in fr.batches(validate=True)] == VALUES


def test_iteration_over_partial_and_truncation(fr: FileRecords) -> None:
    """A partial trailing batch is invisible (FileRecordsTest#testIterationOverPartialAndTruncation)."""
    full = batch(0, b"hello world")
    fr.append(full)
    for cut in (1, 17, 18, 40, len(full) - 1):
        fr.append(full[:cut])
        assert [b.base_offset for b in fr.batches()] == [0]
        assert [h.base_offset for h in fr.headers()] == [0]
        fr.truncate_to(len(full))


def test_length_below_minimum_is_corrupt(fr: FileRecords) -> None:
    fr.append(batch(0, b"a"))
    good = fr.size_in_bytes
    fr.append(b"\x00" * 30)  # preallocated/crash zeros: length field 0
    with pytest.raises(CorruptRecordError) as e:
        list(fr.batches())
    assert e.value.position == good
    assert str(fr.path) in str(e.value) and f"at byte {good}" in str(e.value)
    with pytest.raises(CorruptRecordError):
        list(fr.headers())


def test_bad_crc_detected_only_when_validating(fr: FileRecords) -> None:
    b = bytearray(batch(0, b"payload"))
    b[-1] ^= 0x01
    fr.append(bytes(b))
    assert len(list(fr.batches())) == 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        list(fr.batches(validate=True))


def test_batches_larger_than_read_chunk(fr: FileRecords) -> None:
    """Batches above the 1 MiB read chunk and chunk-straddling batches come back intact."""
    big = [batch(i * 10, os.urandom(700_000), os.urandom(700_000)) for i in range(3)]
    for d in (big[0], big[1], batch(50, b"x"), big[2]):
        fr.append(d)
    got = [bytes(b.buf) for b in fr.batches(validate=True)]
    assert got == [big[0], big[1], batch(50, b"x"), big[2]]


def test_search_for_offset_with_size(fr: FileRecords) -> None:  # 23
    data = [batch(0, b"a"), batch(1, b"b"), batch(2, b"c"), batch(50, b"d")]
    pos = []
    for d in data:
        pos.append(fr.size_in_bytes)
        fr.append(d)
    assert fr.search_for_offset_with_size(3, 0) == LogOffsetPosition(50, pos[3], len(data[3]))
    assert fr.search_for_offset_with_size(0, 0) == LogOffsetPosition(0, 0, len(data[0]))
    assert fr.search_for_offset_with_size(1, pos[2]) == LogOffsetPosition(2, pos[2], len(data[2]))
    assert fr.search_for_offset_with_size(51, 0) is None


def test_search_inside_multi_record_batch(fr: FileRecords) -> None:
    fr.append(batch(10, b"a", b"b", b"c"))  # offsets 10..12
    found = fr.search_for_offset_with_size(11, 0)
    assert found is not None and found.offset == 12 and found.position == 0


def test_truncate(fr: FileRecords) -> None:  # 24
    data = batch(0, b"a") + batch(1, b"b")
    fr.append(data)
    with pytest.raises(StorageError):
        fr.truncate_to(len(data) + 1)
    with pytest.raises(StorageError):
        fr.truncate_to(-1)
    assert fr.truncate_to(len(data)) == 0
    first = len(batch(0, b"a"))
    assert fr.truncate_to(first) == len(data) - first
    assert fr.path.stat().st_size == first
    assert [b.base_offset for b in fr.batches()] == [0]


def test_preallocate_and_trim_on_close(tmp_path: Path) -> None:  # 25
    path = tmp_path / "p.log"
    f = FileRecords.open(path, preallocate=True, init_size=512 * 1024)
    assert f.size_in_bytes == 0 and path.stat().st_size == 512 * 1024
    data = batch(0, *VALUES)
    f.append(data)
    assert f.size_in_bytes == len(data)
    assert [b.base_offset for b in f.batches()] == [0]  # zeros past the logical end unseen
    f.close()
    assert path.stat().st_size == len(data)  # testPreallocateClearShutdown
    again = FileRecords.open(path, preallocate=True, init_size=512 * 1024)
    assert again.size_in_bytes == len(data)  # an existing file's length is its size
    again.close_handlers()


def test_unclean_preallocated_reopen_sees_zeros(tmp_path: Path) -> None:
    path = tmp_path / "p.log"
    f = FileRecords.open(path, preallocate=True, init_size=4096)
    f.append(batch(0, b"a"))
    f.close_handlers()  # crash: no trim
    again = FileRecords.open(path)
    assert again.size_in_bytes == 4096
    with pytest.raises(CorruptRecordError):
        list(again.batches())
    again.close_handlers()


def test_slice_is_bounded_and_lazy(fr: FileRecords) -> None:
    data = batch(0, b"a") + batch(1, b"b")
    fr.append(data)
    s = fr.slice(10, 10_000)
    assert isinstance(s, FileSlice)
    assert s.position == 10 and s.size == len(data) - 10
    assert s.read() == data[10:]
    fr.append(batch(2, b"c"))
    assert s.size == len(data) - 10  # a slice does not grow with the file
    assert fr.slice(len(data), 5).size == 5
    with pytest.raises(ValueError):
        fr.slice(fr.size_in_bytes + 1, 1)
    with pytest.raises(ValueError):
        fr.slice(0, -1)
    assert FileSlice.empty().read() == b"" and FileSlice.empty().size == 0


def test_slice_sendfile_over_real_socket(fr: FileRecords) -> None:
    data = b"".join(batch(i, b"v" * 100) for i in range(5))
    fr.append(data)
    s = fr.slice(len(batch(0, b"v" * 100)), 10_000)
    a, b = socket.socketpair()
    with a, b:
        sent = os.sendfile(a.fileno(), s.fileno(), s.position, s.size)
        assert sent == s.size
        received = b""
        while len(received) < sent:
            received += b.recv(65536)
    assert received == s.read() == data[s.position :]
    assert [x.base_offset for x in s.batches(validate=True)] == [1, 2, 3, 4]


def test_search_for_timestamp(fr: FileRecords) -> None:
    fr.append(batch(0, b"a", b"b", ts=100, epoch=3))  # ts 100, 101
    pos2 = fr.size_in_bytes
    fr.append(batch(2, b"c", b"d", ts=200, epoch=4))  # ts 200, 201
    r = fr.search_for_timestamp(101, 0, 0)
    assert r is not None and (r.timestamp, r.offset, r.leader_epoch) == (101, 1, 3)
    r = fr.search_for_timestamp(150, 0, 0)
    assert r is not None and (r.timestamp, r.offset, r.leader_epoch) == (200, 2, 4)
    r = fr.search_for_timestamp(100, 0, 3)  # starting offset skips earlier records
    assert r is not None and r.offset == 3
    assert fr.search_for_timestamp(202, 0, 0) is None
    assert fr.search_for_timestamp(100, pos2, 0) is not None
    largest = fr.largest_timestamp_after(0)
    assert (largest.timestamp, largest.offset) == (201, 3)


def test_compressed_batches_roundtrip(fr: FileRecords) -> None:
    for i, codec in enumerate(CompressionType):
        fr.append(batch(i * 3, b"x" * 50, b"y" * 50, codec=int(codec)))
    got = [(b.base_offset, b.compression) for b in fr.batches(validate=True)]
    assert got == [(i * 3, c) for i, c in enumerate(CompressionType)]


def test_rename_and_delete(tmp_path: Path) -> None:
    f = FileRecords.open(tmp_path / "a.log")
    f.append(batch(0, b"a"))
    f.rename_to(tmp_path / "a.log.deleted")
    assert not (tmp_path / "a.log").exists() and (tmp_path / "a.log.deleted").exists()
    f.append(batch(1, b"b"))  # the descriptor survives the rename
    assert [b.base_offset for b in f.batches()] == [0, 1]
    assert f.delete() is True
    assert not (tmp_path / "a.log.deleted").exists()
    assert f.delete() is False


def test_kafka_python_reads_our_log(fr: FileRecords) -> None:
    """Independent reader: kafka-python's MemoryRecords over the raw `.log` bytes."""
    expected = []
    for i in range(20):
        values = [os.urandom(30) for _ in range(i % 4 + 1)]
        base = sum(j % 4 + 1 for j in range(i))
        fr.append(batch(base, *values, ts=5000 + i, codec=(0, 1, 3, 4)[i % 4]))
        expected.extend((base + k, v) for k, v in enumerate(values))
    fr.flush()
    raw = fr.path.read_bytes()
    mr = MemoryRecords(raw)
    got = []
    while True:
        b = mr.next_batch()
        if b is None:
            break
        assert b.validate_crc()
        got.extend((r.offset, r.value) for r in b)
    assert got == expected


def test_header_fields_match_struct(fr: FileRecords) -> None:
    data = build_batch([(7, b"k", b"v")], base_offset=42, producer_id=9, producer_epoch=2, base_sequence=5)
    fr.append(data)
    (h,) = fr.headers()
    assert (h.base_offset, h.producer_id, h.producer_epoch, h.base_sequence) == (42, 9, 2, 5)
    assert h.size == struct.unpack_from(">i", data, 8)[0] + 12
    assert h.max_timestamp == 7 and h.last_offset == 42


def test_io_errors_name_the_file(tmp_path: Path) -> None:
    f = FileRecords.open(tmp_path / "io.log")
    f.append(batch(0, b"a"))
    size = f.size_in_bytes
    os.close(f.fileno())  # the descriptor goes bad underneath, as on a failed disk
    with pytest.raises(OSError) as e:
        f.append(batch(1, b"b"))
    assert e.value.filename == str(tmp_path / "io.log") and "appending" in str(e.value)
    assert f.size_in_bytes == size  # nothing acknowledged
    with pytest.raises(OSError, match="fsync"):
        f.flush()
    with pytest.raises(OSError):
        f.close_handlers()  # closing the bad descriptor fails once...
    f.close_handlers()  # ...and leaves the FileRecords closed
    assert f.closed


def test_file_slice_from_file_records(fr: FileRecords) -> None:
    data = batch(0, b"a") + batch(1, b"b")
    fr.append(data)
    s = FileSlice(fr, 5, 20)
    assert s.read() == data[5:25] and s.path == str(fr.path) and s.fileno() == fr.fileno()


def test_search_reports_corruption(fr: FileRecords) -> None:
    first = batch(0, b"a")
    fr.append(first)
    fr.append(b"\x00" * 40)  # length field 0
    assert fr.search_for_offset_with_size(0, 0) == LogOffsetPosition(0, 0, len(first))
    with pytest.raises(CorruptRecordError) as e:
        fr.search_for_offset_with_size(1, 0)
    assert e.value.position == len(first)
    fr.truncate_to(len(first))
    bad = bytearray(batch(1, b"b"))
    bad[16] = 7  # unknown magic
    fr.append(bytes(bad))
    with pytest.raises(CorruptRecordError, match="magic"):
        fr.search_for_offset_with_size(1, 0)
    fr.truncate_to(len(first))
    fr.append(batch(1, b"b")[:20])  # partial trailing batch: invisible
    assert fr.search_for_offset_with_size(1, 0) is None


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=8), cut=st.integers(0, 10**6))
def test_any_cut_shows_exactly_the_whole_batches(tmp_path_factory: pytest.TempPathFactory,
                                                 sizes: list[int], cut: int) -> None:
    """Wherever a crash cuts the file, iteration yields the whole batches before the cut."""
    data = [batch(i, os.urandom(n)) for i, n in enumerate(sizes)]
    whole = b"".join(data)
    cut %= len(whole) + 1
    path = tmp_path_factory.mktemp("cut") / "00000000000000000000.log"
    path.write_bytes(whole[:cut])
    f = FileRecords.open(path)
    try:
        ends = [sum(map(len, data[: i + 1])) for i in range(len(data))]
        expected = [d for d, end in zip(data, ends, strict=True) if end <= cut]
        assert [bytes(b.buf) for b in f.batches(validate=True)] == expected
        assert [h.size for h in f.headers()] == [len(d) for d in expected]
        found = f.search_for_offset_with_size(len(expected) - 1, 0) if expected else None
        assert (found.offset if found else None) == (len(expected) - 1 if expected else None)
        assert f.search_for_offset_with_size(len(expected), 0) is None
    finally:
        f.close_handlers()
