"""The read of a partition with new records: ``FileRecords.find_batch`` (the offset-index
lookup and the batch-header walk in one native call) against its twin ``find_batch_py``
(OffsetIndex.lookup, then search_for_offset_with_size) on real segment files.

A segment is a run of batches of mixed sizes (one to many records, small and large values)
from a base offset, with a sparse offset index over some of them; then its tail may be cut
inside a batch, a header overwritten (length field, magic byte), or the logical size set
past the bytes on disk. Every target (before the segment, inside any batch, past the end)
and starting position must give the same answer or raise the same error both ways, with
the file in the page cache (the native walk's reads that never wait, the GIL held) or
dropped from it (its blocking reads, the GIL released).
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_core_support import core

from tidelog.records import build_batch
from tidelog.storage import file_records
from tidelog.storage.file_records import FileRecords, LogOffsetPosition
from tidelog.storage.index.offset_index import OffsetIndex

needs_core = pytest.mark.skipif(core is None or not hasattr(core, "find_batch"),
                                reason="native core not built")
SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
BASE = 1000


def batch_at(offset: int, count: int, value_size: int) -> bytes:
    raw = bytearray(build_batch([(1_700_000_000_000 + i, None, b"v" * value_size)
                                 for i in range(count)]))
    struct.pack_into(">q", raw, 0, offset)
    return bytes(raw)


@st.composite
def segment(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, int]], list[int]]:
    """(file bytes, index entries (relative offset, position), each batch's position)."""
    counts = draw(st.lists(st.integers(1, 6), min_size=0, max_size=40))
    sizes = draw(st.lists(st.sampled_from([0, 10, 100, 700, 5000]), min_size=len(counts),
                          max_size=len(counts)))
    data, positions, entries = bytearray(), [], []
    offset = BASE
    gap = draw(st.integers(0, 3))
    every = draw(st.sampled_from([1, 2, 3, 1000]))
    for i, (count, size) in enumerate(zip(counts, sizes, strict=True)):
        positions.append(len(data))
        if i % every == 0 and i > 0:
            entries.append((offset - BASE, len(data)))
        data += batch_at(offset, count, size)
        offset += count + gap
    return bytes(data), entries, positions


def damage(draw: st.DrawFn, data: bytes, positions: list[int]) -> tuple[bytes, int]:
    """The bytes on disk after an optional fault, and the logical size to read up to."""
    kind = draw(st.sampled_from(["none", "none", "cut", "length", "magic", "past", "zeros"]))
    out = bytearray(data)
    size = len(out)
    if kind == "cut" and out:
        del out[draw(st.integers(0, len(out) - 1)):]
        size = len(out)
    elif kind in ("length", "magic") and positions:
        at = draw(st.sampled_from(positions))
        if kind == "length":
            struct.pack_into(">i", out, at + 8, draw(st.sampled_from([-1, 0, 13, 14, 30, 48])))
        else:
            out[at + 16] = draw(st.sampled_from([0, 1, 3]))
    elif kind == "past":
        size = len(out) + draw(st.integers(1, 200))
    elif kind == "zeros":
        out += bytes(draw(st.integers(1, 100)))
        size = len(out)
    return bytes(out), size


def answer(find: Callable[[OffsetIndex, int, int], object], index: OffsetIndex, target: int,
           start: int) -> tuple[str, object]:
    try:
        return "ok", find(index, target, start)
    except Exception as e:  # the same error type and message both ways
        return type(e).__name__, str(e)


@needs_core
@SETTINGS
@given(st.data())
def test_find_batch_matches_its_twin(tmp_path: Path, data: st.DataObject) -> None:
    raw, entries, positions = data.draw(segment())
    on_disk, size = damage(data.draw, raw, positions)
    d = Path(tempfile.mkdtemp(dir=tmp_path))
    log_path = d / f"{BASE:020d}.log"
    log_path.write_bytes(on_disk)
    index = OffsetIndex(d / f"{BASE:020d}.index", BASE, max_index_size=8 * 1024)
    for rel, pos in entries:
        index.append(BASE + rel, pos)
    # the logical size (past the bytes on disk: a short read)
    records = FileRecords(log_path, os.open(log_path, os.O_RDONLY), size)
    cold = data.draw(st.booleans())  # out of the page cache: the walk's blocking reads
    if cold:
        os.fsync(records.fileno())
    try:
        targets = [BASE - 5, BASE, BASE + 2 ** 40, -(2 ** 63)] + [
            data.draw(st.integers(BASE - 3, BASE + 300)) for _ in range(6)]
        starts = [0, data.draw(st.integers(0, max(0, size + 10))), *positions[-1:]]
        for target in targets:
            for start in starts:
                if cold:
                    os.posix_fadvise(records.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                native = answer(records.find_batch, index, target, start)
                twin = answer(records.find_batch_py, index, target, start)
                assert native == twin, (target, start, native, twin)
                if native[0] == "ok" and native[1] is not None:
                    assert isinstance(native[1], LogOffsetPosition)
    finally:
        records.close_handlers()


@needs_core
def test_find_batch_hands_a_bad_header_to_the_twin(tmp_path: Path) -> None:
    """A batch with a bad length field: the native walk hands its start (0) to the twin,
    which raises the error naming the file and the byte position."""
    good = batch_at(BASE, 3, 50)
    bad = bytearray(batch_at(BASE + 3, 1, 10))
    struct.pack_into(">i", bad, 8, 5)
    path = tmp_path / f"{BASE:020d}.log"
    path.write_bytes(good + bad)
    index = OffsetIndex(tmp_path / f"{BASE:020d}.index", BASE, max_index_size=1024)
    records = FileRecords.open(path)
    try:
        assert records.find_batch(index, BASE + 1) == LogOffsetPosition(BASE + 2, 0, len(good))
        assert core.find_batch(*index.valid_entries(), BASE, BASE + 3, 0, records.fileno(),
                               records.size_in_bytes) == 0
        with pytest.raises(Exception, match=f"length field 5.*{len(good)}"):
            records.find_batch(index, BASE + 3)
    finally:
        records.close_handlers()


@needs_core
def test_find_batch_reads_only_the_valid_entries(tmp_path: Path) -> None:
    """Entries past the count given are not looked at (an index's buffer may hold more)."""
    first, second = batch_at(BASE, 2, 20), batch_at(BASE + 2, 2, 20)
    path = tmp_path / f"{BASE:020d}.log"
    path.write_bytes(first + second)
    records = FileRecords.open(path)
    stray = struct.pack(">ii", 2, 7)  # a position inside the first batch
    try:
        args = (BASE, BASE + 3, 0, records.fileno(), records.size_in_bytes)
        assert core.find_batch(stray, 0, *args) == (BASE + 3, len(first), len(second))
        assert core.find_batch(stray, 1, *args) == 7  # from there: the twin's to answer
    finally:
        records.close_handlers()


def test_find_batch_without_the_native_core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    """With no native core the twin answers."""
    monkeypatch.setattr(file_records, "_find_batch", None)
    path = tmp_path / f"{BASE:020d}.log"
    first, second = batch_at(BASE, 2, 20), batch_at(BASE + 2, 2, 20)
    path.write_bytes(first + second)
    index = OffsetIndex(tmp_path / f"{BASE:020d}.index", BASE, max_index_size=1024)
    index.append(BASE + 2, len(first))
    records = FileRecords.open(path)
    try:
        assert records.find_batch(index, BASE + 3) == LogOffsetPosition(
            BASE + 3, len(first), len(second))
        assert records.find_batch(index, BASE + 4) is None
        assert os.path.getsize(path) == records.size_in_bytes
    finally:
        records.close_handlers()
