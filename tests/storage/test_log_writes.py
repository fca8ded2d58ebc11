"""Appends written on a log dir's writer thread (log_writes): offsets at once, the log end
offset and reads only once written, in order; rolls, truncation and close wait for the writes
in flight; a failed write fails the later ones and the appends after it."""
# ruff: noqa: F811  (pytest fixtures imported from test_log_support)

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator

import pytest
from test_log_support import batch, clock, make_log, values_from  # noqa: F401

from tidelog.storage.errors import KafkaStorageError
from tidelog.storage.log import Log
from tidelog.storage.log_append import LogAppendInfo
from tidelog.storage.log_writes import AppendWriter

MakeLog = Callable[..., Log]
Outcomes = list[tuple[int, BaseException | None]]


class HeldWriter:
    """A real AppendWriter whose thread is held on a gate until ``release``."""

    def __init__(self) -> None:
        self.writer = AppendWriter("test")
        self._gate = threading.Event()
        self.writer.submit(lambda: self._gate.wait(30) and None)

    def release(self) -> None:
        self._gate.set()

    def flush(self, lg: Log) -> None:
        """Wait until everything submitted so far for ``lg`` ran (its writes held behind a
        leader epoch checkpoint too)."""
        ran = threading.Event()
        lg.local_log.writes.submit(self.writer, ran.set)
        assert ran.wait(30)


@pytest.fixture
def held() -> Iterator[HeldWriter]:
    h = HeldWriter()
    yield h
    h.release()
    h.writer.stop()


def _append(lg: Log, w: HeldWriter, out: Outcomes, *values: bytes, **kw: object
            ) -> LogAppendInfo:
    n = len(out)
    out.append((-1, None))

    def done(error: BaseException | None) -> None:
        out[n] = (n, error)

    info, handed = lg.append_as_leader_async(batch(*values, **kw), 0, w.writer, done,  # type: ignore[arg-type]
                                             inline_below=0)
    assert handed
    return info


def test_offsets_at_once_visibility_once_written(make_log: MakeLog, held: HeldWriter) -> None:
    lg = make_log()
    out: Outcomes = []
    infos = [_append(lg, held, out, b"a", b"b"), _append(lg, held, out, b"c")]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 1), (2, 2)]
    assert lg.next_offset == 3
    # nothing written yet: the LEO, the bytes and what a reader gets have not moved
    assert lg.log_end_offset == 0 and lg.size_in_bytes == 0
    assert out == [(-1, None), (-1, None)]
    lg.update_high_watermark(10)
    assert lg.high_watermark == 0 and values_from(lg, 0) == []
    held.release()
    held.flush(lg)
    assert out == [(0, None), (1, None)]  # completed in order
    assert lg.log_end_offset == 3 and lg.next_offset == 3
    lg.update_high_watermark(3)
    assert values_from(lg, 0) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_sync_and_async_appends_interleave_in_order(make_log: MakeLog, held: HeldWriter
                                                    ) -> None:
    lg = make_log()
    out: Outcomes = []
    _append(lg, held, out, b"a")
    # a synchronous append waits for the write in flight (from another thread: this one
    # holds nothing the writer needs)
    result: list[LogAppendInfo] = []
    t = threading.Thread(target=lambda: result.append(lg.append_as_leader(batch(b"b"))))
    t.start()
    t.join(0.3)
    assert t.is_alive() and lg.log_end_offset == 0
    held.release()
    t.join(30)
    assert result[0].first_offset == 1 and lg.log_end_offset == 2
    lg.update_high_watermark(2)
    assert values_from(lg, 0) == [(0, b"a"), (1, b"b")]


def test_rolls_wait_for_the_writes_in_flight(make_log: MakeLog) -> None:
    one = len(batch(b"%04d" % 0))
    lg = make_log({"segment.bytes": str(one * 3)})
    w = AppendWriter("test")
    out: Outcomes = []
    try:
        infos = []
        for i in range(20):
            info, _ = lg.append_as_leader_async(batch(b"%04d" % i), 0, w, _recorder(out),
                                                inline_below=0)
            infos.append(info.first_offset)
        done = threading.Event()
        w.submit(done.set)
        assert done.wait(30)
    finally:
        w.stop()
    assert infos == list(range(20))
    assert [e for _, e in out] == [None] * 20
    assert lg.log_end_offset == 20 and lg.number_of_segments() >= 7
    assert all(s.size <= one * 3 for s in lg.segments.values())
    lg.update_high_watermark(20)
    expected = [(i, b"%04d" % i) for i in range(20)]
    assert values_from(lg, 0) == expected
    lg.close()
    reopened = Log.open(lg.dir, lg.config, clock=lg.clock)  # what the files hold
    reopened.update_high_watermark(20)
    assert reopened.log_end_offset == 20 and values_from(reopened, 0) == expected
    reopened.close()


def _recorder(out: Outcomes) -> Callable[[BaseException | None], None]:
    n = len(out)
    out.append((-1, None))

    def done(error: BaseException | None) -> None:
        out[n] = (n, error)

    return done


def test_truncate_and_close_wait_for_writes(make_log: MakeLog, held: HeldWriter) -> None:
    lg = make_log()
    out: Outcomes = []
    for v in (b"a", b"b", b"c"):
        _append(lg, held, out, v)
    t = threading.Thread(target=lambda: lg.truncate_to(1))
    t.start()
    t.join(0.3)
    assert t.is_alive()  # waits for the three writes
    held.release()
    t.join(30)
    assert not t.is_alive()
    assert lg.log_end_offset == 1 and lg.next_offset == 1
    lg.update_high_watermark(1)
    assert values_from(lg, 0) == [(0, b"a")]


def test_duplicate_of_a_write_in_flight_answers_after_it(make_log: MakeLog, held: HeldWriter
                                                         ) -> None:
    lg = make_log()
    out: Outcomes = []
    ids = {"producer_id": 7, "producer_epoch": 0, "base_sequence": 0}
    first = _append(lg, held, out, b"a", **ids)
    again = _append(lg, held, out, b"a", **ids)  # the client's retry
    assert again.duplicate and again.first_offset == first.first_offset == 0
    assert lg.next_offset == 1
    assert out == [(-1, None), (-1, None)]  # the retry's answer waits for the original
    held.release()
    held.flush(lg)
    assert out == [(0, None), (1, None)] and lg.log_end_offset == 1


def test_failed_write_fails_later_writes_and_appends(make_log: MakeLog, held: HeldWriter
                                                     ) -> None:
    lg = make_log()
    out: Outcomes = []
    _append(lg, held, out, b"a")
    _append(lg, held, out, b"b")
    # the segment's descriptor now refuses writes (read-only): the disk error a write meets
    seg_file = lg.active_segment.log
    fd = seg_file.fileno()
    ro = os.open(seg_file.path, os.O_RDONLY)
    os.dup2(ro, fd)
    os.close(ro)
    held.release()
    held.flush(lg)
    assert all(isinstance(e, KafkaStorageError) for _, e in out)
    assert isinstance(out[0][1], KafkaStorageError)
    assert isinstance(out[0][1].__cause__, OSError)  # what takes the log dir offline
    assert lg.log_end_offset == 0  # nothing counted as written
    with pytest.raises(KafkaStorageError):
        _append(lg, held, out, b"c")
    with pytest.raises(KafkaStorageError):
        lg.append_as_leader(batch(b"d"))


def test_small_write_with_none_in_flight_is_made_at_once(make_log: MakeLog, held: HeldWriter
                                                         ) -> None:
    """Under the inline size and with no write in flight, the caller writes (no hand-off);
    behind a write in flight, a small one queues after it all the same."""
    lg = make_log()
    lg.leader_epoch_cache.assign(0, 0)  # the epoch is known: nothing to checkpoint
    calls: list[BaseException | None] = []
    info, handed = lg.append_as_leader_async(batch(b"a"), 0, held.writer, calls.append)
    assert not handed and info.first_offset == 0 and lg.log_end_offset == 1
    out: Outcomes = []
    _append(lg, held, out, b"b")  # handed to the (held) writer
    info, handed = lg.append_as_leader_async(batch(b"c"), 0, held.writer, calls.append)
    assert handed and info.first_offset == 2 and lg.log_end_offset == 1
    held.release()
    held.flush(lg)
    assert calls == [None] and lg.log_end_offset == 3
    lg.update_high_watermark(3)
    assert values_from(lg, 0) == [(0, b"a"), (1, b"b"), (2, b"c")]


def test_new_leader_epoch_goes_to_the_writer_with_its_checkpoint(make_log: MakeLog,
                                                                 held: HeldWriter) -> None:
    """An append starting a leader epoch is handed over however small: the epoch is in the
    cache at once, its checkpoint file (fsynced) is written before ``done``."""
    lg = make_log()
    path = lg.leader_epoch_cache.path
    calls: list[BaseException | None] = []
    info, handed = lg.append_as_leader_async(batch(b"a"), 3, held.writer, calls.append)
    assert handed and info.first_offset == 0
    assert lg.leader_epoch_cache.latest_epoch() == 3
    held.release()
    held.flush(lg)
    assert calls == [None] and path.read_text().splitlines()[2:] == ["3 0"]
    # the same epoch again: nothing to checkpoint, written by the caller
    _, handed = lg.append_as_leader_async(batch(b"b"), 3, held.writer, calls.append)
    assert not handed and lg.log_end_offset == 2


class SlowCheckpoint:
    """A log whose leader epoch checkpoint writes wait for ``gate`` (a slow disk), then
    write, or raise ``fail``."""

    def __init__(self, lg: Log, fail: BaseException | None = None) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()
        self.fail = fail
        cache = lg.leader_epoch_cache
        real, slow = type(cache).flush, self

        class Slow(type(cache)):  # type: ignore[misc]
            __slots__ = ()  # (the cache is slotted: this one cache made of this class)

            def flush(self) -> None:
                slow.held()
                real(self)

        cache.__class__ = Slow

    def held(self) -> None:
        """A flush waiting for ``gate``, then failing with ``fail`` if given."""
        self.started.set()
        assert self.gate.wait(30)
        if self.fail is not None:
            raise self.fail


def _flush(lg: Log, writer: AppendWriter) -> None:
    ran = threading.Event()
    lg.local_log.writes.submit(writer, ran.set)
    assert ran.wait(30)


def test_epoch_checkpoint_holds_its_log_not_the_dir(make_log: MakeLog) -> None:
    """While one log's leader epoch checkpoint is being written, the writer goes on with
    the other logs of its dir (1,000 new partitions do not fsync one after the other); that
    log's appends wait, are written in order after it, and only then answered."""
    a, b = make_log(name="a-0"), make_log(name="b-0")
    slow = SlowCheckpoint(a)
    writer = AppendWriter("dir")
    try:
        out_a: list[BaseException | None] = []
        _, handed = a.append_as_leader_async(batch(b"a1"), 3, writer, out_a.append)
        assert handed and slow.started.wait(30)
        _, handed = a.append_as_leader_async(batch(b"a2"), 3, writer, out_a.append)
        assert handed  # behind the first
        b_done = threading.Event()
        _, handed = b.append_as_leader_async(batch(b"b1"), 3, writer,
                                             lambda e: b_done.set())
        assert handed
        assert b_done.wait(30)  # the other log was written while the checkpoint waits
        assert b.log_end_offset == 1 and b.leader_epoch_cache.path.read_text().endswith("3 0\n")
        assert out_a == [] and a.log_end_offset == 0  # nothing of the held log written
        slow.gate.set()
        _flush(a, writer)
        assert out_a == [None, None] and a.log_end_offset == 2
        assert a.leader_epoch_cache.path.read_text().splitlines()[2:] == ["3 0"]
        a.update_high_watermark(2)
        assert values_from(a, 0) == [(0, b"a1"), (1, b"a2")]
    finally:
        slow.gate.set()
        writer.stop()


def test_duplicate_behind_a_held_checkpoint_answers_after_its_original(make_log: MakeLog
                                                                       ) -> None:
    lg = make_log()
    slow = SlowCheckpoint(lg)
    writer = AppendWriter("dir")
    try:
        out: list[str] = []
        ids = {"producer_id": 7, "producer_epoch": 0, "base_sequence": 0}
        lg.append_as_leader_async(batch(b"a", **ids), 3, writer,
                                  lambda e: out.append(f"original {e}"))
        again, handed = lg.append_as_leader_async(batch(b"a", **ids), 3, writer,
                                                  lambda e: out.append(f"retry {e}"))
        assert handed and again.duplicate
        assert slow.started.wait(30)
        slow.gate.set()
        _flush(lg, writer)
        assert out == ["original None", "retry None"]
    finally:
        slow.gate.set()
        writer.stop()


def test_failed_epoch_checkpoint_fails_its_writes(make_log: MakeLog) -> None:
    lg = make_log()
    slow = SlowCheckpoint(lg, fail=OSError(5, "Input/output error"))
    slow.gate.set()
    writer = AppendWriter("dir")
    try:
        done = threading.Event()
        errors: list[BaseException | None] = []

        def record(e: BaseException | None) -> None:
            errors.append(e)
            done.set()

        lg.append_as_leader_async(batch(b"a"), 3, writer, record)
        assert done.wait(30)
        assert isinstance(errors[0], KafkaStorageError)
        assert isinstance(errors[0].__cause__, OSError)  # what takes the log dir offline
        assert lg.log_end_offset == 0
        with pytest.raises(KafkaStorageError):
            lg.local_log.writes.check(lg.name)
    finally:
        writer.stop()


def test_wait_for_writes_returns_with_the_queued_appends_written(
        make_log: MakeLog, held: HeldWriter) -> None:
    """A leader turned follower reads its log end offset after ``wait_for_writes``: an append
    queued as leader must not move it afterwards, under the fetcher's first offset."""
    lg = make_log()
    out: Outcomes = []
    _append(lg, held, out, b"a", b"b")
    assert lg.log_end_offset == 0 and lg.next_offset == 2
    waited = threading.Event()

    def wait() -> None:
        lg.wait_for_writes()
        waited.set()

    t = threading.Thread(target=wait)
    t.start()
    assert not waited.wait(0.2)  # the write is still held: the wait goes on
    held.release()
    assert waited.wait(30)
    t.join()
    assert lg.log_end_offset == 2 and out == [(0, None)]
