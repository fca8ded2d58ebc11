"""The C heap of a process that translates: freed blocks kept for the next flush.

Each flush allocates the same large blocks again (the batches read, the columns of the
record walk, the value passes' buffers: megabytes each, through Python's allocator and
the native core's, so glibc's ``malloc``). At glibc's defaults a freed block past the mmap
threshold goes back to the OS at once, and the free top of an arena past the trim threshold
too (a thread's arena with ``MADV_DONTNEED``), so the next flush takes a page fault and a
zeroed page for every 4 KiB of them again: a fifth of a flush's CPU, measured. glibc raises
both thresholds by itself, but only after a block that large was mapped and freed, and only
as high as the largest such block: a flush's blocks of a megabyte or two keep them low.

``keep_freed_heap`` sets them once to where glibc's own adjustment stops (the mmap
threshold at ``DEFAULT_MMAP_THRESHOLD_MAX``, 32 MiB on 64-bit, the trim threshold at twice
that, as the adjustment sets it): blocks up to 32 MiB come from the arenas and an arena
keeps up to 64 MiB free at its top for the next flush instead of returning it. The process
keeps what its flushes used at their peak, as a JVM keeps its heap. Elsewhere than glibc
(musl, macOS) nothing is done."""

from __future__ import annotations

import ctypes
import functools
import logging
import sys

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # what glibc's adjustment sets beside it

@functools.cache
def keep_freed_heap() -> bool:
    """Set glibc's mmap and trim thresholds (once a process); whether they are set."""
    return _set()


def _set() -> bool:
    if sys.platform != "linux":
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (glibc only: musl has mallopt as a no-op)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and (
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1))
    if not ok:
        log.warning("glibc refused the malloc thresholds: translation runs at its defaults")
    return ok
