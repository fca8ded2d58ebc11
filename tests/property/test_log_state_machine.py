"""Hypothesis state machine: a Log against a list of batches.

Random appends (plain, compressed, idempotent, duplicate retries), reads, rolls, batch-aligned
truncations, flushes and crash/reopen — clean, or a kill without flush that may append garbage
to the active .log or cut its unflushed tail. After every reopen the log must hold a prefix
of the model that contains everything below the recovery point, byte for byte.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tidelog.config.log_config import LogConfig
from tidelog.records import CompressionType, RecordBatch, build_batch, iter_batches
from tidelog.storage.log import FetchIsolation, Log
from tidelog.util.clock import ManualClock

PID = 77
CONFIG = LogConfig.from_props({
    "segment.bytes": "700",
    "index.interval.bytes": "60",
    "segment.index.bytes": "48",
    "segment.ms": "20000",
    "retention.ms": "60000",
})

values_st = st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=4)
codec_st = st.sampled_from([CompressionType.NONE, CompressionType.NONE, CompressionType.GZIP,
                            CompressionType.LZ4, CompressionType.ZSTD, CompressionType.SNAPPY])


@dataclass
class ModelBatch:
    base_offset: int
    data: bytes  # the bytes the log must hold (base offset and epoch patched)
    next_offset: int
    client_bytes: bytes  # what the client sent (for duplicate retries)
    sequence: int  # base sequence, -1 if not idempotent
    pid: int = -1


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="logsm-"))
        self.clock = ManualClock(1_700_000_000_000)
        self.log = Log.open(self.tmp / "sm-0", CONFIG, clock=self.clock)
        self.model: list[ModelBatch] = []
        self.start = 0  # the log start offset the model expects
        self.pid = PID
        self.pid_used = False

    # -- helpers ------------------------------------------------------------------------------
    @property
    def end(self) -> int:
        return self.model[-1].next_offset if self.model else self.start

    def _next_seq(self) -> int:
        """Next sequence of the current producer; a producer whose batches all left the model
        (truncated or below the log start) is replaced by a new id, whose state is unambiguous."""
        seqs = [b for b in self.model if b.pid == self.pid]
        if not seqs:
            if self.pid_used:
                self.pid += 1
                self.pid_used = False
            return 0
        last = seqs[-1]
        return last.sequence + (last.next_offset - last.base_offset)

    def _append(self, data: bytes, sequence: int, pid: int = -1) -> None:
        info = self.log.append_as_leader(data, leader_epoch=3)
        assert not info.duplicate
        assert info.first_offset == self.end
        stored = bytearray(data)
        b = RecordBatch(stored)
        b.set_base_offset(info.first_offset)
        b.set_partition_leader_epoch(3)
        self.model.append(ModelBatch(info.first_offset, bytes(stored), info.last_offset + 1,
                                     data, sequence, pid))

    def _check_all(self) -> None:
        got = []
        pos = self.log.log_start_offset
        while pos < self.log.log_end_offset:
            info = self.log.read(pos, 1 << 20, FetchIsolation.LOG_END)
            batches = list(iter_batches(info.records.read()))
            assert batches, f"no data at {pos} below LEO {self.log.log_end_offset}"
            got.extend(bytes(b.buf) for b in batches)
            pos = batches[-1].next_offset
        assert got == [b.data for b in self.model]

    # -- rules --------------------------------------------------------------------------------
    @rule(values=values_st, codec=codec_st, ts_delta=st.integers(0, 10_000))
    def append_plain(self, values: list[bytes], codec: CompressionType, ts_delta: int) -> None:
        ts = self.clock.milliseconds() + ts_delta
        data = build_batch([(ts + i, b"k%d" % i, v) for i, v in enumerate(values)], codec)
        self._append(data, -1)

    @rule(values=values_st, codec=codec_st)
    def append_idempotent(self, values: list[bytes], codec: CompressionType) -> None:
        seq = self._next_seq()
        data = build_batch([(self.clock.milliseconds(), None, v) for v in values], codec,
                           producer_id=self.pid, producer_epoch=0, base_sequence=seq)
        self._append(data, seq, self.pid)
        self.pid_used = True

    @precondition(lambda self: any(b.sequence >= 0 for b in self.model))
    @rule()
    def retry_last_idempotent(self) -> None:
        last = [b for b in self.model if b.sequence >= 0][-1]  # the last of its producer
        size = self.log.size_in_bytes
        info = self.log.append_as_leader(last.client_bytes, leader_epoch=3)
        assert info.duplicate
        assert (info.first_offset, info.last_offset) == (last.base_offset, last.next_offset - 1)
        assert self.log.size_in_bytes == size

    @rule(data=st.data())
    def read_somewhere(self, data: st.DataObject) -> None:
        if not self.model:
            assert self.log.read(self.end, 1000, FetchIsolation.LOG_END).records.size == 0
            return
        i = data.draw(st.integers(0, len(self.model) - 1))
        target = self.model[i]
        offset = data.draw(st.integers(target.base_offset, target.next_offset - 1))
        info = self.log.read(offset, 1, FetchIsolation.LOG_END, min_one_message=True)
        first = next(iter_batches(info.records.read()))
        assert bytes(first.buf) == target.data

    @rule()
    def roll(self) -> None:
        self.log.roll()
        assert self.log.active_segment.base_offset == self.end

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.end

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        keep = data.draw(st.integers(0, len(self.model) - 1))
        target = self.model[keep].base_offset
        assert self.log.truncate_to(target)
        del self.model[keep:]
        assert self.log.log_end_offset == target

    @precondition(lambda self: len(self.model) > 1)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        """DeleteRecords at a batch boundary, then retention drops whole segments below it."""
        k = data.draw(st.integers(1, len(self.model) - 1))
        self.log.update_high_watermark(self.log.log_end_offset)
        new_start = self.model[k].base_offset
        assert self.log.maybe_increment_log_start_offset(new_start, "test")
        self.log.delete_old_segments()
        del self.model[:k]
        self.start = new_start
        first = self.log.segments.first_segment_base_offset
        assert first is not None and first <= new_start

    @rule(ms=st.integers(1, 30_000))
    def advance_time(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule()
    def apply_retention(self) -> None:
        """Time retention (record timestamps vs the clock) after the HW reaches the LEO."""
        self.log.update_high_watermark(self.log.log_end_offset)
        self.log.delete_old_segments()
        self.start = self.log.log_start_offset
        self.model = [b for b in self.model if b.base_offset >= self.start]
        now = self.clock.milliseconds()
        first = self.log.segments.first_segment
        assert first is not None
        if first is not self.log.active_segment:  # a kept non-active segment is not expired
            assert now - first.largest_timestamp <= 60_000

    @rule()
    def clean_restart(self) -> None:
        self.log.close()
        self.log = Log.open(self.log.dir, CONFIG, clock=self.clock, had_clean_shutdown=True,
                            recovery_point=self.log.recovery_point,
                            log_start_offset=self.start)
        self._check_all()

    @rule(garbage=st.binary(min_size=0, max_size=80), cut=st.floats(0, 1))
    def crash_restart(self, garbage: bytes, cut: float) -> None:
        lg = self.log
        rp = lg.recovery_point
        active = lg.active_segment
        # bytes of the active segment below the recovery point are on disk for sure
        durable = 0
        if rp > active.base_offset:
            found = active.translate_offset(rp)
            durable = active.size if found is None else found.position
        path = active.log.path
        lg.close_handlers()
        size = path.stat().st_size
        keep = durable + int((size - durable) * cut)
        with open(path, "r+b") as f:
            f.truncate(keep)
            f.seek(keep)
            f.write(garbage)
        self.log = Log.open(lg.dir, CONFIG, clock=self.clock, recovery_point=rp,
                            log_start_offset=self.start)
        survivors = [b for b in self.model if b.next_offset <= self.log.log_end_offset]
        assert all(b.next_offset <= self.log.log_end_offset for b in self.model
                   if b.next_offset <= rp), "lost flushed data"
        self.model = survivors
        assert self.log.log_end_offset == self.end
        self._check_all()

    @invariant()
    def offsets_agree(self) -> None:
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start

    def teardown(self) -> None:
        try:
            self.log.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


LogMachine.TestCase.settings = settings(
    max_examples=50, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLogStateMachine = LogMachine.TestCase
