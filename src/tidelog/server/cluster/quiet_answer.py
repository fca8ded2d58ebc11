"""A partition's part of a Fetch answer with nothing new, kept while its log has not moved
(``Partition.quiet_answer``)."""

from __future__ import annotations

from typing import NamedTuple


class QuietAnswer(NamedTuple):
    """``Partition.quiet_answer``: valid while the log's ``state_stamp`` is ``stamp`` (and the
    partition's leadership and log unchanged, which drop it)."""

    stamp: int
    high_watermark: int
    leader_epoch: int
    version: int
    entry: bytes  # the partition's bytes in a Fetch response of ``version``
    # where the batch at the HW will start (the active segment's base and the byte
    # position), -1 when not known: a read from there later need not search for it
    segment_base: int = -1
    position: int = -1
    log_start_offset: int = -1  # the log's then (the LSO is the HW: a quiet answer's)
