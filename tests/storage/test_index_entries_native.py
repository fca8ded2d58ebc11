"""The native index entries (the native core's ``index_entries``, what the native plain
append adds a batch's index entries with) against their twin ``index_entries_py``
(``OffsetIndex.append`` then ``TimeIndex.maybe_append``): the same calls on two pairs of
indexes give the same answers and errors, the same entries, last entries and dirty flags,
the same files byte for byte.

Drawn: entries that follow, repeat or go back in offset and timestamp, land outside the
segment's offset range or a 32-bit position, fill the index; truncations, deferred_writes
blocks, an index closed and lazily loaded again, its file removed (the open fails). And the
native path keeps to the Python methods' lock and to a class whose methods changed.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog._native import core
from tidelog.storage import log_plain
from tidelog.storage.index import abstract_index
from tidelog.storage.index.offset_index import OffsetIndex
from tidelog.storage.index.time_index import TimeIndex

pytestmark = pytest.mark.skipif(core is None, reason="the native core is not built")

BASE = 1_000
INT32_MAX = 2**31 - 1

entry_op = st.tuples(
    st.just("entry"),
    st.sampled_from([1] * 6 + [0, -1, 2**31, -BASE - 1]),  # next offset, repeat, back, out
    st.sampled_from([0] * 8 + [INT32_MAX + 1]),  # the position's move (past an int32)
    st.sampled_from([5] * 5 + [0, -3]),  # the timestamp's move
    st.sampled_from([0] * 5 + [-1, -2]),  # the time entry's offset behind the last one
)
ops = st.lists(st.one_of(
    entry_op, entry_op, entry_op, entry_op,
    st.tuples(st.just("truncate_to"), st.integers(0, 12)),
    st.tuples(st.just("deferred"), st.lists(entry_op, max_size=4)),
    st.tuples(st.just("close_handler")),
    st.tuples(st.just("unlink")),
    st.tuples(st.just("trim")),
), min_size=1, max_size=40)


class Pair:
    """An offset and a time index in ``root``, written with ``entries``."""

    def __init__(self, root: Path, entries: Callable[..., None], max_bytes: int) -> None:
        self.root = root
        self.entries = entries
        self.oi = OffsetIndex(root / f"{BASE:020d}.index", BASE, max_index_size=max_bytes)
        self.ti = TimeIndex(root / f"{BASE:020d}.timeindex", BASE, max_index_size=max_bytes)
        self.last, self.position, self.ts = BASE - 1, 0, 100

    def entry(self, d_offset: int, d_position: int, d_ts: int, behind: int) -> tuple[Any, ...]:
        self.last += d_offset
        self.position += 10 + d_position
        self.ts += d_ts
        try:
            self.entries(self.oi, self.ti, self.last, self.position, self.ts,
                         self.last + behind)
        except Exception as e:
            return ("error", type(e).__name__, str(e).replace(str(self.root), "<root>"))
        finally:
            self.position -= d_position  # (a position past an int32 only once)
        return ("ok",)

    def step(self, op: tuple[Any, ...]) -> tuple[Any, ...]:
        if op[0] == "entry":
            return self.entry(*op[1:])
        if op[0] == "deferred":
            with self.oi.deferred_writes(), self.ti.deferred_writes():
                return tuple(self.entry(*e[1:]) for e in op[1])
        if op[0] == "truncate_to":
            self.oi.truncate_to(BASE + op[1])
            self.ti.truncate_to(BASE + op[1])
        elif op[0] == "close_handler":
            self.oi.close_handler()
            self.ti.close_handler()
        elif op[0] == "unlink":
            for idx in (self.oi, self.ti):
                idx.path.unlink(missing_ok=True)
        else:
            self.oi.trim()
            self.ti.trim()
        return ("ok",)

    def state(self) -> tuple[Any, ...]:
        files = {p.name: p.read_bytes() for p in sorted(self.root.iterdir())}
        kept = [(idx._loaded, idx._entries, idx._max_entries, bytes(idx._mmap), idx._dirty)
                for idx in (self.oi, self.ti)]
        return (*kept, self.oi._last_offset if self.oi._loaded else None,
                self.ti._last_entry if self.ti._loaded else None, files)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=ops, max_bytes=st.sampled_from([96, 10_000]))
def test_native_index_entries_are_the_twins(steps: list[tuple[Any, ...]],
                                            max_bytes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "native").mkdir()
        (Path(tmp) / "twin").mkdir()
        native = Pair(Path(tmp) / "native", core.index_entries, max_bytes)
        twin = Pair(Path(tmp) / "twin", log_plain.index_entries_py, max_bytes)
        for op in steps:
            try:
                want = twin.step(op)
            except OSError as e:  # (a trim of a removed file)
                with pytest.raises(type(e)):
                    native.step(op)
                continue
            assert native.step(op) == want
            assert native.state() == twin.state()


def test_the_native_entries_are_written_natively(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Written here, not by the Python methods (their os.open unused); a method changed on
    the class, its calls are the changed method's."""
    pair = Pair(tmp_path, core.index_entries, 10_000)
    pair.oi.lookup(BASE)  # (loaded: an index never loaded is the Python method's)
    pair.ti.lookup(0)
    opened: list[object] = []
    real_open = abstract_index.os.open
    monkeypatch.setattr(abstract_index.os, "open", lambda *a: opened.append(a) or real_open(*a))
    for _ in range(3):
        assert pair.entry(1, 0, 5, 0) == ("ok",)
    assert opened == []
    assert pair.oi.entries == 3 and pair.oi.lookup(BASE + 2).offset == BASE + 2
    assert pair.ti.last_entry == (115, BASE + 2)
    assert (tmp_path / f"{BASE:020d}.index").read_bytes()[16:24] == bytes.fromhex(
        "00000002" "0000001e")  # (relative offset 2 at position 30)
    monkeypatch.setattr(OffsetIndex, "append", _refused)
    assert pair.entry(1, 0, 5, 0) == ("error", "AssertionError", "a Python method called")
    monkeypatch.undo()
    assert pair.entry(0, 0, 5, 0) == ("ok",)  # (the class restored: native again)
    assert opened == [] and pair.oi.entries == 4


def _refused(*_a: Any, **_k: Any) -> None:
    raise AssertionError("a Python method called")


class _Subclassed(OffsetIndex):
    __slots__ = ()
    calls = 0

    def append(self, offset: int, position: int) -> None:
        type(self).calls += 1
        super().append(offset, position)


def test_a_subclass_is_given_to_its_own_methods(tmp_path: Path) -> None:
    oi = _Subclassed(tmp_path / "0.index", 0, max_index_size=800)
    ti = TimeIndex(tmp_path / "0.timeindex", 0, max_index_size=800)
    oi.lookup(0)
    core.index_entries(oi, ti, 5, 0, 10, 5)
    assert _Subclassed.calls == 1 and oi.entries == 1 and ti.entries == 1


class _Lock:
    """An RLock that refuses a try and records the Python methods' blocking acquires."""

    def __init__(self) -> None:
        self.inner = threading.RLock()
        self.tries = self.blocking = 0

    def acquire(self, blocking: bool = True) -> bool:
        self.tries += not blocking
        return False if not blocking else self.inner.acquire()

    def release(self) -> None:
        self.inner.release()

    def __enter__(self) -> _Lock:
        self.blocking += 1
        self.inner.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.release()


def test_a_lock_held_elsewhere_is_waited_for_by_the_python_method(tmp_path: Path) -> None:
    """The native entry takes the index's lock without waiting; refused, the entry is the
    Python method's, which waits for it."""
    pair = Pair(tmp_path, core.index_entries, 10_000)
    pair.oi.lookup(BASE)
    pair.ti.lookup(0)
    locks = []
    for idx in (pair.oi, pair.ti):
        lock = _Lock()
        idx._lock = lock  # type: ignore[assignment]
        locks.append(lock)
    assert pair.entry(1, 0, 5, 0) == ("ok",)
    assert [(lk.tries, lk.blocking) for lk in locks] == [(1, 1), (1, 1)]
    assert pair.oi.entries == 1 and pair.ti.entries == 1
