"""The interpreter's switch interval while translation runs Python beside the event loop.

Translation runs in the broker's process, on threads of its own; much of a flush is Python
(reading the committed batches, sorting them by codec, the Iceberg commit, the catalog's
SQL) and holds the interpreter lock while it runs. The event loop takes the lock for each
callback it runs (uvloop runs libuv without it and takes it per callback); when a flush
holds it, the loop waits until the flush's thread is asked to let go, which CPython does
once the waiter has waited the switch interval (``sys.setswitchinterval``: 5 ms by
default). A produce request takes the lock several times (read, handler, write), and each
of those waits could add up to 5 ms while a flush runs. Measured with a 1 ms timer on the
broker's loop while 100,000-record Avro flushes ran (4 rounds a setting, alternated, on a
loaded 2-core machine): the loop woke 1.2 ms late on average with the default (p90 4 ms),
0.3 ms at 0.5 ms (p90 1 ms); the flushes took as long.

While at least one flush or maintenance pass of any broker of the process runs, the switch
interval is at most ``TRANSLATION_SWITCH_INTERVAL_S``; the last one to finish puts the
interval it found back, unless someone else changed it meanwhile (then theirs stays). A
shorter interval costs a lock hand-over (a few microseconds) per interval when two threads
want the lock: a fraction of a percent of a core at 0.5 ms."""

from __future__ import annotations

import sys
import threading
from types import TracebackType

TRANSLATION_SWITCH_INTERVAL_S = 0.0005


class SwitchInterval:
    """A context manager any number of threads may be inside at once: the switch interval
    is at most ``seconds`` while one is."""

    def __init__(self, seconds: float = TRANSLATION_SWITCH_INTERVAL_S) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._inside = 0
        self._saved = 0.0  # the interval found when the first one entered
        self._set: float | None = None  # the interval set then (None: it was short enough)

    def __enter__(self) -> SwitchInterval:
        with self._lock:
            if not self._inside:
                self._saved = sys.getswitchinterval()
                self._set = None
                if self._saved > self.seconds:
                    sys.setswitchinterval(self.seconds)
                    # what the interpreter reports back (it rounds to its own unit)
                    self._set = sys.getswitchinterval()
            self._inside += 1
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        with self._lock:
            self._inside -= 1
            if not self._inside and self._set is not None:
                if sys.getswitchinterval() == self._set:  # not changed by anyone since
                    sys.setswitchinterval(self._saved)
                self._set = None


TRANSLATING = SwitchInterval()  # one for the process: the interval is the process's
