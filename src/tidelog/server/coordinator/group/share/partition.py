"""A share-partition's in-flight records (Kafka's SharePartition, KIP-932), sans I/O.

Records from the share-partition start offset (SPSO) on are Available, Acquired by one
member under a time-limited lock, Acknowledged, or Archived. An acquisition counts a
delivery; a record released (or whose lock ran out) after ``group.share.delivery.count.limit``
deliveries is archived instead of offered again. The SPSO moves past every record at its
front that is Acknowledged or Archived; an offset at or above the share-partition end offset
(SPEO) has never been delivered.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tidelog.protocol.errors import ErrorCode
from tidelog.util.scheduler import ScheduledTask, Scheduler

GAP, ACCEPT, RELEASE, REJECT = 0, 1, 2, 3  # ShareAcknowledge's AcknowledgeTypes

AcquiredRange = tuple[int, int, int]  # first offset, last offset, delivery count


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


@dataclass
class InFlight:
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    member_id: str | None = None
    lock: ScheduledTask | None = None

    def unlock(self) -> None:
        if self.lock is not None:
            self.lock.cancel()
            self.lock = None


class SharePartition:
    def __init__(self, start_offset: int, *, scheduler: Scheduler, lock_ms: int,
                 delivery_limit: int, max_locks: int) -> None:
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.records: dict[int, InFlight] = {}
        self.scheduler = scheduler
        self.lock_ms = lock_ms
        self.delivery_limit = delivery_limit
        self.max_locks = max_locks

    # ------------------------------------------------------------------ delivery

    def next_available(self) -> int:
        """The first offset a fetch may acquire (the SPEO when every in-flight one is taken)."""
        for off in range(self.start_offset, self.end_offset):
            rec = self.records.get(off)
            if rec is None or rec.state == RecordState.AVAILABLE:
                return off
        return self.end_offset

    def acquired_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state == RecordState.ACQUIRED)

    def archive(self, offsets: Iterable[int]) -> None:
        """Offsets that are no records to deliver (control batches, transaction markers)."""
        for off in offsets:
            if off >= self.start_offset:
                rec = self.records.setdefault(off, InFlight())
                if rec.state == RecordState.AVAILABLE:
                    rec.state = RecordState.ARCHIVED
                self.end_offset = max(self.end_offset, off + 1)
        self._advance()

    def acquire(self, member_id: str, offsets: Iterable[int], max_records: int,
                ) -> list[AcquiredRange]:
        """Acquire the available ones among ``offsets`` (ascending) for ``member_id``."""
        return self.acquire_batches(member_id, [[off] for off in offsets], max_records)

    def acquire_batches(self, member_id: str, batches: Iterable[Iterable[int]],
                        max_records: int) -> list[AcquiredRange]:
        """Kafka's SharePartition.acquire: whole batches, the available offsets of each
        (ascending) for ``member_id``, while fewer than ``max_records`` are acquired; the
        limit is soft: the batch that crosses it is acquired whole."""
        out: list[AcquiredRange] = []
        room = min(max_records, self.max_locks - self.acquired_count())
        for batch in batches:
            if room <= 0:
                break
            for off in batch:
                if self._acquire_one(member_id, off, out):
                    room -= 1
        return out

    def _acquire_one(self, member_id: str, off: int, out: list[AcquiredRange]) -> bool:
        if off < self.start_offset:
            return False
        rec = self.records.get(off)
        if rec is None:  # never delivered yet
            rec = self.records[off] = InFlight()
        if rec.state != RecordState.AVAILABLE:
            return False
        rec.state, rec.member_id = RecordState.ACQUIRED, member_id
        rec.delivery_count += 1
        rec.lock = self.scheduler.schedule(
            f"share-lock-{off}", self._expire(off, rec.delivery_count), self.lock_ms)
        self.end_offset = max(self.end_offset, off + 1)
        if out and out[-1][1] == off - 1 and out[-1][2] == rec.delivery_count:
            out[-1] = (out[-1][0], off, rec.delivery_count)
        else:
            out.append((off, off, rec.delivery_count))
        return True

    def _expire(self, offset: int, delivery: int) -> Callable[[], None]:
        def run() -> None:
            rec = self.records.get(offset)
            if (rec is not None and rec.state == RecordState.ACQUIRED
                    and rec.delivery_count == delivery):
                rec.lock = None
                self._release(rec)
                self._advance()
        return run

    # ------------------------------------------------------------------ acknowledgement

    def acknowledge(self, member_id: str, first: int, last: int,
                    types: list[int]) -> ErrorCode:
        """One AcknowledgementBatch: a single type for the whole range, or one per offset.
        Nothing changes unless every offset is a record this member holds."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            return ErrorCode.INVALID_REQUEST
        if any(t not in (GAP, ACCEPT, RELEASE, REJECT) for t in types):
            return ErrorCode.INVALID_REQUEST
        held = []
        for off in range(first, last + 1):
            kind = types[0] if len(types) == 1 else types[off - first]
            rec = self.records.get(off)
            if kind == GAP:
                held.append((off, kind, rec))
                continue
            if (rec is None or rec.state != RecordState.ACQUIRED
                    or rec.member_id != member_id):
                return ErrorCode.INVALID_RECORD_STATE
            held.append((off, kind, rec))
        for off, kind, rec in held:
            if rec is None:
                if off >= self.start_offset:
                    self.archive([off])
                continue
            if kind == GAP and rec.state != RecordState.ACQUIRED:
                continue
            rec.unlock()
            if kind in (ACCEPT, GAP):
                rec.state, rec.member_id = RecordState.ACKNOWLEDGED, None
            elif kind == REJECT:
                rec.state, rec.member_id = RecordState.ARCHIVED, None
            else:
                self._release(rec)
        self._advance()
        return ErrorCode.NONE

    def release_member(self, member_id: str, delivered: bool = True) -> int:
        """A member's share session ended: what it holds is offered again at once. Closed
        by the client (``delivered=False``), as Kafka's releaseAcquiredRecords with
        DeliveryCountOps.DECREASE, that delivery does not count: the next one has the same
        delivery count. A member that vanished (session timeout) had them delivered."""
        released = 0
        for rec in self.records.values():
            if rec.state == RecordState.ACQUIRED and rec.member_id == member_id:
                rec.unlock()
                if not delivered:
                    rec.delivery_count = max(rec.delivery_count - 1, 0)
                self._release(rec)
                released += 1
        self._advance()
        return released

    # ------------------------------------------------------------------ durable state

    def snapshot(self) -> list[tuple[int, int, int, int]]:
        """State batches of [SPSO, SPEO) as the share coordinator stores them: an acquired
        record is stored Available (with its delivery count), so a restart offers it again."""
        runs: list[tuple[int, int, int, int]] = []
        for off in range(self.start_offset, self.end_offset):
            rec = self.records.get(off)
            if rec is None:
                continue
            state = int(rec.state) if rec.state in (RecordState.ACKNOWLEDGED,
                                                    RecordState.ARCHIVED) else 0
            if runs and runs[-1][1] == off - 1 and runs[-1][2:] == (state, rec.delivery_count):
                runs[-1] = (runs[-1][0], off, state, rec.delivery_count)
            else:
                runs.append((off, off, state, rec.delivery_count))
        return runs

    def restore(self, start_offset: int, batches: Iterable[tuple[int, int, int, int]]) -> None:
        self.start_offset = self.end_offset = start_offset
        self.records.clear()
        for first, last, state, count in batches:
            for off in range(max(first, start_offset), last + 1):
                kind = RecordState(state) if state in (2, 4) else RecordState.AVAILABLE
                self.records[off] = InFlight(kind, count)
            self.end_offset = max(self.end_offset, last + 1)
        self._advance()

    def _release(self, rec: InFlight) -> None:
        rec.member_id = None
        archived = rec.delivery_count >= self.delivery_limit
        rec.state = RecordState.ARCHIVED if archived else RecordState.AVAILABLE

    def _advance(self) -> None:
        while True:
            rec = self.records.get(self.start_offset)
            if rec is None or rec.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                return
            del self.records[self.start_offset]
            self.start_offset += 1
            self.end_offset = max(self.end_offset, self.start_offset)
