"""The leader's plain append (storage/log_plain.py) against the reference path: the same
appends given to two logs, one with the plain append on (native core or its Python twin) and
one with it off, give the same answers and errors, the same files byte for byte (segments,
indexes, snapshots, checkpoints), the same producer state, end offsets and segment
bookkeeping; and the plain append takes the common case (it is not only ever declined).

Drawn: topic settings (segment size and age, index interval, compaction, codec, timestamp
type and bounds), plain, idempotent and transactional producers whose batches follow,
repeat, skip or go back in sequence, bump or lower their epoch, leader epochs moving on,
records of several sizes and timestamps, a corrupted byte, the clock moving.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog._native import core
from tidelog.config.log_config import LogConfig
from tidelog.records import RecordBatchBuilder
from tidelog.storage import log as log_module
from tidelog.storage import log_plain
from tidelog.storage.log import Log
from tidelog.storage.log_append import LogAppendInfo
from tidelog.storage.log_writes import AppendWriter
from tidelog.util.clock import ManualClock

T0 = 1_700_000_000_000
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
PIDS = (-1, 7, 9)  # 9 sometimes writes transactionally


@st.composite
def topic(draw: st.DrawFn) -> dict[str, str]:
    return {
        "segment.bytes": draw(st.sampled_from(["400", "1500", "1073741824"])),
        "index.interval.bytes": draw(st.sampled_from(["0", "150", "4096"])),
        # 8 entries: a full offset or time index rolls the segment before the batch
        "segment.index.bytes": draw(st.sampled_from(["96", "10485760", "10485760"])),
        "segment.ms": draw(st.sampled_from(["100", "604800000"])),
        "cleanup.policy": draw(st.sampled_from(["delete", "delete", "compact"])),
        "compression.type": draw(st.sampled_from(["producer", "producer", "uncompressed",
                                                  "gzip"])),
        "message.timestamp.type": draw(st.sampled_from(["CreateTime"] * 4
                                                       + ["LogAppendTime"])),
        "message.timestamp.after.max.ms": draw(st.sampled_from(["9223372036854775807",
                                                                "5000"])),
        "flush.messages": draw(st.sampled_from(["9223372036854775807", "3"])),
    }


@st.composite
def append_op(draw: st.DrawFn) -> tuple[Any, ...]:
    n = draw(st.integers(1, 4))
    records = [(draw(st.integers(-3_000, 30_000)),
                draw(st.sampled_from([b"k", b"k", None])),
                b"v" * draw(st.sampled_from([1, 20, 200]))) for _ in range(n)]
    return ("append", draw(st.sampled_from(PIDS)),
            draw(st.sampled_from([0] * 10 + [-1, 1, -3])),  # sequence: next, repeat, gap
            draw(st.sampled_from([0] * 12 + [1, -1])),  # producer epoch change
            draw(st.sampled_from([False] * 3 + [True])),  # transactional (pid 9)
            draw(st.sampled_from([0] * 15 + [1])),  # leader epoch moves on
            draw(st.sampled_from([False] * 25 + [True])),  # a byte corrupted
            records,
            draw(st.sampled_from([False] * 3 + [True])))  # Log.append_as_leader


ops = st.lists(st.one_of(append_op(), append_op(), append_op(),
                         st.tuples(st.just("tick"), st.sampled_from([1, 60, 500]))),
               min_size=1, max_size=30)


class Side:
    """One log and its writer, under its own clock."""

    def __init__(self, root: Path, props: dict[str, str], plain: str) -> None:
        self.clock = ManualClock(T0)
        self.writer = AppendWriter("test")
        self.log = Log.open(root / "topic-0", LogConfig.from_props(props), clock=self.clock)
        self.plain = plain  # "off", "native" or "twin"
        self.taken = 0

    def append(self, records: bytes, leader_epoch: int, sync: bool = False
               ) -> tuple[Any, ...]:
        errors: list[BaseException | None] = []
        try:
            with self._switch():
                if sync:
                    info = self.log.append_as_leader(records, leader_epoch)
                else:
                    info, _handed = self.log.append_as_leader_async(
                        records, leader_epoch, self.writer, errors.append)
            self.log.wait_for_writes()
        except Exception as e:
            return ("error", type(e).__name__, str(e))
        return ("ok", _fields(info), errors)

    @contextmanager
    def _switch(self) -> Iterator[None]:
        # the twin: the Python bookkeeping around the Python write; native: the native
        # core's append_leader (its bookkeeping and write in C)
        real = log_plain.append_plain_leader_py if self.plain == "twin" else \
            log_plain.append_plain

        def counted(*a: Any) -> LogAppendInfo | None:
            got = real(*a)
            self.taken += got is not None
            return got

        if self.plain == "off":
            with mock.patch.object(log_module, "append_plain", lambda *a: None):
                yield
        elif self.plain == "twin":
            with mock.patch.object(log_plain, "_append", log_plain.append_plain_py), \
                    mock.patch.object(log_module, "append_plain", counted):
                yield
        else:
            with mock.patch.object(log_module, "append_plain", counted):
                yield

    def state(self) -> tuple[Any, ...]:
        lg = self.log
        psm = lg.producer_state
        producers = {pid: (e.producer_epoch, list(e.batch_metadata), e.coordinator_epoch,
                           e.last_timestamp, e.current_txn_first_offset)
                     for pid, e in psm.producers.items()}
        seg = lg.active_segment
        return (lg.log_end_offset_metadata, lg.next_offset, lg.recovery_point, producers,
                list(psm.ongoing_txns.keys()), psm.map_end_offset,
                [s.base_offset for s in lg.local_log.segments.values()],
                seg.max_timestamp_and_offset_so_far, seg._t.bytes_since_last_index_entry,
                seg._t.rolling_based_timestamp, lg.leader_epoch_cache.entries)

    def close(self) -> None:
        self.log.close()
        self.writer.stop()


def _fields(info: LogAppendInfo) -> tuple[int | bool, ...]:
    return (info.first_offset, info.last_offset, info.max_timestamp,
            info.offset_of_max_timestamp, info.log_append_time, info.log_start_offset,
            info.num_messages, info.valid_bytes, info.duplicate)


def _files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


class Producers:
    """The clients' side: each producer's epoch and next sequence, moved by the answers."""

    def __init__(self) -> None:
        self.epoch = {7: 0, 9: 0}
        self.next_seq = {7: 0, 9: 0}
        self.leader_epoch = 0

    def batch(self, op: tuple[Any, ...]) -> tuple[bytes, int, int]:
        _, pid, seq_delta, epoch_delta, txn, epoch_up, corrupt, records, _sync = op
        self.leader_epoch += epoch_up
        kw: dict[str, Any] = {}
        if pid >= 0:
            epoch = max(self.epoch[pid] + epoch_delta, 0)
            seq = self.next_seq[pid] + seq_delta if epoch == self.epoch[pid] else 0
            kw = {"producer_id": pid, "producer_epoch": epoch, "base_sequence": max(seq, 0),
                  "is_transactional": txn and pid == 9}
        b = RecordBatchBuilder(**kw)
        for delta, key, value in records:
            b.append(T0 + delta, key, value)
        data = bytearray(b.build())
        if corrupt:
            data[-1] ^= 0x55
        return bytes(data), pid, kw.get("producer_epoch", -1)

    def answered(self, pid: int, epoch: int, outcome: tuple[Any, ...], n: int) -> None:
        if pid < 0 or outcome[0] != "ok" or outcome[1][-1]:  # (error or duplicate)
            return
        if epoch != self.epoch[pid]:
            self.epoch[pid], self.next_seq[pid] = epoch, 0
        self.next_seq[pid] += n


def run(props: dict[str, str], steps: list[tuple[Any, ...]], plain: str,
        against: str = "off") -> int:
    """``steps`` given to a log appending with ``plain`` and one with ``against`` (the
    reference path: the plain append off); the batches ``plain`` took."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "ref").mkdir()
        (root / "plain").mkdir()
        ref, fast = Side(root / "ref", props, against), Side(root / "plain", props, plain)
        clients = Producers()
        try:
            for op in steps:
                if op[0] == "tick":
                    ref.clock.advance(op[1])
                    fast.clock.advance(op[1])
                    continue
                data, pid, epoch = clients.batch(op)
                want = ref.append(data, clients.leader_epoch, op[-1])
                assert fast.append(data, clients.leader_epoch, op[-1]) == want
                clients.answered(pid, epoch, want, len(op[-2]))
                assert fast.state() == ref.state()
            assert _files(root / "plain" / "topic-0") == _files(root / "ref" / "topic-0")
        finally:
            ref.close()
            fast.close()
        assert _files(root / "plain" / "topic-0") == _files(root / "ref" / "topic-0")
        if against != "off":
            assert fast.taken == ref.taken  # (the same batches taken, or declined)
        return fast.taken


IMPLS = ["twin"] + (["native"] if core is not None else [])


@pytest.mark.parametrize("plain", IMPLS)
@SETTINGS
@given(props=topic(), steps=ops)
def test_plain_append_is_the_reference_path(plain: str, props: dict[str, str],
                                            steps: list[tuple[Any, ...]]) -> None:
    run(props, steps, plain)


@pytest.mark.skipif(core is None, reason="the native core is not built")
@SETTINGS
@given(props=topic(), steps=ops)
def test_native_and_twin_take_and_write_the_same(props: dict[str, str],
                                                 steps: list[tuple[Any, ...]]) -> None:
    """The native core's append_leader against its twin append_plain_leader_py: the same
    batches taken, the same answers, state and files."""
    run(props, steps, "native", against="twin")


@pytest.mark.parametrize("plain", IMPLS)
def test_the_common_case_takes_the_plain_append(plain: str) -> None:
    """An idempotent producer's and a plain one's batches in turn: after each producer's
    first batch (and the leader epoch's start), every append is the plain one's."""
    steps: list[tuple[Any, ...]] = []
    for i in range(40):
        records = [(i, b"k", b"v" * 50)]
        steps.append(("append", 7 if i % 2 else -1, 0, 0, False, 0, False, records, i > 30))
    assert run({"index.interval.bytes": "300", "segment.bytes": "3000"}, steps, plain) >= 30


@pytest.mark.parametrize("plain", IMPLS)
def test_large_batches_take_the_plain_append(plain: str) -> None:
    """Batches above PLAIN_APPEND_BYTES (their CRC computed by the crc32c package and
    given to the one call), plain and idempotent: the plain append takes all but the log's
    first and the idempotent producer's first, and the files and state are the reference
    path's."""
    steps: list[tuple[Any, ...]] = []
    for i in range(12):
        records = [(i * 100 + j, b"k", bytes([i + j & 0xFF]) * 1024) for j in range(70)]
        steps.append(("append", 7 if i % 2 else -1, 0, 0, False, 0, False, records, False))
    assert log_plain.PLAIN_APPEND_BYTES < 70 * 1024
    assert run({}, steps, plain) == 10


@pytest.mark.parametrize("plain", IMPLS)
def test_a_full_index_rolls_as_the_reference_path_rolls(plain: str) -> None:
    """An index entry per batch, 8 slots per index (the time index keeps its last for the
    roll): the plain append declines the batch a full index would refuse, and the segments
    roll where the reference path rolls them."""
    steps: list[tuple[Any, ...]] = [
        ("append", 7, 0, 0, False, 0, False, [(i, b"k", b"v" * 20)], False)
        for i in range(40)]
    assert run({"index.interval.bytes": "0", "segment.index.bytes": "96"}, steps,
               plain) >= 25


def test_a_failed_plain_write_is_the_storage_error_of_a_failed_write(
        tmp_path: Path) -> None:
    """The segment's descriptor swapped for a read-only one: the plain append fails as the
    reference path's write fails (the same KafkaStorageError, naming the dir, the file and
    the errno, caused by the OSError), and the log end offset, the segment size and the
    producer state do not move."""
    from tidelog.storage.errors import KafkaStorageError
    side = Side(tmp_path, {}, "native" if core is not None else "twin")
    lg = side.log
    try:
        clients = Producers()
        op = ("append", 7, 0, 0, False, 0, False, [(0, b"k", b"v")], False)
        for _ in range(2):
            data, pid, epoch = clients.batch(op)
            clients.answered(pid, epoch, side.append(data, 0), 1)
        records = lg.active_segment.log
        before = (lg.log_end_offset_metadata, records.size_in_bytes,
                  list(lg.producer_state.producers[7].batch_metadata))
        errors = {}
        ro = os.open(records.path, os.O_RDONLY)
        rw, records.fd = records.fd, ro
        try:
            for plain in ("off", side.plain):
                side.plain = plain
                with pytest.raises(KafkaStorageError) as err, side._switch():
                    lg.append_as_leader_async(clients.batch(op)[0], 0, side.writer,
                                              lambda e: None)
                assert isinstance(err.value.__cause__, OSError)
                errors[plain] = str(err.value)
        finally:
            records.fd = rw
            os.close(ro)
        assert side.taken == 1  # (the second, plain, append before the failures)
        assert len(set(errors.values())) == 1, errors
        assert "Bad file descriptor" in errors["off"] and str(records.path) in errors["off"]
        assert before == (lg.log_end_offset_metadata, records.size_in_bytes,
                          list(lg.producer_state.producers[7].batch_metadata))
    finally:
        side.close()


@pytest.mark.parametrize("plain", IMPLS)
def test_the_system_clock_bounds_timestamps_as_the_reference_path(
        plain: str, tmp_path: Path) -> None:
    """Under the system clock (read by the native core itself), with
    message.timestamp.after.max.ms 0: a batch stamped with the time read before the append
    is the plain append's, one stamped a second past the time read before it is refused as
    the reference path refuses it (the clock read is neither behind nor a second ahead)."""
    from tidelog.util.clock import SystemClock
    lg = Log.open(tmp_path / "topic-0", LogConfig.from_props(
        {"message.timestamp.after.max.ms": "0"}), clock=SystemClock())
    side = Side.__new__(Side)
    side.log, side.plain, side.taken = lg, plain, 0
    side.writer = AppendWriter("test")
    try:
        def batch(ts: int) -> bytes:
            b = RecordBatchBuilder()
            b.append(ts, b"k", b"v")
            return b.build()

        assert side.append(batch(SystemClock().milliseconds()), 0)[0] == "ok"  # (the first)
        outcomes = []
        for _ in range(20):
            before = SystemClock().milliseconds()
            outcomes.append(side.append(batch(before), 0)[0])
            late = side.append(batch(SystemClock().milliseconds() + 1000), 0)
            outcomes.append(late[0] if late[0] == "ok" else late[1])
        assert set(outcomes[::2]) == {"ok"} and side.taken == 20
        assert set(outcomes[1::2]) == {"RecordValidationError"}, outcomes
    finally:
        side.close()
