"""What the scheduler-slice tests share: whether this kernel keeps a custom slice, and a call
run on a thread of its own (so the test process's threads keep their slices)."""

from __future__ import annotations

import platform
import threading
from collections.abc import Callable
from typing import TypeVar

from tidelog.server.sched_slice import thread_attr

T = TypeVar("T")


def kernel_keeps_slices() -> bool:
    """Linux 6.12 and later keep a custom slice of a fair task (EEVDF)."""
    major, minor = (int(x) for x in platform.release().split(".")[:2])
    return (major, minor) >= (6, 12)


def in_thread(fn: Callable[[], T]) -> T:
    """``fn()`` on a new thread, its result."""
    out: list[T] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(30)
    return out[0]


def kernel_slice_ns() -> int:
    """The kernel's slice of a new thread, ns: what a thread keeps unless it asks for one
    (read on a thread of its own: this one may have asked)."""
    return in_thread(lambda: thread_attr().sched_runtime)
