"""The translating process keeps freed blocks of the C heap for the next flush
(iceberg/heap.py): a block a flush allocates again is not faulted in page by page again."""

from __future__ import annotations

import subprocess
import sys

import pytest

# On a thread of its own (as the translation thread, with an arena of its own), "flushes"
# that hold six 2 MiB blocks at once and free them; the minor page faults of the thread over
# the three flushes after the first (transparent huge pages off: a fault a 4 KiB page).
_FLUSHES = """
import ctypes, resource, sys, threading
ctypes.CDLL(None).prctl(41, 1, 0, 0, 0)  # PR_SET_THP_DISABLE
from tidelog.iceberg.heap import keep_freed_heap
if sys.argv[1] == "keep":
    assert keep_freed_heap() and keep_freed_heap()
def flush():
    blocks = [bytearray(2 << 20) for _ in range(6)]
    del blocks
def flushes():
    flush()
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(3):
        flush()
    print(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
thread = threading.Thread(target=flushes)
thread.start()
thread.join()
"""
PAGES = 3 * 6 * (2 << 20) // 4096  # the blocks' pages over the three flushes


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _FLUSHES, mode], capture_output=True,
                         text=True, check=True)
    return int(out.stdout)


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc thresholds")
def test_freed_blocks_are_kept_for_the_next_flush() -> None:
    assert _faults("defaults") >= PAGES // 2  # glibc's defaults: the thread's arena gives
    # them back (or they are unmapped), and each flush faults them in again
    assert _faults("keep") < PAGES // 50  # kept: touched again without a fault
