"""Leader epoch cache (#148-#150), its checkpoint file, and its upkeep by the Log (#41, #80)."""
# ruff: noqa: F811  (pytest fixtures imported from test_log_support)

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from test_log_support import batch, clock, make_log  # noqa: F401

from tidelog.storage.leader_epoch import EpochEntry, LeaderEpochFileCache
from tidelog.storage.log import Log
from tidelog.util.clock import ManualClock

MakeLog = Callable[..., Log]


def pairs(cache: LeaderEpochFileCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.entries]


def test_assign_rules(tmp_path: Path) -> None:
    # #148
    c = LeaderEpochFileCache(tmp_path)
    with pytest.raises(ValueError):
        c.assign(-1, 0)
    c.assign(2, 9)
    c.assign(3, 9)
    assert pairs(c) == [(3, 9)]  # shouldEnforceMonotonicallyIncreasingStartOffsets
    assert not c.assign(3, 12)  # same latest epoch at a later start: ignored
    (tmp_path / "d").mkdir()
    d = LeaderEpochFileCache(tmp_path / "d")
    for e, o in ((5, 11), (6, 12), (7, 13)):
        d.assign(e, o)
    d.assign(7, 12)
    assert pairs(d) == [(5, 11), (7, 12)]
    assert d.end_offset_for(5, 100) == (5, 12)


def test_end_offset_for(tmp_path: Path) -> None:
    # #149
    c = LeaderEpochFileCache(tmp_path)
    for e, o in ((1, 11), (2, 13), (3, 15)):
        c.assign(e, o)
    assert c.end_offset_for(2, 20) == (2, 15)
    assert c.end_offset_for(3, 20) == (3, 20)
    assert c.end_offset_for(0, 20) == (0, 11)
    assert c.end_offset_for(-1, 20) == (-1, -1)
    assert c.end_offset_for(4, 20) == (-1, -1)  # newer than any known epoch (raised before)
    assert LeaderEpochFileCache(tmp_path / "empty").end_offset_for(1, 5) == (-1, -1)


def test_truncation(tmp_path: Path) -> None:
    # #150
    c = LeaderEpochFileCache(tmp_path)
    for e, o in ((2, 6), (3, 8), (4, 11)):
        c.assign(e, o)
    c.truncate_from_start(9)
    assert pairs(c) == [(3, 9), (4, 11)]
    c.truncate_from_end(11)
    assert pairs(c) == [(3, 9)]


def test_checkpoint_file_format_and_reload(tmp_path: Path) -> None:
    c = LeaderEpochFileCache(tmp_path)
    c.assign(0, 0)
    c.assign(4, 17)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n4 17\n"
    assert LeaderEpochFileCache(tmp_path).entries == [EpochEntry(0, 0), EpochEntry(4, 17)]
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n")  # torn
    assert LeaderEpochFileCache(tmp_path).entries == []


def test_log_assigns_epochs_on_append(make_log: MakeLog) -> None:
    lg = make_log()
    lg.append_as_leader(batch(b"a"), leader_epoch=0)
    lg.append_as_leader(batch(b"b"), leader_epoch=0)
    lg.append_as_leader(batch(b"c"), leader_epoch=2)
    assert pairs(lg.leader_epoch_cache) == [(0, 0), (2, 2)]
    assert lg.end_offset_for_epoch(0) == (0, 2)
    assert lg.end_offset_for_epoch(1) == (0, 2)
    assert lg.end_offset_for_epoch(2) == (2, 3)
    lg.truncate_to(2)
    assert pairs(lg.leader_epoch_cache) == [(0, 0)]
    lg.truncate_fully_and_start_at(10)
    assert pairs(lg.leader_epoch_cache) == []


def test_retention_truncates_epochs_from_start(make_log: MakeLog) -> None:
    # #80: epochs (0@0), (1@3) and every segment expired at LEO 6 -> [(1, 6)]
    one = len(batch(b"x"))
    lg = make_log({"segment.bytes": str(one), "retention.ms": "1"})
    for i in range(6):
        lg.append_as_leader(batch(b"x", ts=1), leader_epoch=0 if i < 3 else 1)
    lg.update_high_watermark(6)
    lg.delete_old_segments()
    assert pairs(lg.leader_epoch_cache) == [(1, 6)]


def test_recovery_rebuilds_epochs(make_log: MakeLog, clock: ManualClock) -> None:
    # #41: batch epochs 0, 1, 1, 2 -> [(0, 0), (1, 1), (2, 3)] after losing the checkpoint
    lg = make_log()
    for epoch in (0, 1, 1, 2):
        lg.append_as_leader(batch(b"v"), leader_epoch=epoch)
    lg.close_handlers()
    (lg.dir / "leader-epoch-checkpoint").unlink()
    lg2 = Log.open(lg.dir, lg.config, clock=clock, recovery_point=0)
    assert pairs(lg2.leader_epoch_cache) == [(0, 0), (1, 1), (2, 3)]
    assert lg2.fetch_offset_by_timestamp(-1).leader_epoch == 2  # type: ignore[union-attr]
    assert lg2.fetch_offset_by_timestamp(-2).leader_epoch == 0  # type: ignore[union-attr]
    lg2.close()


def test_live_entries_are_replaced_never_cut_in_place(tmp_path: Path) -> None:
    """The plain append reads ``live_entries`` without the cache's lock: a list it holds is
    never changed; every change (a newer epoch, an epoch that replaces later ones, a
    truncation, a clear) puts a new, complete list in place."""
    c = LeaderEpochFileCache(tmp_path)
    c.assign(1, 0)
    changes: list[Callable[[], object]] = [
        lambda: c.assign(2, 5),  # a newer epoch
        lambda: c.assign(3, 9),
        lambda: c.assign(3, 7),  # an earlier start of the latest epoch
        lambda: c.truncate_from_end(4),
        lambda: c.truncate_from_start(2),
        c.clear_and_flush,
    ]
    for change in changes:
        held = c.live_entries
        before = list(held)
        change()
        assert c.live_entries is not held and held == before
    assert c.live_entries == [] and pairs(c) == []
