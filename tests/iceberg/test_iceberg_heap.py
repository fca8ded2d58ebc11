"""The translating process keeps freed blocks of the C heap for the next flush
(iceberg/heap.py): a block a flush allocates again is not faulted in page by page again."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Allocate and touch an 8 MiB block, free it, four times over (as flushes do with their
# buffers); print the minor page faults of the last three rounds.
_ROUNDS = """
import resource, sys
from tidelog.iceberg.heap import keep_freed_heap
if sys.argv[1] == "keep":
    assert keep_freed_heap() and keep_freed_heap()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
block = bytearray(8 << 20)
del block
before = faults()
for _ in range(3):
    block = bytearray(8 << 20)
    del block
print(faults() - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", _ROUNDS, mode], capture_output=True,
                         text=True, check=True)
    return int(out.stdout)


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc thresholds")
def test_freed_blocks_are_kept_for_the_next_flush() -> None:
    defaults, kept = _faults("defaults"), _faults("keep")
    assert defaults >= 500  # glibc's defaults: mapped, unmapped and faulted in again (a
    # fault a 4 KiB page, fewer where transparent huge pages back the block)
    assert kept < defaults // 10  # kept in the arena: touched again without a fault
