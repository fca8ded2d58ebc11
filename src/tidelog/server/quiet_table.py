"""A topic's kept quiet answers, for a consumer's sessionless Fetch of many partitions
(server/sessionless_fetches.py), laid out so that checking 1,000 of them stays cheap on a
busy broker.

One fixed-size slot per partition index in one ``bytearray``: the leader's Log's
``state_stamp`` as it is now (the Log writes it there as it moves: ``mirror_stamp``), the
stamp its answer was read under, HW, leader epoch, version and the partition's response
bytes. A partition's answer is current while the two stamps are equal (a Log's stamp never
moves back). The check of one partition reads its slot and nothing else: the slots lie side
by side, where reading each Log's stamp chased three objects scattered over the heap (the
Log, its attribute values, the stamp), cache misses on a broker whose producer shares the
loop: half a millisecond per Fetch of 1,000 partitions.

``quiet_runs`` scans a topic's request entries (as they came) against the table and answers
the quiet partitions' bytes joined into runs, and the indexes to read (``slow``) or to
answer again (``stale``: their log moved, or nothing kept yet) between them. The C loop
(``tidelog._native`` quiet_runs) and ``quiet_runs_py`` give the same answers.

A leadership change or a new log drops the kept answers (``Partition.drop_quiet`` counts
them in ``Partition.quiet_drops``); the owner of the tables starts them again then.
"""

from __future__ import annotations

import struct

from tidelog._native import core
from tidelog.protocol.fetch_request import FetchTopicColumns
from tidelog.storage.log import Log

from .cluster.partition import Partition
from .cluster.quiet_answer import QuietAnswer

# the Log's stamp now, the stamp answered under, HW, leader epoch, version (-1: nothing
# kept, -2: no partition hosted here), entry length, entry; native order as the C loop
# reads it with memcpy
SLOT = struct.Struct("=qqqiiB63s")
KEPT = struct.Struct("=qqiiB63s")  # the slot from its second field: what ``answer`` writes
ENTRY_MAX = 63
EMPTY, NOT_HOSTED = -1, -2
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class QuietTable:
    """One topic's slots (see the module docstring), indexed by partition; ``parts`` holds
    each hosted Partition (None elsewhere), ``logs`` the Log mirroring its stamp into each
    slot, ``answers`` the last ``answer``."""

    __slots__ = ("answers", "logs", "parts", "slots")

    def __init__(self, parts: list[Partition | None]) -> None:
        self.parts = parts
        self.slots = bytearray(SLOT.size * len(parts))
        self.logs: list[Log | None] = [None] * len(parts)
        # each partition's last answer (where its batch at that HW starts, for a read from
        # there once it moved on), None: none
        self.answers: list[QuietAnswer | None] = [None] * len(parts)
        for i, part in enumerate(parts):
            SLOT.pack_into(self.slots, i * SLOT.size, 0, 0, 0, 0,
                           EMPTY if part is not None else NOT_HOSTED, 0, b"")
            if part is not None:
                self._mirror(i, part.log)

    def _mirror(self, index: int, log: Log) -> None:
        """``log``'s stamp mirrored into slot ``index`` (the Log it replaces lets go)."""
        old = self.logs[index]
        if old is not None and old is not log:
            with old.lock:
                if old.stamp_cell is not None and old.stamp_cell[0] is self.slots:
                    old.mirror_stamp(None)
        with log.lock:
            log.mirror_stamp((self.slots, index * SLOT.size))
        self.logs[index] = log
        self.answers[index] = None

    def answer(self, index: int, version: int) -> QuietAnswer | None:
        """Ask the partition at ``index`` again (``Partition.quiet_answer``) and keep what it
        answers; None when it has no quiet answer now (not the leader, a transaction open)."""
        part = self.parts[index]
        if part is None:
            return None
        if part.log is not self.logs[index]:
            self._mirror(index, part.log)
        q = self.answers[index] = part.quiet_answer(version)
        at = index * SLOT.size + 8
        if q is None or len(q.entry) > ENTRY_MAX:
            KEPT.pack_into(self.slots, at, 0, 0, 0, EMPTY, 0, b"")
            return q
        KEPT.pack_into(self.slots, at, q.stamp, q.high_watermark, q.leader_epoch, version,
                       len(q.entry), q.entry)
        return q


def quiet_runs_py(slots: bytes | bytearray, raw: bytes, size: int, epoch_at: int,
                  offset_at: int, version: int) -> tuple[list[bytes], list[int], list[int]]:
    """(runs, slow, stale) for a topic's request entries (``raw``: ``size``-byte big-endian
    entries, the partition index first, the current leader epoch at ``epoch_at`` (-1: none
    in this version), the fetch offset at ``offset_at``) against its ``slots``: in order,
    the kept bytes of each partition read at its HW at its leader epoch (or -1) under the
    stamp its log has now, joined into runs between the others; ``slow`` the indexes (into
    the entries) of those others, so that ``len(runs) == len(slow) + 1``; ``stale`` the
    ones among them whose slot is empty, of another version or of a moved stamp (answer
    them again before reading them)."""
    if size <= 0 or len(raw) % size or not 4 <= offset_at <= size - 8 or \
            epoch_at + 4 > size or 0 <= epoch_at < 4 or len(slots) % SLOT.size:
        raise ValueError("quiet_runs: slots or entries of other sizes")
    runs: list[bytes] = []
    slow: list[int] = []
    stale: list[int] = []
    run: list[bytes] = []
    count = len(slots) // SLOT.size
    unpack = SLOT.unpack_from
    for i, at in enumerate(range(0, len(raw), size)):
        p = _I32.unpack_from(raw, at)[0]
        if 0 <= p < count:
            now, kept, hw, slot_epoch, slot_version, n, entry = unpack(slots, p * SLOT.size)
            epoch = _I32.unpack_from(raw, at + epoch_at)[0] if epoch_at >= 0 else -1
            if slot_version == NOT_HOSTED:
                pass
            elif slot_version != version or now != kept:
                stale.append(i)
            elif hw == _I64.unpack_from(raw, at + offset_at)[0] and epoch in (-1, slot_epoch):
                run.append(entry[:n])
                continue
        runs.append(b"".join(run))
        run = []
        slow.append(i)
    runs.append(b"".join(run))
    return runs, slow, stale


class PartitionBits:
    """The partition indexes a Fetch names in a topic, as a bitmap (``ids_bits``): what the
    purgatory asks of the partitions a parked Fetch waits for (``p in bits``, ``len``),
    made without an int object per partition (a frozenset of them cost a Fetch of 1,000
    partitions ~0.1 ms at each park)."""

    __slots__ = ("_bits", "_n")

    def __init__(self, bits: bytes) -> None:
        self._bits = bits
        self._n = int.from_bytes(bits, "little").bit_count()

    def __contains__(self, p: object) -> bool:
        if type(p) is not int or p < 0:
            return False
        i = p >> 3
        return i < len(self._bits) and bool(self._bits[i] >> (p & 7) & 1)

    def __len__(self) -> int:
        return self._n


IDS_MAX = 1 << 20  # past it (or below 0), a frozenset of the indexes


def ids_bits_py(raw: bytes, size: int) -> bytes | None:
    """The bitmap of the partition indexes of the ``size``-byte entries in ``raw`` (bit
    ``p % 8`` of byte ``p // 8``, as many bytes as the largest needs); None when one is
    negative or from ``IDS_MAX`` (the twin of the C one)."""
    ids = [_I32.unpack_from(raw, at)[0] for at in range(0, len(raw) - size + 1, size)]
    if any(not 0 <= p < IDS_MAX for p in ids):
        return None
    bits = bytearray(max(ids) // 8 + 1 if ids else 0)
    for p in ids:
        bits[p >> 3] |= 1 << (p & 7)
    return bytes(bits)


def waited_partitions(columns: FetchTopicColumns) -> PartitionBits | frozenset[int]:
    """The topic's partitions a parked Fetch waits for (server/purgatory.py)."""
    bits = ids_bits(columns.raw, columns.layout.size)
    return frozenset(columns.partition_ids) if bits is None else PartitionBits(bits)


quiet_runs = core.quiet_runs if core is not None else quiet_runs_py
ids_bits = core.fetch_ids_bits if core is not None else ids_bits_py
