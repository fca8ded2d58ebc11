"""Local retention of a tiered log (remote.storage.enable): local.retention.* apply, only
segments already copied (Log.highest_offset_in_remote_storage) or below a DeleteRecords'd
log start go, and the log start offset stays the remote one; the loader keeps it below the
first local segment after a restart."""

from __future__ import annotations

from pathlib import Path

from tidelog.config.log_config import LogConfig
from tidelog.records import RecordBatchBuilder
from tidelog.storage.log import Log
from tidelog.util.clock import ManualClock

NOW = 1_700_000_000_000


def _log(path: Path, clock: ManualClock, **configs: str) -> Log:
    cfg = LogConfig.from_props({"segment.bytes": "600", "remote.storage.enable": "true",
                                "file.delete.delay.ms": "0", **configs})
    return Log.open(path, cfg, clock=clock)


def _fill(lg: Log, n: int) -> None:
    for i in range(n):
        b = RecordBatchBuilder()
        b.append(NOW + i, None, b"x" * 200)
        lg.append_as_leader(b.build(), leader_epoch=0)
    lg.update_high_watermark(lg.log_end_offset)


def test_nothing_uncopied_is_deleted_whatever_the_limits(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    lg = _log(tmp_path / "t-0", clock, **{"local.retention.bytes": "1", "retention.ms": "-1"})
    _fill(lg, 12)
    segments = lg.number_of_segments()
    assert segments > 3
    assert lg.delete_old_segments() == 0  # nothing copied yet
    assert lg.number_of_segments() == segments
    bases = [s.base_offset for s in lg.segments.values()]
    lg.highest_offset_in_remote_storage = bases[2] - 1  # the first two segments copied
    assert lg.delete_old_segments() == 2
    assert [s.base_offset for s in lg.segments.values()] == bases[2:]
    assert lg.log_start_offset == 0  # the remote start: not moved by local retention
    assert lg.local_log_start_offset == bases[2]
    lg.highest_offset_in_remote_storage = lg.log_end_offset - 1  # everything copied
    lg.delete_old_segments()
    assert lg.size_in_bytes == 0 or lg.number_of_segments() == 1
    assert lg.log_start_offset == 0
    lg.close()


def test_local_retention_ms_and_plain_logs_unchanged(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    lg = _log(tmp_path / "t-0", clock, **{"local.retention.ms": "1000",
                                          "retention.ms": "100000"})
    _fill(lg, 12)
    lg.highest_offset_in_remote_storage = lg.log_end_offset - 1
    assert lg.delete_old_segments() == 0  # not older than local.retention.ms yet
    clock.advance(5000)
    assert lg.delete_old_segments() > 0
    assert lg.log_start_offset == 0
    lg.close()
    plain = Log.open(tmp_path / "p-0", LogConfig.from_props({
        "segment.bytes": "600", "retention.bytes": "1", "file.delete.delay.ms": "0"}),
        clock=clock)
    _fill(plain, 12)
    assert plain.delete_old_segments() > 0  # no remote storage: nothing to wait for
    assert plain.log_start_offset == plain.segments.first_segment_base_offset
    plain.close()


def test_delete_records_below_uncopied_segments_still_deletes_them(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    lg = _log(tmp_path / "t-0", clock, **{"local.retention.bytes": "1", "retention.ms": "-1"})
    _fill(lg, 12)
    bases = [s.base_offset for s in lg.segments.values()]
    lg.maybe_increment_log_start_offset(bases[1], "client delete records")
    assert lg.delete_old_segments() == 1  # below the log start: no copy needed
    assert lg.segments.first_segment_base_offset == bases[1]
    lg.close()


def test_restart_keeps_the_remote_log_start(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    lg = _log(tmp_path / "t-0", clock, **{"local.retention.bytes": "1", "retention.ms": "-1"})
    _fill(lg, 12)
    lg.highest_offset_in_remote_storage = lg.log_end_offset - 1
    lg.delete_old_segments()
    first = lg.segments.first_segment_base_offset
    assert first is not None and first > 0
    lg.close()
    again = Log.open(tmp_path / "t-0", lg.config, clock=clock, log_start_offset=0)
    assert again.log_start_offset == 0  # remote data below the first local segment
    assert again.local_log_start_offset == first
    again.close()


def test_an_active_segment_past_local_retention_is_rolled_to_be_copied(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    lg = _log(tmp_path / "t-0", clock, **{"local.retention.ms": "1000", "retention.ms": "-1",
                                          "segment.bytes": "100000"})
    _fill(lg, 3)
    assert lg.delete_old_segments() == 0
    assert lg.number_of_segments() == 1  # within local.retention.ms
    clock.advance(2000)
    assert lg.delete_old_segments() == 0  # nothing copied: nothing deleted, but rolled
    assert lg.number_of_segments() == 2
    assert lg.active_segment.base_offset == 3 and lg.active_segment.size == 0
    lg.close()


def test_tiered_list_offsets_specials(tmp_path: Path) -> None:
    from tidelog.storage.log_tiered_offsets import (
        EARLIEST_LOCAL_TIMESTAMP,
        EARLIEST_PENDING_UPLOAD_TIMESTAMP,
        LATEST_TIERED_TIMESTAMP,
    )

    clock = ManualClock(NOW)
    lg = _log(tmp_path / "t-0", clock, **{"local.retention.bytes": "1", "retention.ms": "-1"})
    _fill(lg, 12)

    def offset(ts: int) -> int:
        found = lg.fetch_offset_by_timestamp(ts)
        assert found is not None
        return found.offset

    assert offset(LATEST_TIERED_TIMESTAMP) == -1  # nothing copied
    assert offset(EARLIEST_PENDING_UPLOAD_TIMESTAMP) == 0
    bases = [s.base_offset for s in lg.segments.values()]
    lg.highest_offset_in_remote_storage = bases[3] - 1
    lg.delete_old_segments()
    assert offset(LATEST_TIERED_TIMESTAMP) == bases[3] - 1
    assert offset(EARLIEST_PENDING_UPLOAD_TIMESTAMP) == bases[3]
    assert offset(EARLIEST_LOCAL_TIMESTAMP) == bases[3]
    assert offset(-2) == 0  # EARLIEST: the remote start
    lg.close()
    plain = Log.open(tmp_path / "p-0", LogConfig.from_props({}), clock=clock)
    _fill(plain, 2)
    found = plain.fetch_offset_by_timestamp(EARLIEST_PENDING_UPLOAD_TIMESTAMP)
    assert found is not None and found.offset == -1  # not tiered: none
    plain.close()
