"""A read_committed read's aborted transactions (storage/log_read.py ``_aborted_txns``): a
read in the active segment lists that segment's entries alone (no later segment can hold
one), and asks nothing of the sorted segments when its index has none; on any log of
transactions committed and aborted across rolls, every read answers what Kafka's
collectAbortedTransactions walk (the floor segment of the offset on, up to the segment
after the one read) answers."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_log_support import T0, batch

from tidelog.config.log_config import LogConfig
from tidelog.records import ControlRecordType, RecordBatchBuilder
from tidelog.storage import log_read
from tidelog.storage.index.txn_index import AbortedTxn
from tidelog.storage.log import Log
from tidelog.storage.log_read import FetchIsolation, collect_aborted_txns
from tidelog.storage.segment import LogSegment
from tidelog.storage.segments import LogSegments
from tidelog.storage.validator import AppendOrigin
from tidelog.util.clock import ManualClock

# (what, producer): a plain batch, a transaction's records, its commit or abort, a roll
OPS = st.lists(st.tuples(st.sampled_from(["plain", "txn", "commit", "abort", "roll"]),
                         st.integers(1, 3)), min_size=1, max_size=24)


def walk(segments: LogSegments, seg: LogSegment, start: int, leo: int) -> list[AbortedTxn]:
    """Kafka's walk as written before the active segment's shortcut (the reference)."""
    nxt = segments.higher_segment(seg.base_offset)
    upper = nxt.base_offset if nxt is not None else leo
    first = segments.floor_segment(start) or seg
    return collect_aborted_txns((first, *segments.higher_segments(first.base_offset)), start,
                                upper).aborted_transactions


def build(lg: Log, ops: list[tuple[str, int]]) -> None:
    sequence = {pid: 0 for pid in (1, 2, 3)}
    open_txns: set[int] = set()
    for what, pid in ops:
        if what == "plain":
            lg.append_as_leader(batch(b"p", b"p"))
        elif what == "txn":
            lg.append_as_leader(batch(b"t", producer_id=pid, producer_epoch=0,
                                      base_sequence=sequence[pid], is_transactional=True))
            sequence[pid] += 1
            open_txns.add(pid)
        elif what == "roll":
            lg.roll()
        elif pid in open_txns:
            m = RecordBatchBuilder(producer_id=pid, producer_epoch=0, is_transactional=True,
                                   is_control=True)
            kind = ControlRecordType.COMMIT if what == "commit" else ControlRecordType.ABORT
            m.append_control(kind, T0, coordinator_epoch=0)
            lg.append_as_leader(m.build(), origin=AppendOrigin.COORDINATOR)
            open_txns.discard(pid)
        lg.update_high_watermark(lg.log_end_offset)


@settings(max_examples=60, deadline=None)
@given(ops=OPS)
def test_every_read_lists_what_the_walk_lists(ops: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        lg = Log.open(Path(d) / "t-0", LogConfig.from_props({}), clock=ManualClock(T0))
        try:
            build(lg, ops)
            segments, leo = lg.segments, lg.log_end_offset
            for start in range(leo):
                seg = segments.floor_segment(start)
                assert seg is not None
                want = walk(segments, seg, start, leo)
                assert log_read._aborted_txns(segments, seg, start, leo) == want
                if start < lg.last_stable_offset:  # (no gaps: the floor segment is read)
                    info = lg.read(start, 1 << 20, FetchIsolation.TXN_COMMITTED)
                    assert info.aborted_transactions == want
        finally:
            lg.close()


def test_an_active_segment_with_no_entry_asks_the_sorted_segments_nothing(
        tmp_path: Path) -> None:
    lg = Log.open(tmp_path / "t-0", LogConfig.from_props({}), clock=ManualClock(T0))
    try:
        build(lg, [("txn", 1), ("abort", 1), ("roll", 1), ("plain", 1)])
        segments = lg.segments
        active = segments.last_segment
        assert active is not None and active.txn_index.is_empty

        def refuse(*_: object) -> None:
            raise AssertionError("the sorted segments were searched")

        with pytest.MonkeyPatch.context() as m:
            for name in ("floor_segment", "higher_segment", "higher_segments"):
                m.setattr(LogSegments, name, refuse)
            got = log_read._aborted_txns(segments, active, active.base_offset,
                                         lg.log_end_offset)
        assert got == []
        first = segments.floor_segment(0)
        assert first is not None  # the abort's segment, not active: the walk lists it
        assert [t.producer_id for t in log_read._aborted_txns(
            segments, first, 0, lg.log_end_offset)] == [1]
    finally:
        lg.close()
