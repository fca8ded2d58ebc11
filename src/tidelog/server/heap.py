"""The serving process's long-lived heap, kept out of the cyclic collector's way.

CPython's full collection walks every tracked object that is not frozen, on the thread that
allocated past the threshold: here the event loop. Start-up freezes what it made
(cli/serve.py), but partitions hosted later are not: a broker leading 1,000 partitions holds
about 140,000 tracked objects for them (logs, segments, indexes, locks, bound callbacks), and
a full collection of those took 28 ms idle and 50 to 58 ms under a produce load, every 30 to
60 s, while no request was read. A partition's objects live as long as it is hosted, so
``HeapFreezer`` collects and freezes (``gc.freeze``) once the partitions hosted here changed
and then held still for a check; when some were dropped it unfreezes first and collects in
full, so their cycles are collected rather than kept for ever. A full collection then walks
only what serving made since the last freeze.

When partitions were only made, it collects the young generations alone before freezing (as
start-up freezes without a collection, cli/serve.py): a full collection there walked the
new partitions' objects, 79 ms on the loop at 1,000 partitions under a produce load, to find
some 12 objects; what it would have found of the old generation stays frozen until a drop.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

CHECK_S = 5.0  # how often the hosted partitions are compared with the last freeze

Counts = tuple[int, int]  # partitions made here, partitions dropped here (ever)


class HeapFreezer:
    """``counts`` says how many partitions were made and dropped here so far
    (ReplicaManager.partitions_made / partitions_dropped)."""

    def __init__(self, counts: Callable[[], Counts], check_s: float = CHECK_S) -> None:
        self._counts = counts
        self._check_s = check_s
        self._frozen_at = self._seen = counts()
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._handle = asyncio.get_running_loop().call_later(self._check_s, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        self.check()
        self.start()

    def check(self) -> bool:
        """Freeze if the hosted partitions changed and then held still since the last check
        (a topic's partitions arrive over several requests); True if it froze."""
        now = self._counts()
        settled, self._seen = now == self._seen, now
        if now == self._frozen_at or not settled:
            return False
        started = time.perf_counter()
        if now[1] != self._frozen_at[1]:
            gc.unfreeze()  # the dropped partitions' cycles become collectable again
            gc.collect()
        else:  # only made: their objects are not garbage, and the old heap's walk is skipped
            gc.collect(1)
        gc.freeze()
        self._frozen_at = now
        if log.isEnabledFor(logging.DEBUG):  # (the count walks every frozen object: 18 ms
            # for 2 million, on the loop)
            log.debug("froze the heap after hosting changes (%d objects frozen, %.1f ms)",
                      gc.get_freeze_count(), (time.perf_counter() - started) * 1000)
        return True
