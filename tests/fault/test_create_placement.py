"""Creating partitions: the least-loaded dir from counts kept as logs come and go, and
Log.open outside the LogManager's lock (two creators of one partition share one log)."""

from __future__ import annotations

import threading
from pathlib import Path

from tidelog.storage.manager import LogManager
from tidelog.util.clock import ManualClock
from tidelog.util.scheduler import ManualScheduler
from tidelog.util.topic_partition import TopicPartition


def _manager(dirs: list[Path]) -> LogManager:
    clock = ManualClock()
    m = LogManager(dirs, {}, clock=clock, scheduler=ManualScheduler(clock))
    m.startup()
    return m


def test_partitions_spread_evenly_and_counts_follow_deletes(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    m = _manager(dirs)
    try:
        for p in range(9):
            m.get_or_create_log(TopicPartition("t", p))
        per_dir = {d: len(list(d.glob("t-*"))) for d in dirs}
        assert sorted(per_dir.values()) == [3, 3, 3]
        in_a = [tp for tp in (TopicPartition("t", p) for p in range(9))
                if Path(m._require_log(tp).dir).parent == dirs[0].resolve()]
        for tp in in_a:
            m.delete_log(tp)
        assert m._logs.counts[dirs[0].resolve()] == 0  # type: ignore[attr-defined]
        new = m.get_or_create_log(TopicPartition("u", 0))
        assert Path(new.dir).parent == dirs[0].resolve()  # the emptied dir is least loaded
    finally:
        m.shutdown()


def test_concurrent_creators_of_one_partition_get_the_same_log(tmp_path: Path) -> None:
    m = _manager([tmp_path / "a", tmp_path / "b"])
    try:
        got: list[object] = []
        start = threading.Barrier(8)

        def create() -> None:
            start.wait()
            got.append(m.get_or_create_log(TopicPartition("same", 0)))

        threads = [threading.Thread(target=create) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert len(got) == 8 and len({id(lg) for lg in got}) == 1
        assert len(list(tmp_path.glob("*/same-0"))) == 1
        assert not m._creating
    finally:
        m.shutdown()
