"""A real cleaner thread compacting while the test appends and reads (no sleeps: the writer
runs a fixed amount of work, then the cleaner is shut down and the result checked)."""

from __future__ import annotations

import threading
from pathlib import Path

from cleaner_helpers import append, kov, open_log, read_records

from tidelog.storage.cleaner import CleanerConfig, LogCleaner
from tidelog.util.clock import SystemClock
from tidelog.util.scheduler import KafkaScheduler


def test_cleaner_thread_with_concurrent_appends_and_reads(tmp_path: Path) -> None:
    clock = SystemClock()
    # As in the broker, replaced segments are deleted after file.delete.delay.ms (default 60 s)
    # by the scheduler, so a reader still holding one finishes its read (Kafka's asyncDelete).
    scheduler = KafkaScheduler()
    scheduler.startup()
    lg = open_log(tmp_path / "busy-0", clock, scheduler, segment_bytes=2048,
                  min_cleanable_dirty_ratio=0.01)
    assert lg.topic_partition is not None
    logs = {lg.topic_partition: lg}
    cfg = CleanerConfig(dedupe_buffer_size=24 * 4096, io_buffer_size=4096, backoff_ms=1)
    cleaner = LogCleaner(cfg, [tmp_path], lambda: logs, clock)
    errors: list[BaseException] = []
    done = threading.Event()

    passes = 0

    def reader() -> None:
        nonlocal passes
        try:
            # a pass, then 1 ms off the GIL: a reader that never lets go of it convoys the
            # appends behind the log's lock (each wait for it costs a 5 ms switch interval),
            # which once stretched this test past its timeout
            while not done.wait(0.001):
                offsets = [r.offset for r in read_records(lg)]
                assert offsets == sorted(set(offsets))
                passes += 1
        except BaseException as e:  # surfaced below
            errors.append(e)

    latest: dict[bytes, tuple[int, bytes]] = {}
    cleaner.startup()
    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(1500):
            key, value = b"k%d" % (i % 50), b"v%d" % i
            first, _last = append(lg, [(key, value)])
            latest[key] = (first, value)
    finally:
        done.set()
        t.join(60)
        cleaner.shutdown()
        scheduler.shutdown()
    assert not errors, errors
    assert not t.is_alive()
    assert passes > 0  # the reader read beside the appends and the cleaning
    assert cleaner.manager.all_cleaner_checkpoints()  # it did clean meanwhile
    got = {key: (off, value) for off, key, value in kov(lg)}
    assert got == latest  # the latest value of every key, at its original offset
    assert len(kov(lg)) < 1500
    lg.close()
    reopened = open_log(tmp_path / "busy-0", clock)
    assert {key: (off, value) for off, key, value in kov(reopened)} == latest
    reopened.close()
