"""OffsetIndex: Kafka's behaviours #1-#11 (OffsetIndexTest), plus a struct-level file check."""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.storage.errors import CorruptIndexError, IndexOffsetOverflowError, InvalidOffsetError
from tidelog.storage.index.offset_index import OffsetIndex, OffsetPosition

BASE = 45
MAX_SIZE = 30 * 8


@pytest.fixture
def idx(tmp_path: Path) -> Iterator[OffsetIndex]:
    index = OffsetIndex(tmp_path / "00000000000000000045.index", BASE, MAX_SIZE)
    yield index
    index.close_handler()


def test_lazy_creation_and_preallocation(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, BASE, 100)
    assert not path.exists()  # nothing touches the disk until first use
    assert index.entries == 0
    assert path.stat().st_size == 96  # floor(100 / 8) * 8
    assert index.max_entries == 12
    index.close()
    assert path.stat().st_size == 0  # trimmed to entries * 8


def test_max_index_size_below_entry_size_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Invalid max index size"):
        OffsetIndex(tmp_path / "x.index", 0, 7).lookup(0)


def test_empty_lookup_returns_base(idx: OffsetIndex) -> None:  # 1
    for t in (0, BASE, BASE + 1, 10**12):
        assert idx.lookup(t) == OffsetPosition(BASE, 0)


def test_lookup_extreme_cases(idx: OffsetIndex) -> None:  # 2
    for i in range(30):
        idx.append(BASE + i + 1, i)
    assert idx.lookup(BASE) == (45, 0)
    assert idx.lookup(BASE + 30) == (75, 29)
    assert idx.lookup(BASE + 1000) == (75, 29)


def test_random_lookup(idx: OffsetIndex) -> None:  # 2
    rng = random.Random(7)
    offsets = sorted(rng.sample(range(BASE + 1, BASE + 10_000), 30))
    positions = sorted(rng.sample(range(1, 1_000_000), 30))
    for o, p in zip(offsets, positions, strict=True):
        idx.append(o, p)
    for _ in range(200):
        t = rng.randrange(0, BASE + 11_000)
        below = [(o, p) for o, p in zip(offsets, positions, strict=True) if o <= t]
        assert idx.lookup(t) == (below[-1] if below else (BASE, 0))


def test_append_out_of_order(idx: OffsetIndex) -> None:  # 3
    idx.append(51, 0)
    with pytest.raises(InvalidOffsetError):
        idx.append(50, 1)
    with pytest.raises(InvalidOffsetError):
        idx.append(51, 1)  # repeating the last offset
    assert idx.entries == 1


def test_append_too_many(idx: OffsetIndex) -> None:  # 4
    for i in range(30):
        idx.append(BASE + i + 1, i)
    assert idx.is_full()
    with pytest.raises(ValueError, match="full index"):
        idx.append(BASE + 100, 100)


def test_entry_and_overflow(idx: OffsetIndex) -> None:  # 5
    idx.append(BASE + 1, 10)
    idx.append(BASE + 3, 20)
    assert idx.entry(0) == (46, 10)
    assert idx.entry(1) == (48, 20)
    with pytest.raises(ValueError):
        idx.entry(2)


def test_truncate(tmp_path: Path) -> None:  # 6
    index = OffsetIndex(tmp_path / "t.index", 0, 10 * 8)
    for i in range(1, 10):
        index.append(i, i)
    index.truncate_to(12)
    assert index.lookup(10) == (9, 9)
    index.append(10, 10)
    index.truncate_to(10)
    assert index.last_offset == 9 and index.lookup(10) == (9, 9)
    index.append(10, 10)
    index.truncate_to(9)
    assert index.last_offset == 8 and index.lookup(10) == (8, 8)
    index.append(9, 9)
    index.truncate_to(5)
    assert index.last_offset == 4 and index.lookup(10) == (4, 4)
    index.truncate()
    assert index.entries == 0 and index.last_offset == 0
    assert index.lookup(10) == (0, 0)
    index.close_handler()


def test_fetch_upper_bound_offset(idx: OffsetIndex) -> None:  # 7
    assert idx.fetch_upper_bound_offset(OffsetPosition(45, 0), 5) is None  # empty index
    for o, p in ((46, 10), (47, 23), (48, 37)):
        idx.append(o, p)
    f = idx.fetch_upper_bound_offset
    assert f(OffsetPosition(45, 0), 5) == (46, 10)
    assert f(OffsetPosition(45, 0), 10) == (46, 10)
    assert f(OffsetPosition(45, 0), 22) == (47, 23)
    assert f(OffsetPosition(45, 0), 23) == (47, 23)
    assert f(OffsetPosition(46, 10), 24) == (48, 37)
    assert f(OffsetPosition(48, 37), 1) is None
    assert f(OffsetPosition(45, 0), 200) is None


def test_reopen(tmp_path: Path) -> None:  # 8
    path = tmp_path / "r.index"
    index = OffsetIndex(path, BASE, MAX_SIZE)
    index.append(BASE + 5, 100)
    index.append(BASE + 7, 200)
    index.close()
    assert path.stat().st_size == 16
    reopened = OffsetIndex(path, BASE, MAX_SIZE)
    assert reopened.entries == 2
    assert reopened.last_offset == 52
    assert reopened.lookup(BASE + 5) == (50, 100)
    assert reopened.lookup(BASE + 6) == (50, 100)
    assert reopened.lookup(BASE + 7) == (52, 200)
    assert reopened.is_full()
    with pytest.raises(ValueError):
        reopened.append(BASE + 8, 300)
    reopened.close_handler()


def test_sanity_check(tmp_path: Path) -> None:  # 9
    path = tmp_path / "s.index"
    path.write_bytes(struct.pack(">ii", -1, 0))  # last offset = base - 1
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 100, 80).sanity_check()
    ok = tmp_path / "ok.index"
    ok.write_bytes(struct.pack(">ii", 0, 0))  # last offset == base is valid
    OffsetIndex(ok, 100, 80).sanity_check()
    odd = tmp_path / "odd.index"
    odd.write_bytes(struct.pack(">ii", 1, 0) + b"\x00\x00\x00")  # length not a multiple of 8
    with pytest.raises(CorruptIndexError, match="multiple of 8"):
        OffsetIndex(odd, 100, 80).sanity_check()


def test_offset_overflow(idx: OffsetIndex) -> None:  # 10
    assert not idx.can_append_offset(BASE + 2**31)
    assert not idx.can_append_offset(BASE - 1)
    assert idx.can_append_offset(BASE + 2**31 - 1)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(BASE + 2**31, 0)


def test_resize_and_reset(idx: OffsetIndex) -> None:  # 11
    for i in range(5):
        idx.append(BASE + i + 1, i * 10)
    assert idx.resize(MAX_SIZE + 3) is False  # rounds down to the same size
    assert idx.resize(100) is True
    assert idx.length == 96 and idx.max_entries == 12 and idx.entries == 5
    assert idx.lookup(BASE + 5) == (50, 40)
    idx.reset()
    assert idx.entries == 0 and idx.length == MAX_SIZE


def test_file_bytes_are_kafkas(idx: OffsetIndex) -> None:
    idx.append(BASE + 3, 4096)
    idx.append(BASE + 70000, 123456)
    idx.close()
    raw = idx.path.read_bytes()
    assert len(raw) == 16
    assert [struct.unpack_from(">ii", raw, i) for i in (0, 8)] == [(3, 4096), (70000, 123456)]


def test_rename_unloaded_does_not_create(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", 0, 80)
    index.rename_to(tmp_path / "a.index.deleted")
    assert not (tmp_path / "a.index").exists() and not (tmp_path / "a.index.deleted").exists()
    assert index.path.name == "a.index.deleted"


@settings(max_examples=80, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["append", "truncate", "lookup", "reopen"]),
                                st.integers(0, 300)), max_size=60))
def test_offset_index_matches_sorted_list(tmp_path_factory: pytest.TempPathFactory,
                                          steps: list[tuple[str, int]]) -> None:
    path = tmp_path_factory.mktemp("oi") / "x.index"
    index = OffsetIndex(path, BASE, 64 * 8)
    model: list[tuple[int, int]] = []
    try:
        for op, n in steps:
            if op == "append" and len(model) < 64:
                o = (model[-1][0] if model else BASE) + 1 + n % 5
                p = (model[-1][1] if model else 0) + n
                index.append(o, p)
                model.append((o, p))
            elif op == "truncate":
                index.truncate_to(BASE + n)
                model = [e for e in model if e[0] < BASE + n]
            elif op == "reopen":
                index.close()
                index = OffsetIndex(path, BASE, 64 * 8)
                assert index.entries == len(model)
                index.resize(64 * 8)
            t = BASE + n - 5
            below = [e for e in model if e[0] <= t]
            assert index.lookup(t) == (below[-1] if below else (BASE, 0))
            assert index.last_offset == (model[-1][0] if model else BASE)
    finally:
        index.close_handler()
