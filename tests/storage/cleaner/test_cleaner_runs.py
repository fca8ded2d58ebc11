"""Batch runs change nothing a cleaning does: the same random logs (plain, compressed,
idempotent and transactional batches, committed and aborted transactions, tombstones, several
segments) cleaned twice -- before and after the delete horizon -- leave byte-identical
segment, index and transaction-index files and identical stats, whether the native core
takes runs of plain batches (with 1 MiB chunks or tiny ones), the native core runs the
reference per-batch code alone, or the Python core runs."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cleaner_helpers import append_marker, make_cleaner, open_log
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog import _native
from tidelog.records import CompressionType, ControlRecordType, RecordBatchBuilder
from tidelog.storage.cleaner import batch_filter, batch_runs, cleaner
from tidelog.storage.cleaner.cleaner import LogToClean
from tidelog.storage.cleaner.offset_map import SkimpyOffsetMap
from tidelog.util.clock import ManualClock

NOW = 1_700_000_000_000
RETENTION = 10_000
MODES = ["runs", "runs-small-chunks", "reference", "python"]

rec_st = st.tuples(st.integers(0, 5), st.one_of(st.none(), st.binary(min_size=1, max_size=8)))
op_st = st.one_of(
    st.tuples(st.just("plain"), st.sampled_from([CompressionType.NONE] * 3 + [
        CompressionType.LZ4, CompressionType.GZIP]), st.lists(rec_st, min_size=1, max_size=5)),
    st.tuples(st.just("idem"), st.just(CompressionType.NONE), st.lists(rec_st, min_size=1,
                                                                       max_size=5)),
    st.tuples(st.just("txn"), st.just(CompressionType.NONE), st.lists(rec_st, min_size=1,
                                                                      max_size=3)),
    st.tuples(st.sampled_from(["commit", "abort", "roll"]), st.just(CompressionType.NONE),
              st.just([])),
)


@contextmanager
def mode(name: str) -> Iterator[None]:
    saved = (SkimpyOffsetMap._native, batch_filter._scan, cleaner.map_run, cleaner.filter_run,
             batch_runs.BATCH_CHUNK)
    if name == "runs-small-chunks":
        batch_runs.BATCH_CHUNK = 256
    elif name == "reference":  # runs that never take a batch
        cleaner.map_run = lambda _m, _b, off, *_a: batch_runs.MapRun(off, 0, 0, 0, False, None)
        cleaner.filter_run = lambda _m, _b, off, _fp, _budget, ts: batch_runs.FilterRun(
            off, 0, 0, 0, b"", 0, 0, ts, None, -1, None, 0, None)
    elif name == "python":
        SkimpyOffsetMap._native, batch_filter._scan = None, batch_filter._scan_py
    try:
        yield
    finally:
        (SkimpyOffsetMap._native, batch_filter._scan, cleaner.map_run, cleaner.filter_run,
         batch_runs.BATCH_CHUNK) = saved


def _build(d: Path, ops: list[Any]) -> Any:
    clock = ManualClock(NOW)
    lg = open_log(d, clock, delete_retention_ms=RETENTION, segment_bytes=700)
    seq, txn_seq, txn_open = 0, 0, False
    for kind, codec, recs in ops:
        if kind == "roll":
            lg.roll()
            continue
        if kind in ("commit", "abort"):
            if txn_open:
                append_marker(lg, 2, 0, ControlRecordType.COMMIT if kind == "commit"
                              else ControlRecordType.ABORT)
                txn_open = False
            continue
        kw: dict[str, Any] = {}
        if kind == "idem":
            kw = {"producer_id": 1, "producer_epoch": 0, "base_sequence": seq}
            seq += len(recs)
        elif kind == "txn":
            if txn_open:  # one data batch per transaction
                continue
            kw = {"producer_id": 2, "producer_epoch": 0, "is_transactional": True,
                  "base_sequence": txn_seq}
            txn_seq += len(recs)
            txn_open = True
        b = RecordBatchBuilder(codec, **kw)
        for key, value in recs:
            b.append(clock.milliseconds(), b"k%d" % key, value)
        lg.append_as_leader(b.build())
        lg.maybe_increment_high_watermark(lg.log_end_offset)
    if txn_open:
        append_marker(lg, 2, 0, ControlRecordType.ABORT)
    lg.roll()
    return lg, clock


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())
            if p.suffix in (".log", ".index", ".timeindex", ".txnindex")}


def _clean_twice(d: Path, ops: list[Any], name: str, slots: int = 10_000) -> tuple[Any, ...]:
    lg, clock = _build(d, ops)
    out: list[Any] = []
    with mode(name):
        c = make_cleaner(clock, slots=slots, load_factor=0.75, io_buffer_size=512)
        first = 0
        for _ in range(2):
            ltc = LogToClean(lg.topic_partition, lg, first, lg.active_segment.base_offset)
            first, stats = c.clean(ltc)
            out.append((first, dataclasses.replace(stats, elapsed_secs=0.0)))
            clock.advance(RETENTION + 1)
    lg.close()
    return tuple(out), _files(d)


@pytest.mark.skipif(_native.core is None, reason="native core not built")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op_st, min_size=1, max_size=30), st.sampled_from([10_000, 10_000, 4, 9]))
def test_runs_clean_exactly_as_the_reference_code(ops: list[Any], slots: int) -> None:
    """With a map too small for the keys too: rounds end where it filled, inside a run."""
    with tempfile.TemporaryDirectory() as tmp:
        results = {m: _clean_twice(Path(tmp) / f"{m}-0", ops, m, slots) for m in MODES}
    for m in MODES[1:]:
        assert results[m] == results["runs"], m
