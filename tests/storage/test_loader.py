"""LogLoader: recovery, leftovers of interrupted operations, index rebuild (#74, #92-#103)."""
# ruff: noqa: F811  (pytest fixtures imported from test_log_support)

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from test_log_support import T0, batch, clock, make_log, values_from  # noqa: F401

from tidelog.config.log_config import LogConfig
from tidelog.storage.log import FetchIsolation, Log
from tidelog.util.clock import ManualClock

MakeLog = Callable[..., Log]
ONE = len(batch(b"0000000000"))
PROPS = {"segment.bytes": str(5 * ONE), "index.interval.bytes": "1"}


def build(make_log: MakeLog, n: int = 15, **kw: object) -> Log:
    lg = make_log(PROPS, **kw)
    for i in range(n):
        lg.append_as_leader(batch(b"%010d" % i, ts=T0 + i))
    return lg


def crash(lg: Log) -> None:
    """Drop the log without flushing, trimming or snapshotting (kill -9)."""
    lg.close_handlers()


def reopen(lg: Log, clock: ManualClock, *, clean: bool = False, **kw: object) -> Log:
    kw.setdefault("recovery_point", lg.recovery_point)
    kw.setdefault("log_start_offset", lg.log_start_offset)
    return Log.open(lg.dir, lg.config, clock=clock, had_clean_shutdown=clean,
                    **kw)  # type: ignore[arg-type]


def all_values(lg: Log) -> list[tuple[int, bytes | None]]:
    return values_from(lg, lg.log_start_offset, isolation=FetchIsolation.LOG_END)


def seg_file(lg: Log, base: int, suffix: str = ".log") -> Path:
    return lg.dir / f"{base:020d}{suffix}"


def test_clean_shutdown_skips_recovery(make_log: MakeLog, clock: ManualClock) -> None:
    # #92: recovery point 0 is ignored; recovery point becomes the LEO
    lg = build(make_log)
    expected = all_values(lg)
    lg.close()
    # garbage that recovery would cut but a clean load leaves in place
    with open(seg_file(lg, 0), "ab") as f:
        f.write(b"\x00" * 5)
    lg2 = reopen(lg, clock, clean=True, recovery_point=0)
    assert lg2.log_end_offset == 15 and lg2.recovery_point == 15
    assert seg_file(lg, 0).stat().st_size == 5 * ONE + 5
    assert all_values(lg2) == expected
    lg2.close()


def test_unclean_recovery_point_only_advances_on_flush(make_log: MakeLog,
                                                        clock: ManualClock) -> None:
    # #93 testLogRecoversToCorrectOffset
    lg = build(make_log)
    lg.flush(10)
    crash(lg)
    lg2 = reopen(lg, clock)
    assert (lg2.log_end_offset, lg2.recovery_point) == (15, 10)
    lg2.flush()
    assert lg2.recovery_point == 15
    lg2.close()


@pytest.mark.parametrize("damage", ["garbage", "zeros", "truncated", "bitflip"])
def test_recovery_of_damaged_active_segment(make_log: MakeLog, clock: ManualClock,
                                            damage: str) -> None:
    # #94 and issue 3's list: garbage appended, truncated last batch, bit flipped in it
    lg = build(make_log, 13)
    expected = all_values(lg)
    crash(lg)
    active = seg_file(lg, 10)
    data = bytearray(active.read_bytes())
    if damage == "garbage":
        data += os.urandom(100)
        with open(seg_file(lg, 10, ".index"), "ab") as f:
            f.write(os.urandom(24))
    elif damage == "zeros":
        data += bytes(200)
    elif damage == "truncated":
        del data[-7:]
    else:
        data[-3] ^= 0x10
    active.write_bytes(bytes(data))
    lg2 = reopen(lg, clock, recovery_point=0)
    survivors = expected if damage in ("garbage", "zeros") else expected[:-1]
    assert all_values(lg2) == survivors
    assert lg2.log_end_offset == survivors[-1][0] + 1
    assert lg2.append_as_leader(batch(b"new")).first_offset == lg2.log_end_offset - 1
    lg2.close()


def test_corruption_in_middle_segment_deletes_later_segments(make_log: MakeLog,
                                                              clock: ManualClock) -> None:
    # #93: a segment that loses bytes takes every later segment with it
    lg = build(make_log)
    crash(lg)
    mid = seg_file(lg, 5)
    data = bytearray(mid.read_bytes())
    data[2 * ONE + 30] ^= 0xFF  # the third batch of segment 5 (offset 7)
    mid.write_bytes(bytes(data))
    lg2 = reopen(lg, clock, recovery_point=0)
    assert [o for o, _ in all_values(lg2)] == list(range(7))
    assert lg2.segments.base_offsets() == [0, 5]
    assert not seg_file(lg, 10).exists()
    lg2.close()


def test_recovery_starts_at_recovery_point_segment(make_log: MakeLog, clock: ManualClock) -> None:
    # segments below the recovery point are trusted (not scanned)
    lg = build(make_log)
    lg.flush(10)
    crash(lg)
    first = seg_file(lg, 0)
    data = bytearray(first.read_bytes())
    data[40] ^= 0xFF  # corrupt, but below the recovery point: not recovered
    first.write_bytes(bytes(data))
    lg2 = reopen(lg, clock)
    assert lg2.log_end_offset == 15 and lg2.segments.base_offsets() == [0, 5, 10]
    lg2.close()


@pytest.mark.parametrize("which", [".index", ".timeindex", "both", "corrupt-index"])
def test_missing_or_corrupt_index_rebuilt(make_log: MakeLog, clock: ManualClock,
                                          which: str) -> None:
    # #95, #74: indexes rebuilt; every offset and timestamp resolves again
    lg = build(make_log)
    lg.close()
    for base in (0, 5):
        if which in (".index", "both"):
            seg_file(lg, base, ".index").unlink()
        if which in (".timeindex", "both"):
            seg_file(lg, base, ".timeindex").unlink()
        if which == "corrupt-index":
            seg_file(lg, base, ".index").write_bytes(b"\x00\x00\x00\x01\x00\x00\x00")
    lg2 = reopen(lg, clock, clean=True)
    assert seg_file(lg, 0, ".index").stat().st_size > 0 or which == ".timeindex"
    for i in range(15):
        found = lg2.fetch_offset_by_timestamp(T0 + i)
        assert found is not None and found.offset == i
    assert [o for o, _ in all_values(lg2)] == list(range(15))
    lg2.close()


def test_orphan_indexes_and_deleted_files_removed(make_log: MakeLog, clock: ManualClock) -> None:
    # #96
    lg = build(make_log, 5)
    lg.close()
    for name in ("00000000000000000100.index", "00000000000000000100.timeindex",
                 "00000000000000000100.txnindex", "00000000000000000200.log.deleted",
                 "00000000000000000200.index.deleted"):
        (lg.dir / name).write_bytes(b"x" * 16)
    lg2 = reopen(lg, clock, clean=True)
    names = sorted(p.name for p in lg.dir.iterdir())
    assert not any(n.startswith(("00000000000000000100", "00000000000000000200"))
                   for n in names)
    assert lg2.log_end_offset == 5
    lg2.close()


def _clone_segment(lg: Log, base: int, suffix: str) -> None:
    for ext in (".log", ".index", ".timeindex"):
        src = seg_file(lg, base, ext)
        if src.exists():
            shutil.copy(src, seg_file(lg, base, ext + suffix))


def test_cleaned_files_deleted_and_original_kept(make_log: MakeLog, clock: ManualClock) -> None:
    # #97: a crash before the swap: .cleaned are dropped, .swap above them too
    lg = build(make_log)
    lg.close()
    _clone_segment(lg, 0, ".cleaned")
    _clone_segment(lg, 5, ".swap")  # base 5 >= min cleaned base 0: incomplete split
    lg2 = reopen(lg, clock, clean=True)
    names = [p.name for p in lg.dir.iterdir()]
    assert not any(n.endswith((".cleaned", ".swap")) for n in names)
    assert [o for o, _ in all_values(lg2)] == list(range(15))
    lg2.close()


def test_swap_completed(make_log: MakeLog, clock: ManualClock) -> None:
    # #97: a .log.swap replacing segments 0 and 5 is renamed in; the segments it replaces
    # (offsets in [min swap base, max swap next offset)) are deleted
    lg = build(make_log)
    lg.close()
    # the "cleaned" replacement: a copy of segment 0 followed by segment 5's batches
    swap = seg_file(lg, 0, ".log.swap")
    swap.write_bytes(seg_file(lg, 0).read_bytes() + seg_file(lg, 5).read_bytes())
    lg2 = reopen(lg, clock, clean=True)
    assert lg2.segments.base_offsets() == [0, 10]
    assert not seg_file(lg, 5).exists() and not swap.exists()
    assert [o for o, _ in all_values(lg2)] == list(range(15))
    lg2.close()


def test_empty_directory_starts_at_log_start_offset(make_log: MakeLog) -> None:
    # #98 testLogReinitializeAfterManualDelete
    lg = make_log(log_start_offset=500)
    assert (lg.log_start_offset, lg.log_end_offset) == (500, 500)
    assert lg.segments.base_offsets() == [500]
    assert lg.append_as_leader(batch(b"a")).first_offset == 500


def test_log_end_below_log_start(make_log: MakeLog, clock: ManualClock) -> None:
    # #99 testLogEndLessThanStartAfterReopen: 1 segment, logStartOffset = LEO = checkpoint
    lg = build(make_log, 3)
    lg.close()
    lg2 = reopen(lg, clock, clean=True, log_start_offset=4)
    assert lg2.segments.base_offsets() == [4]
    assert (lg2.log_start_offset, lg2.log_end_offset) == (4, 4)
    lg2.close()


def test_log_start_offset_is_max_of_checkpoint_and_first_base(make_log: MakeLog,
                                                               clock: ManualClock) -> None:
    # #100
    lg = build(make_log)
    lg.close()
    assert reopen(lg, clock, clean=True, log_start_offset=7).log_start_offset == 7
    shutil.rmtree(lg.dir / "x", ignore_errors=True)


def test_snapshots_on_roll_and_close_and_stray_removal(make_log: MakeLog,
                                                       clock: ManualClock) -> None:
    # #101, #103: segments 0, 1, 2 (holding 2-3): snapshots 1, 2 (rolls) and 4 (close);
    # a stray 3 is removed on load, the largest stray (4, above every base) is kept
    lg = make_log()

    def append(i: int) -> None:
        lg.append_as_leader(batch(b"%d" % i, producer_id=1, producer_epoch=0, base_sequence=i))

    append(0)
    lg.roll()
    append(1)
    lg.roll()
    append(2)
    append(3)
    lg.close()
    assert sorted(int(p.name[:20]) for p in lg.dir.glob("*.snapshot")) == [1, 2, 4]
    shutil.copy(lg.dir / "00000000000000000002.snapshot", lg.dir / "00000000000000000003.snapshot")
    lg2 = reopen(lg, clock, clean=True)
    assert sorted(int(p.name[:20]) for p in lg.dir.glob("*.snapshot")) == [1, 2, 4]
    assert lg2.producer_state.last_entry(1).last_seq == 3  # type: ignore[union-attr]
    lg2.close()


@pytest.mark.parametrize("clean", [True, False])
def test_duplicate_detection_survives_restart(make_log: MakeLog, clock: ManualClock,
                                              clean: bool) -> None:
    # #102: producer state rebuilt from snapshot + log
    lg = make_log({"segment.bytes": str(3 * ONE)})
    batches = [batch(b"%010d" % i, producer_id=42, producer_epoch=0, base_sequence=i)
               for i in range(7)]
    for b in batches:
        lg.append_as_leader(b)
    if clean:
        lg.close()
    else:
        crash(lg)
        for p in lg.dir.glob("*.snapshot"):
            p.unlink()  # force a full replay of the log
    lg2 = reopen(lg, clock, clean=clean, recovery_point=0)
    # a snapshot restores only a producer's last batch (Kafka), and recovery snapshots
    # each recovered segment, so only the last batch is known after either restart
    for i in (6,):
        dup = lg2.append_as_leader(batches[i])
        assert dup.duplicate and dup.first_offset == i
    assert lg2.log_end_offset == 7
    nxt = lg2.append_as_leader(batch(b"n", producer_id=42, producer_epoch=0, base_sequence=7))
    assert nxt.first_offset == 7
    lg2.close()


def test_clean_shutdown_without_snapshots_writes_empty_ones(make_log: MakeLog,
                                                           clock: ManualClock) -> None:
    # #102: no snapshot + clean shutdown -> empty snapshots at the last two bases and LEO
    lg = build(make_log)
    lg.close()
    for p in lg.dir.glob("*.snapshot"):
        p.unlink()
    lg2 = reopen(lg, clock, clean=True)
    assert lg2.producer_state.snapshot_offsets() == [5, 10, 15]
    lg2.close()


def test_preallocated_segments_recover_after_crash(tmp_path: Path, clock: ManualClock) -> None:
    cfg = LogConfig.from_props({"segment.bytes": "4096", "preallocate": "true"})
    lg = Log.open(tmp_path / "p-0", cfg, clock=clock)
    for i in range(5):
        lg.append_as_leader(batch(b"%d" % i))
    assert (lg.dir / "00000000000000000000.log").stat().st_size == 4096
    lg.close_handlers()
    lg2 = Log.open(lg.dir, cfg, clock=clock, recovery_point=0)
    assert lg2.log_end_offset == 5
    assert [o for o, _ in all_values(lg2)] == list(range(5))
    lg2.close()
