"""The OS priority of the translation and maintenance threads: below the event loop's, so
that on a machine with no core to spare the scheduler gives the produce path the CPU first
and translation the rest (its target lag gives it seconds of slack). Redpanda does the same
with its datalake work: a Seastar scheduling group of fewer shares than the produce path's.

On Linux a thread has a nice value of its own (``setpriority(PRIO_PROCESS, tid)`` names one
thread; raising it needs no privilege), and threads it starts inherit it: Polars' and
pyarrow's pools, when a flush starts them first. Elsewhere PRIO_PROCESS names the whole
process, so nothing is done there."""

from __future__ import annotations

import logging
import os
import sys
import threading

log = logging.getLogger(__name__)

MAX_NICE = 19  # the lowest priority Linux has


def lower_thread_priority(increment: int) -> int | None:
    """Raise the calling thread's nice value by ``increment`` (capped at 19); returns the
    nice value it has now (None: not Linux, or ``increment`` <= 0, or the OS refused)."""
    if increment <= 0 or sys.platform != "linux":
        return None
    tid = threading.get_native_id()
    try:
        nice = min(MAX_NICE, os.getpriority(os.PRIO_PROCESS, tid) + increment)
        os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError as exc:  # a seccomp profile may refuse it: translation runs as it is
        log.warning("could not lower the priority of thread %s: %s",
                    threading.current_thread().name, exc)
        return None
    return nice
