"""TimeIndex: Kafka's behaviours #12-#18 (TimeIndexTest), plus a struct-level file check."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.storage.errors import CorruptIndexError, InvalidOffsetError
from tidelog.storage.index.time_index import TimeIndex, TimestampOffset

BASE = 45
MAX_ENTRIES = 30


@pytest.fixture
def idx(tmp_path: Path) -> Iterator[TimeIndex]:
    index = TimeIndex(tmp_path / "00000000000000000045.timeindex", BASE, MAX_ENTRIES * 12)
    yield index
    index.close_handler()


def _fill(index: TimeIndex) -> None:
    for i in range(1, MAX_ENTRIES):
        index.maybe_append(10 * i, BASE + 10 * i)


def test_preallocation_size(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "p.timeindex", 0, 10 * 1024 * 1024)
    assert index.max_entries == 873_813  # 10 MiB / 12
    assert index.length == 873_813 * 12
    index.close()
    assert (tmp_path / "p.timeindex").stat().st_size == 0


def test_lookup(idx: TimeIndex) -> None:  # 12
    assert idx.lookup(100) == TimestampOffset(-1, BASE)
    _fill(idx)
    assert idx.lookup(9) == (-1, 45)
    assert idx.lookup(10) == (10, 55)
    assert idx.lookup(25) == (20, 65)
    assert idx.lookup(30) == (30, 75)
    assert idx.lookup(10**9) == (290, 335)


def test_is_full(idx: TimeIndex) -> None:  # 13
    for i in range(1, MAX_ENTRIES - 1):
        idx.maybe_append(10 * i, BASE + 10 * i)
        assert not idx.is_full()
    idx.maybe_append(10 * 29, BASE + 290)
    assert idx.entries == 29 and idx.is_full()


def test_append_rules(idx: TimeIndex) -> None:  # 14
    _fill(idx)
    with pytest.raises(ValueError, match="full"):
        idx.maybe_append(10000, 1000)
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(10000, 280, skip_full_check=True)
    idx.maybe_append(10000, 1000, skip_full_check=True)
    assert idx.last_entry == (10000, 1000)


def test_timestamp_rules(idx: TimeIndex) -> None:  # 14
    idx.maybe_append(100, 50)
    with pytest.raises(RuntimeError):
        idx.maybe_append(99, 51)
    idx.maybe_append(100, 60)  # equal timestamp: ignored
    assert idx.entries == 1 and idx.last_entry == (100, 50)
    idx.maybe_append(101, 60)
    assert idx.entries == 2


def test_last_entry(idx: TimeIndex) -> None:  # 15
    assert idx.last_entry == (-1, BASE)
    idx.maybe_append(1, 46)
    assert idx.last_entry == (1, 46)


def test_truncate(idx: TimeIndex) -> None:  # 16
    _fill(idx)
    idx.truncate_to(100)
    assert idx.entries == 5 and idx.last_entry == (50, 95)
    idx.truncate_to(55)  # first entry's offset
    assert idx.entries == 0 and idx.last_entry == (-1, BASE)


def test_sanity_check(tmp_path: Path) -> None:  # 17
    def write(name: str, entries: list[tuple[int, int]], tail: bytes = b"") -> TimeIndex:
        p = tmp_path / name
        p.write_bytes(b"".join(struct.pack(">qi", t, o) for t, o in entries) + tail)
        return TimeIndex(p, 100, 12 * 10)

    write("ok", [(10, 1), (20, 2)]).sanity_check()
    with pytest.raises(CorruptIndexError, match="timestamp"):
        write("ts", [(10, 1), (5, 2)]).sanity_check()
    with pytest.raises(CorruptIndexError, match="offset"):
        write("off", [(10, -5)]).sanity_check()
    with pytest.raises(CorruptIndexError, match="multiple of 12"):
        write("len", [(10, 1)], b"\x00" * 5).sanity_check()


def test_resize(idx: TimeIndex) -> None:  # 18
    assert idx.resize(360) is False
    assert idx.resize(180) is True
    assert idx.max_entries == 15
    assert idx.resize(720) is True
    assert idx.max_entries == 60


def test_reopen_and_file_bytes(tmp_path: Path) -> None:
    p = tmp_path / "r.timeindex"
    index = TimeIndex(p, 1000, 120)
    index.maybe_append(1_700_000_000_000, 1005)
    index.maybe_append(1_700_000_000_500, 1010)
    index.close()
    raw = p.read_bytes()
    assert len(raw) == 24
    assert struct.unpack(">qiqi", raw) == (1_700_000_000_000, 5, 1_700_000_000_500, 10)
    again = TimeIndex(p, 1000, 120)
    assert again.entries == 2 and again.last_entry == (1_700_000_000_500, 1010)
    assert again.lookup(1_700_000_000_499) == (1_700_000_000_000, 1005)
    again.close_handler()
