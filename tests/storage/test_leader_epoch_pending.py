"""The leader-epoch cache's pending entry (a LeaderAndIsr's new epoch, its checkpoint written
later by the LeaderAndIsr's log thread) and its flushes: every lookup sees the entry at once,
appends do not take it as known, so the first append of its epoch writes its checkpoint
before its bytes; flushes never wait under the entries' lock and never put an older version
over a newer one."""
# ruff: noqa: F811  (pytest fixtures imported from test_log_support)

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_log_support import batch, clock, make_log  # noqa: F401

from tidelog.storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    LeaderEpochFileCache,
)
from tidelog.storage.log import Log
from tidelog.util.scheduler import KafkaScheduler

MakeLog = Callable[..., Log]
DEADLINE_S = 30


def on_disk(d: Path) -> str:
    return (d / LEADER_EPOCH_CHECKPOINT_FILE).read_text()


def test_a_pending_entry_is_seen_by_lookups_not_by_appends_until_flushed(
        tmp_path: Path) -> None:
    c = LeaderEpochFileCache(tmp_path)
    c.assign(0, 0)
    assert c.assign(3, 10, pending=True)
    assert c.entries == [EpochEntry(0, 0), EpochEntry(3, 10)]
    assert c.end_offset_for(0, 10) == (0, 10) and c.end_offset_for(3, 10) == (3, 10)
    assert c.epoch_for_offset(10) == 3
    assert c.latest_epoch() == 0 and c.live_entries == [EpochEntry(0, 0)]
    assert c.unflushed and on_disk(tmp_path) == "0\n1\n0 0\n"
    assert not c.assign(3, 10, pending=True)  # the same again: nothing new
    c.flush()
    assert on_disk(tmp_path) == "0\n2\n0 0\n3 10\n"
    assert c.latest_epoch() == 3 and not c.unflushed
    assert LeaderEpochFileCache(tmp_path).entries == c.entries


def test_an_append_of_the_pending_epoch_makes_it_live_and_flushes_it(tmp_path: Path) -> None:
    c = LeaderEpochFileCache(tmp_path)
    c.assign(2, 0, pending=True)
    assert c.assign(2, 0, flush=False)  # an append at its start: known now, to be flushed
    assert c.latest_epoch() == 2 and c.unflushed
    c.flush()
    assert on_disk(tmp_path) == "0\n1\n2 0\n"
    assert not c.assign(2, 5)  # later appends of it: nothing new


def test_a_flush_after_a_newer_one_writes_nothing(tmp_path: Path) -> None:
    c = LeaderEpochFileCache(tmp_path)
    writes: list[list[EpochEntry]] = []
    real = c._file.write
    c._file.write = lambda entries: (writes.append(list(entries)), real(entries))[1]  # type: ignore[method-assign]
    c.assign(1, 0, pending=True)
    c.flush()
    c.flush()  # nothing changed since: no write
    assert writes == [[EpochEntry(1, 0)]]


def test_a_slow_flush_blocks_no_change_and_the_newest_entries_win(tmp_path: Path) -> None:
    """A flush held in its write: the entries change meanwhile (the loop's part, never
    waiting for the disk); a second flush waits for the first and writes the newer entries."""
    c = LeaderEpochFileCache(tmp_path)
    entered, release = threading.Event(), threading.Event()
    real = c._file.write

    def slow(entries: list[EpochEntry]) -> None:
        if not entered.is_set():
            entered.set()
            assert release.wait(DEADLINE_S)
        real(entries)

    c._file.write = slow  # type: ignore[method-assign]
    c.assign(1, 0, pending=True)
    first = threading.Thread(target=c.flush)
    first.start()
    assert entered.wait(DEADLINE_S)
    assert c.assign(2, 4, pending=True)  # not held by the write in flight
    assert first.is_alive()  # (that write still held)
    assert c.entries == [EpochEntry(1, 0), EpochEntry(2, 4)]
    second = threading.Thread(target=c.flush)
    second.start()
    release.set()
    first.join(DEADLINE_S)
    second.join(DEADLINE_S)
    assert on_disk(tmp_path) == "0\n2\n1 0\n2 4\n"
    assert not c.unflushed and c.latest_epoch() == 2


def test_the_first_append_of_a_pending_epoch_writes_its_checkpoint(make_log: MakeLog) -> None:
    """The Log's appends (the plain one declines: the reference path starts the epoch)."""
    lg = make_log()
    lg.append_as_leader(batch(b"a"), leader_epoch=0)
    cache = lg.leader_epoch_cache
    assert cache.assign(1, 1, pending=True)
    assert on_disk(lg.dir) == "0\n1\n0 0\n"
    assert lg.append_plain_as_leader(batch(b"b"), 1, 1 << 20) is None  # not its to start
    lg.append_as_leader(batch(b"b"), leader_epoch=1)
    assert on_disk(lg.dir) == "0\n2\n0 0\n1 1\n"
    assert not cache.unflushed and cache.latest_epoch() == 1


def test_a_truncation_writes_a_pending_entry_it_keeps(tmp_path: Path) -> None:
    c = LeaderEpochFileCache(tmp_path)
    for e, o in ((1, 0), (2, 5)):
        c.assign(e, o)
    c.assign(4, 9, pending=True)
    c.truncate_from_start(3)
    assert c.entries == [EpochEntry(1, 3), EpochEntry(2, 5), EpochEntry(4, 9)]
    assert on_disk(tmp_path) == "0\n3\n1 3\n2 5\n4 9\n" and c.latest_epoch() == 4
    c.assign(5, 12, pending=True)
    c.truncate_from_end(12)  # the pending entry is past the end: gone, and written so
    assert on_disk(tmp_path) == "0\n3\n1 3\n2 5\n4 9\n" and c.latest_epoch() == 4
    assert not c.unflushed


@pytest.fixture
def scheduled_log(make_log: MakeLog) -> Iterator[MakeLog]:
    """``make_log`` with a running KafkaScheduler: a truncation's checkpoint is written on
    its thread (Kafka's leader-epoch-cache-flush task)."""
    scheduler = KafkaScheduler(thread_name_prefix="test-scheduler-")
    scheduler.startup()
    yield functools.partial(make_log, scheduler=scheduler)
    scheduler.shutdown()


class HeldWrites:
    """Holds the cache's checkpoint writes until ``release``; records their threads."""

    def __init__(self, cache: LeaderEpochFileCache) -> None:
        self.entered, self.release = threading.Event(), threading.Event()
        self.threads: list[int] = []
        real = cache._file.write

        def held(entries: list[EpochEntry]) -> None:
            self.threads.append(threading.get_ident())
            self.entered.set()
            assert self.release.wait(DEADLINE_S)
            real(entries)

        cache._file.write = held  # type: ignore[method-assign]


def test_a_follower_truncation_writes_its_checkpoint_on_a_background_thread(
        scheduled_log: MakeLog) -> None:
    """Kafka's truncateFromEndAsyncFlush: the fetcher (the event loop) does not wait."""
    lg = scheduled_log()
    lg.append_as_leader(batch(b"a", b"b", b"c"), leader_epoch=0)
    cache = lg.leader_epoch_cache
    cache.assign(1, 3)  # led at epoch 1 from offset 3, no record of it
    written_in_background(
        lg, lambda: not lg.truncate_to(3),  # a follower now: epoch 1 ends where it started
        [EpochEntry(0, 0)], "0\n2\n0 0\n1 3\n", "0\n1\n0 0\n")


def written_in_background(lg: Log, change: Callable[[], bool], entries: list[EpochEntry],
                          before: str, after: str) -> None:
    """``change`` returns (True) with the cache's new ``entries`` while their checkpoint
    write is held on another thread (the file still ``before``); once let go, ``after``."""
    cache = lg.leader_epoch_cache
    held = HeldWrites(cache)
    assert change()
    assert cache.entries == entries and cache.unflushed
    assert held.entered.wait(DEADLINE_S)
    assert held.threads != [threading.get_ident()]
    assert on_disk(lg.dir) == before  # not yet
    held.release.set()
    cache.flush()  # (after the background write: it wrote these entries, nothing left)
    assert held.threads[1:] == []
    assert on_disk(lg.dir) == after


def test_a_crash_before_the_background_write_leaves_an_entry_the_loader_drops(
        scheduled_log: MakeLog) -> None:
    lg = scheduled_log()
    lg.append_as_leader(batch(b"a", b"b", b"c"), leader_epoch=0)
    lg.leader_epoch_cache.assign(1, 3)
    lg.append_as_leader(batch(b"d", b"e"), leader_epoch=1)
    lost: list[list[EpochEntry]] = []
    lg.leader_epoch_cache._file.write = lost.append  # type: ignore[method-assign]
    assert lg.truncate_to(3)  # epoch 1's records cut: the follower's new leader lacks them
    lg.close_handlers()  # the crash: the background write never reaches the disk
    assert on_disk(lg.dir) == "0\n2\n0 0\n1 3\n"  # stale
    again = scheduled_log(name="topic-0")  # (opened once the background write is done: lost)
    assert lost == [[EpochEntry(0, 0)]]
    assert again.log_end_offset == 3
    assert again.leader_epoch_cache.entries == [EpochEntry(0, 0)]
    assert on_disk(again.dir) == "0\n1\n0 0\n"


def test_a_log_reopened_in_the_process_reads_the_background_write(scheduled_log: MakeLog) -> None:
    """Truncated, then records of the epoch before (a follower's), then closed and opened
    again while the truncation's write is still held: the opening waits for it, so the
    entry it removed (starting below the end now) is not read back."""
    lg = scheduled_log()
    lg.append_as_leader(batch(b"a", b"b", b"c"), leader_epoch=0)
    lg.leader_epoch_cache.assign(1, 3)
    lg.append_as_leader(batch(b"d"), leader_epoch=1)
    held = HeldWrites(lg.leader_epoch_cache)
    assert lg.truncate_to(3)
    lg.append_as_leader(batch(b"e", b"f"), leader_epoch=0)  # offsets 3-4, epoch 0
    assert held.entered.wait(DEADLINE_S)
    lg.close()
    opened: list[Log] = []
    opening = threading.Thread(target=lambda: opened.append(scheduled_log(name="topic-0")))
    opening.start()
    opening.join(0.05)  # (time for an opening that would not wait to read the stale file)
    held.release.set()
    opening.join(DEADLINE_S)
    assert opened[0].log_end_offset == 5
    assert opened[0].leader_epoch_cache.entries == [EpochEntry(0, 0)]


def test_a_log_start_increment_writes_its_checkpoint_on_a_background_thread(
        scheduled_log: MakeLog) -> None:
    """Kafka's truncateFromStartAsyncFlush: a follower following its leader's log start, or
    DeleteRecords, on the event loop, does not wait for the checkpoint's fsync."""
    lg = scheduled_log()
    lg.append_as_leader(batch(b"a", b"b"), leader_epoch=0)
    lg.append_as_leader(batch(b"c", b"d"), leader_epoch=1)
    lg.update_high_watermark(4)
    written_in_background(
        lg, lambda: lg.maybe_increment_log_start_offset(3, "test"),
        [EpochEntry(1, 3)], "0\n2\n0 0\n1 2\n", "0\n1\n1 3\n")


def test_a_crash_before_the_log_start_write_leaves_entries_the_loader_drops(
        scheduled_log: MakeLog) -> None:
    lg = scheduled_log()
    lg.append_as_leader(batch(b"a", b"b"), leader_epoch=0)
    lg.append_as_leader(batch(b"c", b"d"), leader_epoch=1)
    lg.update_high_watermark(4)
    lost: list[list[EpochEntry]] = []
    lg.leader_epoch_cache._file.write = lost.append  # type: ignore[method-assign]
    assert lg.maybe_increment_log_start_offset(3, "test")
    lg.close_handlers()  # the crash: the background write never reaches the disk
    assert on_disk(lg.dir) == "0\n2\n0 0\n1 2\n"  # stale
    # (opened once the background write is done, with the log start its checkpoint kept)
    again = scheduled_log(name="topic-0", log_start_offset=3)
    assert lost == [[EpochEntry(1, 3)]]
    assert again.log_start_offset == 3
    assert again.leader_epoch_cache.entries == [EpochEntry(1, 3)]
    assert on_disk(again.dir) == "0\n1\n1 3\n"
