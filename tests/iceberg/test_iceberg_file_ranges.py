"""A flush's batches as ranges of a real segment file: adjacent batches are one range, a batch
left out (aborted, control) splits them; the table side reads exactly the batches named, and a
file truncated or rewritten between the broker's look and the read fails the read instead of
handing the table other bytes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.iceberg.file_ranges import (
    FileRange,
    StaleRange,
    merge,
    ranges_of,
    read_ranges,
)
from tidelog.records.batch import batch_views, iter_batches
from tidelog.records.builder import RecordBatchBuilder
from tidelog.records.errors import CorruptRecordError
from tidelog.storage.file_records import BatchHeader, FileRecords


def batch(base: int, n: int, tag: bytes = b"v") -> bytes:
    b = RecordBatchBuilder(base_offset=base)
    b.extend((1_700_000_000_000 + i, b"k%d" % i, tag + b"%d" % (base + i)) for i in range(n))
    return b.build()


@pytest.fixture
def segment(tmp_path: Path) -> Iterator[tuple[int, list[bytes], list[BatchHeader]]]:
    batches = [batch(0, 3), batch(3, 4), batch(7, 2), batch(9, 5)]
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"".join(batches))
    fd = os.open(path, os.O_RDWR)
    try:
        heads = list(FileRecords(path, fd, path.stat().st_size).headers(0))
        yield fd, batches, heads
    finally:
        os.close(fd)


def test_adjacent_batches_are_one_range_and_a_left_out_one_splits_them(
        segment: tuple[int, list[bytes], list[BatchHeader]]) -> None:
    fd, batches, heads = segment
    assert ranges_of(fd, heads) == [FileRange(fd, 0, sum(map(len, batches)), 0, 14)]
    kept = [heads[0], heads[1], heads[3]]  # the third left out (say, an aborted one)
    ranges = ranges_of(fd, kept)
    assert ranges == [FileRange(fd, 0, len(batches[0]) + len(batches[1]), 0, 7),
                      FileRange(fd, heads[3].position, len(batches[3]), 9, 14)]
    assert read_ranges(ranges) == batches[0] + batches[1] + batches[3]


def test_reads_in_turn_join_where_they_meet(
        segment: tuple[int, list[bytes], list[BatchHeader]]) -> None:
    fd, _, heads = segment
    ranges = ranges_of(fd, heads[:1])
    merge(ranges, ranges_of(fd, heads[1:2]))  # the next read starts where the last ended
    assert ranges == ranges_of(fd, heads[:2])
    merge(ranges, ranges_of(fd + 1000, heads[2:3]))  # another file: a range of its own
    assert len(ranges) == 2


def test_a_file_truncated_before_the_read_fails_it(
        segment: tuple[int, list[bytes], list[BatchHeader]]) -> None:
    fd, _, heads = segment
    ranges = ranges_of(fd, heads)
    os.ftruncate(fd, heads[2].position)  # a follower's truncation, say
    with pytest.raises(StaleRange, match="truncated"):
        read_ranges(ranges)


def test_a_file_rewritten_before_the_read_fails_it(
        segment: tuple[int, list[bytes], list[BatchHeader]]) -> None:
    fd, batches, heads = segment
    ranges = ranges_of(fd, heads[2:])
    # other batches of the same sizes where the broker saw offsets 7..13
    os.pwrite(fd, batch(20, 2) + batch(22, 5), heads[2].position)
    with pytest.raises(StaleRange, match="changed"):
        read_ranges(ranges)
    os.pwrite(fd, batches[2] + batches[3], heads[2].position)
    assert read_ranges(ranges) == batches[2] + batches[3]


def _walk_reference(data: bytes) -> tuple[list[bytes], str | None]:
    """iter_batches(validate=False)'s batches of ``data`` and the error it raises."""
    out: list[bytes] = []
    try:
        for b in iter_batches(data, validate=False):
            out.append(bytes(b.buf))
    except CorruptRecordError as exc:
        return out, str(exc)
    return out, None


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(0, 4), min_size=0, max_size=5), cut=st.integers(0, 400),
       flips=st.lists(st.tuples(st.integers(0, 5), st.sampled_from([8, 9, 10, 11, 16, 30]),
                                st.integers(0, 15) | st.integers(0, 255)), max_size=3))
def test_the_batch_walk_is_iter_batches_without_its_objects(
        sizes: list[int], cut: int, flips: list[tuple[int, int, int]]) -> None:
    """batch_views gives iter_batches' batches (validate=False) of any bytes: the same
    batches, a partial trailing one left out, and the same error (message and position) for
    a bad length field or magic, whatever header bytes (the length field, the magic, another)
    are changed or the end cut."""
    batches = [batch(10 * i, n + 1) for i, n in enumerate(sizes)]
    starts = [sum(map(len, batches[:i])) for i in range(len(batches))]
    data = bytearray(b"".join(batches))
    for which, at, value in flips:
        if which < len(starts):
            data[starts[which] + at] = value
    data = data[:max(0, len(data) - cut)] if cut % 3 == 0 else data
    want, error = _walk_reference(bytes(data))
    if error is None:
        assert [bytes(v) for v in batch_views(data)] == want
    else:
        with pytest.raises(CorruptRecordError) as raised:
            batch_views(data)
        assert str(raised.value) == error
