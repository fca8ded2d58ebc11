"""HeapFreezer: the heap is frozen once the hosted partitions changed and held still, and a
dropped partition's cycles are collected rather than kept frozen for ever."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator

import pytest

from tidelog.server.heap import HeapFreezer


class Cyclic:
    """An object only the cyclic collector can free once dropped (it refers to itself)."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the session collects as usual


def _frozen(obj: object) -> bool:
    return all(o is not obj for o in gc.get_objects())  # a frozen object is in no generation


def test_nothing_changed_nothing_frozen() -> None:
    counts = (3, 0)
    freezer = HeapFreezer(lambda: counts)
    for _ in range(3):
        assert not freezer.check()
    assert gc.get_freeze_count() == 0


def test_freezes_after_the_partitions_held_still() -> None:
    counts = [0, 0]
    freezer = HeapFreezer(lambda: (counts[0], counts[1]))
    counts[0] = 1000  # a topic's partitions were made
    kept = Cyclic()
    assert not freezer.check()  # still arriving, maybe
    assert not _frozen(kept)
    assert freezer.check()  # held still for a check: frozen
    assert _frozen(kept)
    assert gc.get_freeze_count() > 0
    assert not freezer.check()  # and not again until something changes


def _frozen_dead_cycle(counts: list[int], freezer: HeapFreezer) -> weakref.ref[Cyclic]:
    """A cycle frozen by a hosting change, then dropped: a weak reference to it."""
    partition = Cyclic()
    gone = weakref.ref(partition)
    counts[0] += 1
    freezer.check()
    assert freezer.check()
    assert _frozen(partition)
    del partition  # its partition was dropped: garbage in a cycle, but frozen
    gc.collect()
    assert gone() is not None  # a frozen cycle survives a full collection
    return gone


def test_a_drop_unfreezes_so_the_dropped_cycles_are_collected() -> None:
    counts = [0, 0]
    freezer = HeapFreezer(lambda: (counts[0], counts[1]))
    gone = _frozen_dead_cycle(counts, freezer)
    counts[1] = 1
    freezer.check()
    assert freezer.check()
    assert gone() is None  # unfrozen, then collected, before the heap froze again


def test_growth_alone_does_not_unfreeze() -> None:
    """Only a drop pays for the full walk of the old heap: made partitions add to it."""
    counts = [0, 0]
    freezer = HeapFreezer(lambda: (counts[0], counts[1]))
    gone = _frozen_dead_cycle(counts, freezer)
    counts[0] += 1
    freezer.check()
    assert freezer.check()
    assert gone() is not None  # not unfrozen: the collection before this freeze missed it


def _generations_collected(run: Callable[[], object]) -> list[int]:
    """The generations the cyclic collector walked while ``run`` ran."""
    seen: list[int] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.callbacks.append(note)
    try:
        run()
    finally:
        gc.callbacks.remove(note)
    return seen


def test_growth_alone_skips_the_full_walk_but_not_the_young_garbage() -> None:
    """Made partitions are not garbage: the freeze after them walks the young generations
    only (a full walk cost 79 ms on the loop at 1,000 partitions), and what just became
    garbage there is still collected rather than frozen."""
    counts = [0, 0]
    freezer = HeapFreezer(lambda: (counts[0], counts[1]))
    counts[0] = 1000
    freezer.check()
    young = Cyclic()
    gone = weakref.ref(young)
    del young
    walked = _generations_collected(freezer.check)
    assert walked and max(walked) <= 1
    assert gone() is None
    assert gc.get_freeze_count() > 0


def test_a_drop_walks_the_whole_heap() -> None:
    counts = [0, 0]
    freezer = HeapFreezer(lambda: (counts[0], counts[1]))
    _frozen_dead_cycle(counts, freezer)
    counts[1] = 1
    freezer.check()
    assert 2 in _generations_collected(freezer.check)
