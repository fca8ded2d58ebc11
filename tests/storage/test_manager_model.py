"""Hypothesis state machine: LogManager against a dict-of-lists model across restarts.

Steps: create partitions, append, flush, delete records, delete partitions, let time pass
(retention, flusher and checkpoint tasks run on the manual scheduler), restart cleanly or
after a simulated crash (file handles dropped, no flush, no checkpoints, no marker).
Invariants: every record from the log start offset on reads back with its value; the log
start offset never goes below what was checkpointed (or above what a client asked for);
deleted partitions never come back.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tidelog.records.batch import iter_batches
from tidelog.records.builder import build_batch
from tidelog.storage.cleaner import CleanerConfig
from tidelog.storage.log import FetchIsolation, Log
from tidelog.storage.manager import LogManager
from tidelog.storage.manager_config import LogManagerConfig
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler
from tidelog.util.topic_partition import TopicPartition

PARTITIONS = [TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)]
DEFAULTS = {"segment.bytes": "300", "file.delete.delay.ms": "500"}
CONFIG = LogManagerConfig.from_props(
    {
        "log.retention.check.interval.ms": "1000",
        "log.initial.task.delay.ms": "0",
        "log.flush.offset.checkpoint.interval.ms": "2000",
        "log.flush.start.offset.checkpoint.interval.ms": "3000",
    }
)


class _Partition:
    """Model: the values by offset, the start offset asked for, the one known durable."""

    def __init__(self) -> None:
        self.values: list[bytes] = []
        self.requested_start = 0  # the highest offset delete_records was asked for
        self.durable_start = 0  # the start offset at the last clean shutdown (a lower bound)


def _read_all(lg: Log) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        info = lg.read(offset, 1 << 20, isolation=FetchIsolation.LOG_END)
        data = info.records.read() if info.records is not None else b""
        if not data:
            break
        for batch in iter_batches(memoryview(data), 0, len(data)):
            for rec in batch.iter_records():
                if rec.offset >= lg.log_start_offset:  # whole batches come back; clients skip
                    out[rec.offset] = bytes(rec.value or b"")
            offset = batch.last_offset + 1
    return out


class ManagerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="tidelog-manager-model-"))
        self.clock = ManualClock()
        self.model: dict[TopicPartition, _Partition] = {}
        self.manager = self._start()

    def _start(self) -> LogManager:
        m = LogManager(
            [self.root / "d1", self.root / "d2"],
            DEFAULTS,
            clock=self.clock,
            scheduler=ManualScheduler(self.clock),
            config=CONFIG,
            cleaner_config=CleanerConfig(enable_cleaner=False),
        )
        m.startup()
        for tp in self.model:
            lg = m.get_log(tp)
            assert lg is not None, f"{tp} vanished across a restart"
            lg.maybe_increment_high_watermark(lg.log_end_offset)  # single-node leader
        return m

    def _log(self, tp: TopicPartition) -> Log:
        lg = self.manager.get_log(tp)
        assert lg is not None
        return lg

    @rule(tp=st.sampled_from(PARTITIONS))
    def create(self, tp: TopicPartition) -> None:
        self.manager.get_or_create_log(tp)
        self.model.setdefault(tp, _Partition())

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), n=st.integers(1, 4))
    def append(self, data: st.DataObject, n: int) -> None:
        tp = data.draw(st.sampled_from(sorted(self.model)))
        lg, part = self._log(tp), self.model[tp]
        base = len(part.values)
        values = [b"%s-%d" % (str(tp).encode(), base + i) for i in range(n)]
        info = lg.append_as_leader(
            build_batch([(self.clock.milliseconds(), None, v) for v in values])
        )
        assert info.first_offset == base
        lg.maybe_increment_high_watermark(lg.log_end_offset)
        part.values.extend(values)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), fraction=st.floats(0, 1))
    def delete_records(self, data: st.DataObject, fraction: float) -> None:
        tp = data.draw(st.sampled_from(sorted(self.model)))
        part = self.model[tp]
        target = int(len(part.values) * fraction)
        new_start = self.manager.delete_records(tp, target)
        part.requested_start = max(part.requested_start, target)
        assert new_start == max(target, self._log(tp).log_start_offset)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def delete_partition(self, data: st.DataObject) -> None:
        tp = data.draw(st.sampled_from(sorted(self.model)))
        assert self.manager.delete_log(tp) is not None
        del self.model[tp]

    @rule(ms=st.sampled_from([100, 1000, 2500, 10_000]))
    def tick(self, ms: int) -> None:
        self.clock.advance(ms)  # retention, flusher and checkpoint tasks come due

    @rule()
    def clean_restart(self) -> None:
        for tp, part in self.model.items():
            part.durable_start = self._log(tp).log_start_offset
        self.manager.shutdown()
        self.manager = self._start()

    @rule()
    def crash_restart(self) -> None:
        m = self.manager
        m._cancel_tasks()
        m._shut_down = True
        for lg in m.all_logs():
            lg.close_handlers()
        m._release_locks()
        self.manager = self._start()

    @invariant()
    def logs_match_model(self) -> None:
        live = {lg.topic_partition for lg in self.manager.all_logs()}
        assert live == set(self.model)
        for tp, part in self.model.items():
            lg = self._log(tp)
            assert lg.log_end_offset == len(part.values)
            start = lg.log_start_offset
            assert part.durable_start <= start <= max(part.requested_start, part.durable_start)
            got = _read_all(lg)
            assert got == {o: part.values[o] for o in range(start, len(part.values))}

    def teardown(self) -> None:
        self.manager.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)


# A quick run in the default suite; the long one (-m slow) finds rarer sequences.
ManagerMachine.TestCase.settings = settings(max_examples=10, stateful_step_count=20, deadline=None)
test_manager_model = ManagerMachine.TestCase


@pytest.mark.slow
def test_manager_model_long() -> None:
    run_state_machine_as_test(
        ManagerMachine, settings=settings(max_examples=150, stateful_step_count=30, deadline=None)
    )
