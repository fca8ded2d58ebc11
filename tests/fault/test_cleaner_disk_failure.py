"""The log cleaner's I/O errors reach the LogDirFailureChannel (Kafka's LogCleaner.cleanLog:
an IOException takes the log's dir offline), on a real xfs file system shut down under it
(root; skipped with the reason elsewhere): the dir goes offline once, its partitions are
offline, the partition is not merely marked uncleanable, and the other dir keeps serving."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tidelog.records import RecordBatchBuilder
from tidelog.storage.cleaner import CleanerConfig
from tidelog.storage.errors import KafkaStorageError
from tidelog.storage.manager import LogManager
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler
from tidelog.util.topic_partition import TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fault_loopfs import loop_fs

NOW = 1_700_000_000_000
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "4096"}


def _fill(m: LogManager, tp: TopicPartition) -> None:
    lg = m.get_or_create_log(tp, COMPACTED)
    for i in range(200):  # the same 10 keys over and over: plenty for the cleaner to drop
        b = RecordBatchBuilder()
        b.append(NOW + i, f"key{i % 10}".encode(), b"v" * 100)
        lg.append_as_leader(b.build())
    lg.roll()
    lg.flush(lg.log_end_offset)
    lg.maybe_increment_high_watermark(lg.log_end_offset)


def test_cleaner_eio_takes_its_dir_offline(tmp_path: Path) -> None:
    healthy = tmp_path / "healthy"
    with loop_fs(tmp_path, "xfs") as fs:
        failing = fs.mountpoint / "data"
        clock = ManualClock(NOW)
        # no cleaner threads: the test runs the cleaner's iterations itself
        m = LogManager([healthy, failing], {}, clock=clock, scheduler=ManualScheduler(clock),
                       cleaner_config=CleanerConfig(num_threads=0, backoff_ms=1))
        m.startup()
        try:
            tps = [TopicPartition("compacted", p) for p in range(2)]
            for tp in tps:
                _fill(m, tp)
            on_failing = [tp for tp in tps if Path(m._require_log(tp).dir).parent == failing]
            assert len(on_failing) == 1
            assert m.cleaner is not None
            fs.shutdown()  # every later read, write and fsync on it fails with EIO
            for _ in range(4):  # the filthiest log first, then the other
                m.cleaner.clean_once()
            assert m.failure_channel.has_offline_log_dir(failing)
            assert "cleaning" in (m.failure_channel.offline_reason(failing) or "")
            assert not m.failure_channel.has_offline_log_dir(healthy)
            with pytest.raises(KafkaStorageError):
                m.get_or_create_log(on_failing[0])
            other = next(tp for tp in tps if tp not in on_failing)
            assert m.get_log(other) is not None  # the healthy dir's log still serves
            assert m.cleaner.last_stats.get(other) is not None  # and was cleaned
            assert not any(m.cleaner.manager.uncleanable.values())
        finally:
            m.shutdown()
