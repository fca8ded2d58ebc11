"""A topic's kept quiet answers, for a consumer's sessionless Fetch of many partitions
(server/sessionless_fetches.py), laid out so that checking 1,000 of them stays cheap on a
busy broker.

For each partition index: the leader's ``Log``, the ``state_stamp`` object its answer was
read under, and a fixed-size slot (HW, leader epoch, version, the partition's response
bytes) in one ``bytearray``. A partition's answer is current while its log's
``state_stamp`` *is* that object: the stamp only moves by becoming a new int, and the table
holds the old one (so it is never freed and its identity never reused). The check of one
partition reads the slot, two list items and one attribute of the Log, where reading
``Partition.quiet`` chased eight objects scattered over the heap: with a producer and the
Fetches sharing the event loop, those were cache misses, half a millisecond per Fetch of
1,000 partitions.

``quiet_runs`` scans a topic's request entries (as they came) against the table and answers the quiet
partitions' bytes joined into runs, and the indexes to read (``slow``) or to answer again
(``stale``: their log moved, or nothing kept yet) between them. The C loop
(``tidelog._native`` quiet_runs) and ``quiet_runs_py`` give the same answers.

A leadership change or a new log drops the kept answers (``Partition.drop_quiet`` counts
them in ``Partition.quiet_drops``); the owner of the tables starts them again then.
"""

from __future__ import annotations

import struct

from tidelog._native import core
from tidelog.storage.log import Log

from .cluster.partition import Partition, QuietAnswer

# HW, leader epoch, version (-1: empty), entry length, entry; native order as the C loop
# reads it with memcpy
SLOT = struct.Struct("=qiiB63s")
ENTRY_MAX = 63
_EMPTY = SLOT.pack(0, 0, -1, 0, b"")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class QuietTable:
    """One topic's stores (see the module docstring), indexed by partition; ``parts`` holds
    each hosted Partition (None elsewhere)."""

    __slots__ = ("logs", "parts", "slots", "stamps")

    def __init__(self, parts: list[Partition | None]) -> None:
        self.parts = parts
        self.logs: list[Log | None] = [p.log if p is not None else None for p in parts]
        self.stamps: list[object] = [None] * len(parts)
        self.slots = bytearray(_EMPTY * len(parts))

    def answer(self, index: int, version: int) -> QuietAnswer | None:
        """Ask the partition at ``index`` again (``Partition.quiet_answer``) and keep what it
        answers; None when it has no quiet answer now (not the leader, a transaction open)."""
        part = self.parts[index]
        if part is None:
            return None
        q = part.quiet_answer(version)
        if q is None or len(q.entry) > ENTRY_MAX:
            SLOT.pack_into(self.slots, index * SLOT.size, 0, 0, -1, 0, b"")
            self.stamps[index] = None
            return q
        self.logs[index] = part.log
        self.stamps[index] = q.stamp
        SLOT.pack_into(self.slots, index * SLOT.size, q.high_watermark, q.leader_epoch, version,
                       len(q.entry), q.entry)
        return q


def quiet_runs_py(slots: bytes | bytearray, logs: list[Log | None], stamps: list[object],
                  raw: bytes, size: int, epoch_at: int, offset_at: int, version: int
                  ) -> tuple[list[bytes], list[int], list[int]]:
    """(runs, slow, stale) for a topic's request entries (``raw``: ``size``-byte big-endian
    entries, the partition index first, the current leader epoch at ``epoch_at`` (-1: none
    in this version), the fetch offset at ``offset_at``): in order, the kept bytes of each
    partition read at its HW at its leader epoch (or -1) under a current stamp, joined into
    runs between the others; ``slow`` the indexes (into the entries) of those others, so
    that ``len(runs) == len(slow) + 1``; ``stale`` the ones among them whose slot is empty,
    of another version or of a moved stamp (answer them again before reading them)."""
    if size <= 0 or len(raw) % size or not 4 <= offset_at <= size - 8 or \
            epoch_at + 4 > size or 0 <= epoch_at < 4 or len(stamps) != len(logs) or \
            len(slots) < len(logs) * SLOT.size:
        raise ValueError("quiet_runs: stores or entries of other sizes")
    runs: list[bytes] = []
    slow: list[int] = []
    stale: list[int] = []
    run: list[bytes] = []
    count = len(logs)
    unpack = SLOT.unpack_from
    for i, at in enumerate(range(0, len(raw), size)):
        p = _I32.unpack_from(raw, at)[0]
        log = logs[p] if 0 <= p < count else None
        if log is not None:
            hw, slot_epoch, slot_version, n, entry = unpack(slots, p * SLOT.size)
            epoch = _I32.unpack_from(raw, at + epoch_at)[0] if epoch_at >= 0 else -1
            if slot_version != version or log.state_stamp is not stamps[p]:
                stale.append(i)
            elif hw == _I64.unpack_from(raw, at + offset_at)[0] and epoch in (-1, slot_epoch):
                run.append(entry[:n])
                continue
        runs.append(b"".join(run))
        run = []
        slow.append(i)
    runs.append(b"".join(run))
    return runs, slow, stale


quiet_runs = core.quiet_runs if core is not None else quiet_runs_py
