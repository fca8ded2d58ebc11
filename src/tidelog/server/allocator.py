"""glibc malloc settings for the broker process (``tidelog serve`` only).

A Produce request of ~1 MB is received into a buffer of its size, decoded and written out,
then freed. glibc serves an allocation that large with a fresh ``mmap`` and returns it with
``munmap`` when it is freed (its dynamic threshold moves, but heap trimming then hands the
memory back), so every request touched ~256 new pages: one minor page fault and one zeroed
page per 4 KiB received, about 1/3 of the broker's CPU at 100 B records (bench/native.py,
section 3: 0.17 -> 0.11 CPU-s per million records, 30,000 -> 0 page faults per 100 MB).

Here frames below ``MMAP_THRESHOLD`` come from the heap and up to ``TRIM_THRESHOLD`` of freed
heap stays mapped for the next request, as a JVM broker keeps its heap. The process-wide
setting belongs to the process's owner, so only ``serve`` applies it, never an embedded
broker. Set any ``MALLOC_*_`` variable (glibc's own tunables) or
``TIDELOG_MALLOC_TUNING=0`` to keep glibc's defaults.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable

MMAP_THRESHOLD = 4 << 20  # frames below this reuse heap memory
TRIM_THRESHOLD = 64 << 20  # freed heap kept for the next requests, at most
TOP_PAD = 16 << 20  # heap grown by this much at a time
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
DISABLE_ENV = "TIDELOG_MALLOC_TUNING"


def tune_allocator(environ: dict[str, str] | None = None) -> str:
    """Apply the settings above if this is glibc and nobody chose otherwise: what was done."""
    env = os.environ if environ is None else environ
    if env.get(DISABLE_ENV, "1") == "0":
        return f"glibc defaults ({DISABLE_ENV}=0)"
    chosen = sorted(k for k in env if k.startswith("MALLOC_") and k.endswith("_"))
    if chosen:
        return f"glibc defaults with {', '.join(chosen)} from the environment"
    mallopt = _mallopt()
    if mallopt is None:
        return "the platform's allocator, untuned (not glibc)"
    for param, value in ((_M_MMAP_THRESHOLD, MMAP_THRESHOLD),
                         (_M_TRIM_THRESHOLD, TRIM_THRESHOLD), (_M_TOP_PAD, TOP_PAD)):
        if mallopt(param, value) != 1:
            return f"glibc defaults (mallopt({param}, {value}) refused)"
    return (f"glibc, mmap threshold {MMAP_THRESHOLD >> 20} MiB, "
            f"trim threshold {TRIM_THRESHOLD >> 20} MiB")


def _mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt``, or None on another C library (musl has no such tunables)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        if not hasattr(libc, "gnu_get_libc_version"):
            return None
        fn = libc.mallopt
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn
