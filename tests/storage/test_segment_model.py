"""A Hypothesis state machine drives one LogSegment against a list-of-batches model.

Random appends (with offset gaps and out-of-order timestamps), reads with every size and
min-one-message combination, timestamp searches, truncations, flushes, clean close/reopen
and crash/reopen with a damaged tail followed by ``recover()``. After every step the segment
must return exactly the bytes the model holds.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tidelog.records import RecordBatchBuilder
from tidelog.storage.segment import LogSegment, SegmentConfig
from tidelog.util.clock import ManualClock

BASE = 1000
CONFIG = SegmentConfig(index_interval_bytes=60, segment_index_bytes=64 * 1024)


class Batch:
    def __init__(self, data: bytes, records: list[tuple[int, int]]) -> None:
        self.data = data
        self.records = records  # (offset, timestamp)

    @property
    def last_offset(self) -> int:
        return self.records[-1][0]

    @property
    def max_timestamp(self) -> int:
        return max(ts for _o, ts in self.records)


class SegmentMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="seg-model-"))
        self.clock = ManualClock(0)
        self.seg = LogSegment.open(self.dir, BASE, CONFIG, self.clock)
        self.model: list[Batch] = []
        self.next_offset = BASE
        self.ts = 1_000_000

    def teardown(self) -> None:
        self.seg.close_handlers()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- rules -------------------------------------------------------------------------------
    @rule(n=st.integers(1, 4), gap=st.integers(0, 2), ts_steps=st.lists(st.integers(-30, 60), min_size=4, max_size=4),
          size=st.integers(0, 120))
    def append(self, n: int, gap: int, ts_steps: list[int], size: int) -> None:
        offset = self.next_offset + (gap if self.model else 0)
        b = RecordBatchBuilder(base_offset=offset)
        recs = []
        for i in range(n):
            self.ts += ts_steps[i]
            b.append(self.ts, None, os.urandom(size), offset=offset + i * (gap + 1))
            recs.append((offset + i * (gap + 1), self.ts))
        batch = Batch(b.build(), recs)
        self.seg.append(batch.last_offset, batch.max_timestamp, batch.last_offset, batch.data)
        self.model.append(batch)
        self.next_offset = batch.last_offset + 1

    @rule(delta=st.integers(-3, 60), max_size=st.integers(0, 1500), min_one=st.booleans())
    def read(self, delta: int, max_size: int, min_one: bool) -> None:
        offset = BASE + delta
        info = self.seg.read(offset, max_size, min_one_message=min_one)
        idx = next((i for i, b in enumerate(self.model) if b.last_offset >= offset), None)
        if idx is None:
            assert info is None
            return
        assert info is not None
        whole = b"".join(b.data for b in self.model)
        start = sum(len(b.data) for b in self.model[:idx])
        first = len(self.model[idx].data)
        adjusted = max(max_size, first) if min_one else max_size
        assert info.fetch_offset_metadata.relative_position_in_segment == start
        assert info.records.read() == whole[start : start + adjusted]
        assert info.first_entry_incomplete == (0 < adjusted < first)

    @rule(delta=st.integers(-40, 40))
    def find_by_timestamp(self, delta: int) -> None:
        target = self.ts + delta
        found = self.seg.find_offset_by_timestamp(target, BASE)
        expected = next(((ts, o) for b in self.model for o, ts in b.records if ts >= target), None)
        got = None if found is None else (found.timestamp, found.offset)
        assert got == expected

    @rule(pick=st.integers(0, 10**6))
    def truncate(self, pick: int) -> None:
        offset = BASE + pick % (self.next_offset - BASE + 1)  # anywhere in [base, end]
        removed = self.seg.truncate_to(offset)
        keep = [b for b in self.model if b.last_offset < offset]
        assert removed == sum(len(b.data) for b in self.model[len(keep):])
        self.model = keep
        self.next_offset = keep[-1].last_offset + 1 if keep else BASE

    @rule()
    def flush(self) -> None:
        self.seg.flush()

    @rule()
    def clean_reopen(self) -> None:
        self.seg.close()
        self._reopen()

    @precondition(lambda self: bool(self.model))
    @rule(damage=st.sampled_from(["none", "garbage", "cut", "flip"]), seed=st.integers(0, 2**16))
    def crash_and_recover(self, damage: str, seed: int) -> None:
        self.seg.close_handlers()  # no trim, no final index entry: as after a crash
        path = self.seg.log.path
        rng = random.Random(seed)
        last = self.model[-1]
        end = sum(len(b.data) for b in self.model)
        if damage == "garbage":
            with open(path, "ab") as f:
                f.write(rng.randbytes(rng.randrange(1, 200)))
        elif damage == "cut":
            os.truncate(path, end - rng.randrange(1, len(last.data)))
            self.model.pop()
        elif damage == "flip":
            pos = end - len(last.data) + rng.randrange(21, len(last.data))  # CRC-covered
            with open(path, "r+b") as f:
                f.seek(pos)
                byte = f.read(1)[0]
                f.seek(pos)
                f.write(bytes([byte ^ (1 << rng.randrange(8))]))
            self.model.pop()
        self._reopen()
        self.seg.recover()
        self.seg.resize_indexes(CONFIG.segment_index_bytes)
        self.next_offset = self.model[-1].last_offset + 1 if self.model else BASE

    def _reopen(self) -> None:
        self.seg = LogSegment.open(self.dir, BASE, CONFIG, self.clock)
        # the loader gives the active segment's indexes their full size back
        self.seg.resize_indexes(CONFIG.segment_index_bytes)

    # -- invariants --------------------------------------------------------------------------
    @invariant()
    def same_bytes(self) -> None:
        assert self.seg.size == sum(len(b.data) for b in self.model)
        assert [bytes(b.buf) for b in self.seg.log.batches(validate=True)] == [b.data for b in self.model]

    @invariant()
    def next_offset_and_max_timestamp(self) -> None:
        assert self.seg.read_next_offset() == (self.model[-1].last_offset + 1 if self.model else BASE)
        if self.model:
            assert self.seg.max_timestamp_so_far == max(b.max_timestamp for b in self.model)

    @invariant()
    def time_index_entries_are_exact(self) -> None:
        """Entry (T, O): O is a batch's last offset, T the max timestamp up to that batch."""
        max_upto, running = {}, -1
        for b in self.model:
            running = max(running, b.max_timestamp)
            max_upto[b.last_offset] = running
        for i in range(self.seg.time_index.entries):
            ts, offset = self.seg.time_index.entry(i)
            assert max_upto.get(offset) == ts

    @invariant()
    def index_entries_point_at_batches(self) -> None:
        starts, pos = {}, 0
        for b in self.model:
            starts[pos] = b.last_offset
            pos += len(b.data)
        for i in range(self.seg.offset_index.entries):
            offset, position = self.seg.offset_index.entry(i)
            assert starts.get(position) == offset


TestSegmentModel = SegmentMachine.TestCase
TestSegmentModel.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
