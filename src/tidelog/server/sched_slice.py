"""The event loop thread's scheduler slice (``tidelog serve`` only, Linux 6.12 and later).

Linux's fair scheduler (EEVDF) gives each task a slice, 0.7-3 ms by default, and picks the
runnable task with the earliest virtual deadline, its slice ahead of it: a task that asks for
a shorter slice (``sched_setattr``'s ``sched_runtime`` of a SCHED_OTHER task) gets an earlier
deadline, and a task woken with a shorter slice than the running one's may preempt it
(``PREEMPT_SHORT``). Its share of the CPU is unchanged: that is its weight (nice), not its
slice. The broker's loop runs in short bursts, one per read of requests (some 30-60 µs of
CPU for a Produce of one small batch), and sleeps in between; on a machine whose cores are
busy (the clients beside it, another process) each wake waited behind the running task for
the rest of its slice. Under rdkafka_performance at 5,000 records/s on one partition
(bench/tail_latency.py, medians of 3 rounds, two sittings, quiet or beside a busy process)
the loop waited 16.6-27.1 µs per record in the run queue (schedstat) with the kernel's slice
against 1.7-13.3 µs with a 100 µs one, its p99 3.3 and 9.2 ms against 1.9 and 5.3.

``tidelog serve`` asks for a 100 µs slice on the loop's thread (``TIDELOG_LOOP_SLICE_US``,
100-100,000 µs, the kernel's bounds; 0 keeps the kernel's), with ``RESET_ON_FORK`` so the
threads it starts later (writers, pools, the scheduler) keep the kernel's default. At 1,000
partitions under a paced producer beside a busy process the loop's wait for a core fell from
23 to 4 µs a record and the p99 from 3.0 to 1.8 ms (docs/operations.md). A loop busy without a
pause (the machine's ceiling) is preempted more often with it: one sitting made 920 k and
1,085 k records/s of 1 KiB with it against 1,082 k and 1,226 k without (a later one, with
longer runs, saw none of it), so while the loop is over half busy the kernel's slice is put
back (server/slice_governor.py; ``TIDELOG_LOOP_SLICE_BUSY``, 1 keeps the short slice). Where
the kernel or a sandbox refuses (an older kernel ignores the field), the broker says so in its
start-up log and runs as before. An embedded broker never touches the scheduler: the process
is not its own.

No library wraps ``sched_setattr`` (``os`` has ``sched_setscheduler``, which cannot carry a
slice), so this calls it through ``ctypes``: ``struct sched_attr`` is part of the kernel's ABI
(include/uapi/linux/sched/types.h).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from collections.abc import Callable
from typing import TypeVar

N = TypeVar("N", int, float)

LOOP_SLICE_US = 100  # serve's; 0: the kernel's
ENV = "TIDELOG_LOOP_SLICE_US"
LOOP_SLICE_MAX_BUSY = 0.5  # of a core, over a second: above it, the kernel's slice again
BUSY_ENV = "TIDELOG_LOOP_SLICE_BUSY"
MIN_US, MAX_US = 100, 100_000  # the kernel's bounds of a custom slice
RESET_ON_FORK = 0x01  # SCHED_FLAG_RESET_ON_FORK
_SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}  # sched_setattr, sched_getattr


class SchedAttr(ctypes.Structure):
    """``struct sched_attr`` (SCHED_ATTR_SIZE_VER1, with the utilization clamps)."""

    _fields_ = [
        ("size", ctypes.c_uint32),
        ("sched_policy", ctypes.c_uint32),
        ("sched_flags", ctypes.c_uint64),
        ("sched_nice", ctypes.c_int32),
        ("sched_priority", ctypes.c_uint32),
        ("sched_runtime", ctypes.c_uint64),
        ("sched_deadline", ctypes.c_uint64),
        ("sched_period", ctypes.c_uint64),
        ("sched_util_min", ctypes.c_uint32),
        ("sched_util_max", ctypes.c_uint32),
    ]


def _syscalls() -> tuple[int, int]:
    """(sched_setattr, sched_getattr)'s numbers here; OSError off Linux or its known CPUs."""
    numbers = _SYSCALLS.get(platform.machine()) if sys.platform.startswith("linux") else None
    if numbers is None:
        raise OSError(f"sched_setattr: not on {sys.platform} {platform.machine()}")
    return numbers


def _call(number: int, *args: object) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, *args) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def thread_attr(tid: int = 0) -> SchedAttr:
    """The scheduling attributes of thread ``tid`` (0: the calling thread); OSError where the
    kernel has none."""
    attr = SchedAttr()
    _call(_syscalls()[1], tid, ctypes.byref(attr), ctypes.sizeof(SchedAttr), 0)
    return attr


def set_thread_slice(slice_us: int) -> None:
    """Ask for ``slice_us`` as the calling thread's slice, its policy, nice and clamps kept,
    not passed to the threads it starts (OSError if refused)."""
    attr = thread_attr()
    attr.size = ctypes.sizeof(SchedAttr)
    attr.sched_flags = RESET_ON_FORK
    attr.sched_runtime = slice_us * 1000
    _call(_syscalls()[0], 0, ctypes.byref(attr), 0)


def loop_slice_us(environ: dict[str, str] | None = None) -> int:
    """The slice the environment names for the loop's thread, µs (LOOP_SLICE_US unless set;
    0: the kernel's). ValueError for a value outside the bounds."""
    slice_us = _setting(environ, ENV, LOOP_SLICE_US, int,
                        "not an integer number of microseconds")
    if slice_us != 0 and not MIN_US <= slice_us <= MAX_US:
        raise ValueError(f"{ENV}={slice_us}: outside {MIN_US}..{MAX_US} µs (0 keeps the "
                         "kernel's)")
    return slice_us


def tune_loop_slice(environ: dict[str, str] | None = None) -> str:
    """On the loop's thread: apply the slice the environment names (``loop_slice_us``);
    what was done, for the start-up log. ValueError for a value outside the bounds."""
    slice_us = loop_slice_us(environ)
    if slice_us == 0:
        return f"the kernel's ({ENV}=0)"
    try:
        set_thread_slice(slice_us)
        got = thread_attr().sched_runtime // 1000
    except OSError as exc:
        return f"the kernel's (sched_setattr refused: {exc})"
    if got != slice_us:  # a kernel before 6.12 keeps no custom slice of a fair task
        return f"the kernel's ({got} µs: this kernel keeps no custom slice)"
    return f"{slice_us} µs"


def loop_slice_max_busy(environ: dict[str, str] | None = None) -> float:
    """The share of a core (over a second) above which the loop's thread gives its short
    slice back (server/slice_governor.py): ``TIDELOG_LOOP_SLICE_BUSY``, LOOP_SLICE_MAX_BUSY
    unless set; 1 keeps the short slice however busy. ValueError outside (0, 1]."""
    busy = _setting(environ, BUSY_ENV, LOOP_SLICE_MAX_BUSY, float, "not a share of a core")
    if not 0 < busy <= 1:
        raise ValueError(f"{BUSY_ENV}={busy:g}: outside (0, 1] (1 keeps the short slice)")
    return busy


def _setting(environ: dict[str, str] | None, name: str, default: N,
             parse: Callable[[str], N], what: str) -> N:
    """The environment's ``name`` (``default`` unless set) parsed; ValueError saying ``what``
    it is not."""
    raw = (os.environ if environ is None else environ).get(name, str(default))
    try:
        return parse(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: {what}") from None


def thread_slice_us() -> int:
    """The calling thread's slice in µs (0 where the kernel has none to say)."""
    try:
        return int(thread_attr().sched_runtime // 1000)
    except OSError:
        return 0
