# ruff: noqa: F811  (pytest fixtures imported from test_log_support are parameters here)
"""Transactional state survives restarts: producer snapshots carry the ongoing transaction's
first offset and coordinator epoch, and recovery after a crash rebuilds the LSO, the ongoing
transactions and the ``.txnindex`` of aborted transactions from the log."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from test_log_support import T0, batch, clock, make_log  # noqa: F401

from tidelog.records import RecordBatchBuilder
from tidelog.records.batch import ControlRecordType
from tidelog.storage.log import FetchIsolation, Log
from tidelog.storage.producer_state import read_snapshot
from tidelog.storage.validator import AppendOrigin

MakeLog = Callable[..., Log]


def _data(lg: Log, pid: int, n: int, seq: int) -> None:
    lg.append_as_leader(batch(*[b"t"] * n, producer_id=pid, producer_epoch=0,
                              base_sequence=seq, is_transactional=True))


def _marker(lg: Log, pid: int, kind: ControlRecordType, coordinator_epoch: int = 3) -> None:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0, is_transactional=True,
                           is_control=True)
    b.append_control(kind, T0, coordinator_epoch=coordinator_epoch)
    lg.append_as_leader(b.build(), origin=AppendOrigin.COORDINATOR)


def _state(lg: Log) -> tuple[object, ...]:
    lg.update_high_watermark(lg.log_end_offset)
    info = lg.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED)
    aborted = [(t.producer_id, t.first_offset) for t in info.aborted_transactions or []]
    entries = [(t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset)
               for s in lg.segments for t in s.txn_index.all_aborted_txns()]
    ongoing = {pid: e.current_txn_first_offset
               for pid, e in lg.producer_state.active_producers.items()}
    return lg.last_stable_offset, aborted, entries, ongoing


def _history(lg: Log) -> None:
    _data(lg, 1, 3, 0)  # 0-2, aborted below
    _data(lg, 2, 2, 0)  # 3-4, committed
    _marker(lg, 1, ControlRecordType.ABORT)  # 5
    lg.roll()
    _marker(lg, 2, ControlRecordType.COMMIT)  # 6
    _data(lg, 3, 2, 0)  # 7-8, still open


def test_crash_recovery_rebuilds_lso_ongoing_and_txn_index(
        make_log: MakeLog, tmp_path: Path) -> None:
    lg = make_log(name="t-0")
    _history(lg)
    before = _state(lg)
    assert before == (7, [(1, 0)], [(1, 0, 5, 3)], {1: None, 2: None, 3: 7})
    # a crash: the files as they are, no clean shutdown, no final snapshot
    shutil.copytree(lg.dir, tmp_path / "crashed-0")
    assert _state(make_log(name="crashed-0")) == before


def test_recovery_without_txn_index_files_rebuilds_them(
        make_log: MakeLog, tmp_path: Path) -> None:
    lg = make_log(name="t-0")
    _history(lg)
    before = _state(lg)
    shutil.copytree(lg.dir, tmp_path / "lost-0")
    for f in (tmp_path / "lost-0").iterdir():
        if f.suffix in (".txnindex", ".snapshot", ".index", ".timeindex"):
            f.unlink()
    assert _state(make_log(name="lost-0")) == before


def test_snapshot_carries_the_transactional_fields(make_log: MakeLog) -> None:
    lg = make_log(name="s-0")
    _data(lg, 9, 2, 0)
    _marker(lg, 9, ControlRecordType.COMMIT, coordinator_epoch=4)
    _data(lg, 9, 1, 2)  # a new transaction of the same producer: first offset 3
    lg.take_producer_snapshot()
    snap = lg.producer_state.snapshot_file_for(lg.log_end_offset)
    assert snap is not None
    [entry] = read_snapshot(Path(snap))
    assert (entry.producer_id, entry.coordinator_epoch, entry.current_txn_first_offset) == (
        9, 4, 3)
    lg.close()
    reopened = make_log(name="s-0")
    e = reopened.producer_state.last_entry(9)
    assert e is not None and (e.coordinator_epoch, e.current_txn_first_offset) == (4, 3)
    reopened.update_high_watermark(reopened.log_end_offset)
    assert reopened.last_stable_offset == 3
