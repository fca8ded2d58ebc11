"""A translation worker process that dies at every flush (a real process, ended by its fault
hook in the middle of each write) is started again only after a backoff that doubles with each
death in a row (1 s, 2 s, 4 s, ..., at most 30 s: Kafka's exponential backoffs), counted on an
injected clock: however often the flushes retry meanwhile, no worker starts before its time.
Once the fault is gone, the next worker translates every acknowledged record once, and a good
flush resets the backoff. The segment files a flush hands the worker are closed by it when it
answers."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from iceberg_support import (
    Acked,
    check_rows_once,
    create_topic,
    end_offsets,
    iceberg_props,
    produce_serialized,
    serialize_orders,
    wait_for_offsets,
    wait_until,
)

from tidelog.iceberg.worker_tables import WorkerTables, respawn_backoff_s
from tidelog.testing import EmbeddedBroker
from tidelog.util.clock import ManualClock


def test_backoff_doubles_from_one_second_up_to_its_cap() -> None:
    assert [respawn_backoff_s(n) for n in range(8)] == [0, 1, 2, 4, 8, 16, 30, 30]
    assert respawn_backoff_s(10_000) == 30


def _segments_open(pid: int | None) -> list[str]:
    """The segment files (``.log``) process ``pid`` has open."""
    assert pid is not None
    out = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed meanwhile
            continue
        if target.endswith(".log"):
            out.append(target)
    return out


def _held_back_more(worker: WorkerTables, n: int) -> None:
    """Wait until ``n`` more calls were refused for the backoff (the flushes retry)."""
    start = worker.held_back
    wait_until(lambda: worker.held_back >= start + n, f"{n} more flushes held back",
               timeout=60)


def test_a_worker_that_dies_at_every_flush_is_started_again_after_a_doubling_backoff(
        tmp_path: Path) -> None:
    props = iceberg_props(**{"iceberg.translation.process": "true",
                             "iceberg.target.lag.ms": "100"})
    with EmbeddedBroker(props, log_dir=tmp_path) as b:
        assert b.iceberg is not None and b.iceberg.worker is not None
        worker = b.iceberg.worker
        clock = ManualClock(nanos=1_000_000_000)
        worker.clock = clock
        topic = "crashing"
        create_topic(b.bootstrap_servers, topic, 2,
                     **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        serialized = serialize_orders(b.schema_registry_url, topic, range(400))
        acked: Acked = produce_serialized(b.bootstrap_servers, topic, serialized[:100])
        wait_for_offsets(tmp_path, topic, end_offsets(acked))  # a good flush first
        # the worker read the batches from the segment files handed over with the flush,
        # and closed them when it answered
        wait_until(lambda: not _segments_open(worker.pid), "the worker's segment files closed")

        worker.fault = "write"  # every worker started from now on dies in each write
        pid = worker.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        acked.update(produce_serialized(b.bootstrap_servers, topic, serialized[100:200]))
        wait_until(lambda: worker.deaths == 1, "the killed worker's death seen")
        starts = worker.starts
        for deaths, backoff_s in enumerate([1, 2, 4, 8], start=1):
            assert worker.failures == deaths
            _held_back_more(worker, 3)  # flushes go on failing at once: no start ...
            clock.advance(backoff_s * 1000 - 1)
            _held_back_more(worker, 3)  # ... until the whole backoff has passed
            assert worker.starts == starts and worker.deaths == deaths
            clock.advance(1)
            wait_until(lambda d=deaths: worker.deaths == d + 1,  # type: ignore[misc]
                       "a worker started after the backoff, and died in its write",
                       timeout=120)
            starts += 1
            assert worker.starts == starts
        assert b.iceberg.topics[topic].failing is not None  # translation paused throughout

        worker.fault = None  # the fault is gone: the next worker translates
        acked.update(produce_serialized(b.bootstrap_servers, topic, serialized[200:]))
        clock.advance(16_000)
        table = wait_for_offsets(tmp_path, topic, end_offsets(acked), timeout=120)
        check_rows_once(table.scan().to_arrow().to_pylist(), acked)
        assert worker.starts == starts + 1 and worker.deaths == 5
        wait_until(lambda: worker.failures == 0, "the backoff reset by a good flush")
        wait_until(lambda: b.iceberg is not None and b.iceberg.topics[topic].failing is None,
                   "translation resumed")
