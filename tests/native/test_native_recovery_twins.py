"""The recovery scan's native fast path against its twin and against the reference.

Segments are runs of valid batches (any base offsets, leader epochs, producer ids and
timestamps, some out of order or outside the segment's offset range), then truncated,
overwritten or extended with garbage. ``_core.recover_scan`` and ``scan_run_py`` must return
identical runs from any state; and a whole LogSegment.recover must end the same (bytes cut,
index files, epochs assigned, producer batches replayed, the warning with the file and byte
position, or the same exception) with the native run, the Python run, and the reference
per-batch code alone.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_core_support import core

from tidelog.records import RecordBatchBuilder
from tidelog.storage import recovery_scan
from tidelog.storage.recovery_scan import ScanResult, ScanState, scan_run_py
from tidelog.storage.segment import LogSegment, SegmentConfig
from tidelog.util.clock import ManualClock

needs_core = pytest.mark.skipif(core is None or not hasattr(core, "recover_scan"),
                                reason="native core not built")
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
INT64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
SEGMENT_BASE = 1000


def native_run(buf: bytes, off: int, interval: int, base: int, s: ScanState) -> ScanResult:
    off, state, oi, ti, epochs, producers, next_offset = core.recover_scan(
        buf, off, interval, base, tuple(s))
    return ScanResult(off, ScanState(*state), oi, ti, epochs, producers, next_offset)


def reference_only(buf: bytes, off: int, interval: int, base: int, s: ScanState) -> ScanResult:
    """A fast path that takes nothing: every batch goes through the reference code."""
    return ScanResult(off, s, b"", b"", [], [], -1)


@st.composite
def batch(draw: st.DrawFn) -> bytes:
    pid = draw(st.sampled_from([-1, -1, 7, 9]))
    b = RecordBatchBuilder(
        base_offset=draw(st.one_of(st.integers(SEGMENT_BASE, SEGMENT_BASE + 400),
                                   st.integers(-5, 2**32))),
        partition_leader_epoch=draw(st.integers(-1, 6)),
        producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
        base_sequence=draw(st.integers(0, 50)) if pid >= 0 else -1,
    )
    for _ in range(draw(st.integers(1, 4))):
        b.append(draw(st.integers(-3, 40)), None, draw(st.binary(max_size=40)))
    return b.build()


@st.composite
def segment_bytes(draw: st.DrawFn) -> bytes:
    """Mostly in-order batches from the segment base, then a mutation."""
    data = bytearray()
    offset = SEGMENT_BASE
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.booleans()):
            one = bytearray(draw(batch()))
        else:  # in order: the common case
            b = RecordBatchBuilder(base_offset=offset, partition_leader_epoch=offset // 30)
            for _ in range(draw(st.integers(1, 3))):
                b.append(draw(st.integers(0, 60)), None, b"v" * draw(st.integers(0, 30)))
            one = bytearray(b.build())
        offset = int.from_bytes(one[:8], "big", signed=True) + \
            int.from_bytes(one[23:27], "big", signed=True) + 1
        data += one
    kind = draw(st.sampled_from(["valid", "truncate", "overwrite", "extend"]))
    if kind == "truncate" and data:
        del data[draw(st.integers(0, len(data) - 1)):]
    elif kind == "overwrite" and data:
        at = draw(st.integers(0, len(data) - 1))
        patch = draw(st.binary(min_size=1, max_size=8))
        data[at : at + len(patch)] = patch
    elif kind == "extend":
        data += draw(st.binary(max_size=80))
    return bytes(data)


STATES = st.builds(
    ScanState, st.integers(0, 2**31 + 5), st.integers(0, 5000), INT64, INT64,
    st.one_of(st.just(-1), st.integers(SEGMENT_BASE - 2, SEGMENT_BASE + 500)), st.integers(-1, 40),
    st.one_of(st.just(-1), st.integers(-2, 50)),
    st.one_of(st.just(-1), st.integers(SEGMENT_BASE - 2, SEGMENT_BASE + 500)), st.integers(-1, 40),
    st.one_of(st.just(2**31), st.integers(-1, 8)),
)


@needs_core
@SETTINGS
@given(data=segment_bytes(), state=STATES, interval=st.integers(-1, 300),
       off=st.integers(0, 100))
def test_runs_are_identical(data: bytes, state: ScanState, interval: int, off: int) -> None:
    off = min(off, len(data))
    assert native_run(data, off, interval, SEGMENT_BASE, state) == \
        scan_run_py(data, off, interval, SEGMENT_BASE, state)


@needs_core
def test_a_run_of_valid_batches_is_taken_whole() -> None:
    batches = []
    for i in range(10):
        b = RecordBatchBuilder(base_offset=SEGMENT_BASE + i, partition_leader_epoch=i // 3)
        b.append(i, None, b"x" * 30)
        batches.append(b.build())
    data = b"".join(batches)
    start = ScanState(0, 0, -1, -1, -1, 100, -1, -1, 100, -1)
    r = native_run(data, 0, 50, SEGMENT_BASE, start)
    assert r == scan_run_py(data, 0, 50, SEGMENT_BASE, start)
    assert r.off == len(data) and r.next_offset == SEGMENT_BASE + 10
    assert r.epochs == [(0, SEGMENT_BASE), (1, SEGMENT_BASE + 3), (2, SEGMENT_BASE + 6),
                        (3, SEGMENT_BASE + 9)]
    assert len(r.offset_entries) > 0 and len(r.offset_entries) % 8 == 0


class EpochCache:
    def __init__(self) -> None:
        self.assigned: list[tuple[int, int]] = []

    def latest_epoch(self) -> int | None:
        return self.assigned[-1][0] if self.assigned else None

    def assign(self, epoch: int, start: int) -> None:
        self.assigned.append((epoch, start))


class ProducerState:
    def __init__(self) -> None:
        self.batches: list[tuple[int, int, int]] = []
        self.map_end = -1

    def update_from_recovered_batch(self, batch: Any) -> None:
        self.batches.append((batch.base_offset, batch.producer_id, batch.position))

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end = offset


def recover(tmp: Path, data: bytes, run: Any, interval: int, caplog: Any) -> tuple[Any, ...]:
    tmp.mkdir()
    (tmp / f"{SEGMENT_BASE:020d}.log").write_bytes(data)
    cfg = SegmentConfig(index_interval_bytes=interval, segment_index_bytes=8 * 30)
    seg = LogSegment.open(tmp, SEGMENT_BASE, cfg, ManualClock())
    cache, ps = EpochCache(), ProducerState()
    saved = recovery_scan.scan_run
    recovery_scan.scan_run = run
    caplog.clear()
    try:
        outcome: Any = seg.recover(ps, cache)
    except Exception as e:
        outcome = (type(e), str(e).replace(str(tmp), "DIR"))
    finally:
        recovery_scan.scan_run = saved
    warnings = [r.getMessage().replace(str(tmp), "DIR") for r in caplog.records
                if r.levelno >= logging.WARNING]
    seg.close_handlers()
    files = {p.suffix: p.read_bytes() for p in tmp.iterdir()}
    return outcome, warnings, files, cache.assigned, ps.batches, ps.map_end


@SETTINGS
@given(data=segment_bytes(), interval=st.integers(0, 200))
def test_recover_ends_alike_on_every_path(tmp_path_factory: pytest.TempPathFactory,
                                          caplog: pytest.LogCaptureFixture, data: bytes,
                                          interval: int) -> None:
    caplog.set_level(logging.WARNING, logger="tidelog.storage.segment")
    paths: list[Any] = [reference_only, scan_run_py]
    if core is not None and hasattr(core, "recover_scan"):
        paths.append(native_run)
    ends = [recover(tmp_path_factory.mktemp("seg") / "p", data, run, interval, caplog)
            for run in paths]
    for other in ends[1:]:
        assert other == ends[0]


def batch_crcing(crc_len: int) -> bytes:
    """A valid one-record batch whose CRC covers exactly ``crc_len`` bytes."""
    empty = RecordBatchBuilder(base_offset=SEGMENT_BASE)
    empty.append(0, None, b"")
    grow = crc_len - (len(empty.build()) - 21)
    for key in (None, b"k"):
        for size in range(grow - 6, grow + 1):  # the varint lengths grow with the value
            b = RecordBatchBuilder(base_offset=SEGMENT_BASE)
            b.append(0, key, bytes(range(251)) * (size // 251) + bytes(range(size % 251)))
            raw = b.build()
            if len(raw) - 21 == crc_len:
                return raw
    raise AssertionError(f"no batch CRCs {crc_len} bytes")


@needs_core
@pytest.mark.parametrize("crc_len", [
    *range(3 * 256 - 9, 3 * 256 + 10),  # around one round of the three short streams
    *range(3 * 4096 - 9, 3 * 4096 + 10),  # around one round of the three long streams
    16 * 1024 - 21, 2 * 3 * 4096 + 3 * 256 + 5, 64 * 1024 + 3,
])
def test_the_crc_of_every_length_is_checked(crc_len: int) -> None:
    """The native CRC-32C runs three streams over adjacent blocks and combines them: a batch
    whose CRC'd part ends just short of, at, or just past a round of those streams is taken
    when intact and refused (left to the reference code) with one byte changed in any of the
    streams, as the crc32c package decides."""
    raw = batch_crcing(crc_len)
    start = ScanState(0, 0, -1, -1, -1, 100, -1, -1, 100, -1)
    assert native_run(raw, 0, 4096, SEGMENT_BASE, start).off == len(raw)
    for at in (21, 21 + (len(raw) - 21) // 3, 21 + 2 * (len(raw) - 21) // 3 + 1, len(raw) - 1):
        bad = bytearray(raw)
        bad[at] ^= 0x40
        if at < 61:  # a header field: keep the batch well formed, only its CRC wrong
            continue
        r = native_run(bytes(bad), 0, 4096, SEGMENT_BASE, start)
        assert r.off == 0 and r == scan_run_py(bytes(bad), 0, 4096, SEGMENT_BASE, start)


@needs_core
def test_the_crc_pass_lets_other_threads_run() -> None:
    """The CRC work runs without the GIL (recovery threads of a data dir run in parallel):
    a thread counting while one large run is scanned gets to count during it."""
    import threading

    b = RecordBatchBuilder(base_offset=SEGMENT_BASE)
    b.append(0, None, bytes(range(256)) * 256)  # ~64 KiB
    raw = b.build()
    buf = bytearray()
    for i in range(1024):  # ~64 MiB of batches at increasing offsets
        buf += (SEGMENT_BASE + i).to_bytes(8, "big") + raw[8:]
    state = ScanState(0, 0, -1, -1, -1, 1 << 20, -1, -1, 1 << 20, -1)
    counted = [0]
    running, stop = threading.Event(), threading.Event()

    def count() -> None:
        running.set()
        while not stop.is_set():
            counted[0] += 1

    t = threading.Thread(target=count)
    t.start()
    running.wait()
    try:
        before = counted[0]
        r = native_run(bytes(buf), 0, 4096, SEGMENT_BASE, state)
        during = counted[0] - before
    finally:
        stop.set()
        t.join()
    assert r.off == len(buf)  # taken whole
    assert r == scan_run_py(bytes(buf), 0, 4096, SEGMENT_BASE, state)
    assert during > 1000


@st.composite
def producer_runs(draw: st.DrawFn) -> bytes:
    """Runs of idempotent and transactional batches of two producers, epochs going up and
    now and then down (a warning) or a plain batch inside a transaction (an error)."""
    data, offset = bytearray(), SEGMENT_BASE
    for _ in range(draw(st.integers(1, 6))):
        pid, epoch = draw(st.sampled_from([7, 9])), draw(st.integers(0, 2))
        txn = draw(st.booleans()) and draw(st.booleans())
        for _ in range(draw(st.integers(1, 9))):
            b = RecordBatchBuilder(base_offset=offset, producer_id=pid, producer_epoch=epoch,
                                   base_sequence=offset % 1000, is_transactional=txn,
                                   partition_leader_epoch=0)
            b.append(offset, None, b"v")
            data += b.build()
            offset += 1
    return bytes(data)


def recover_producers(tmp: Path, data: bytes, run: Any, caplog: Any) -> tuple[Any, ...]:
    from tidelog.storage.producer_state import ProducerStateManager

    tmp.mkdir()
    (tmp / f"{SEGMENT_BASE:020d}.log").write_bytes(data)
    seg = LogSegment.open(tmp, SEGMENT_BASE, SegmentConfig(), ManualClock())
    ps = ProducerStateManager(tmp)
    saved, recovery_scan.scan_run = recovery_scan.scan_run, run
    caplog.clear()
    try:
        outcome: Any = seg.recover(ps, None)
    except Exception as e:
        outcome = (type(e), str(e).replace(str(tmp), "DIR"))
    finally:
        recovery_scan.scan_run = saved
        seg.close_handlers()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    failed = isinstance(outcome, tuple)  # the load stops there: no map end to compare
    return (outcome, warnings, list(ps.producers.items()), list(ps.ongoing_txns.items()),
            None if failed else ps.last_map_offset)


@SETTINGS
@given(data=producer_runs())
def test_a_run_of_one_producer_replays_as_every_batch(
        tmp_path_factory: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture,
        data: bytes) -> None:
    """The fast path replays only the last five batches of a run of one producer's plain
    batches; the producer state (entries in order, their last five batches, timestamps,
    open transactions), the warnings and the errors equal replaying every batch."""
    caplog.set_level(logging.WARNING)
    paths: list[Any] = [reference_only, scan_run_py]
    if core is not None and hasattr(core, "recover_scan"):
        paths.append(native_run)
    ends = [recover_producers(tmp_path_factory.mktemp("seg") / "p", data, run, caplog)
            for run in paths]
    for other in ends[1:]:
        assert other == ends[0]


def test_a_long_run_replays_five() -> None:
    """The case the test above exists for: twelve batches of one producer, five replayed."""
    class Entries:
        producers: dict[int, Any] = {}

    scan = recovery_scan.RecoveryScan.__new__(recovery_scan.RecoveryScan)
    scan.producer_state = Entries()
    data, positions = bytearray(), []
    for i in range(12):
        b = RecordBatchBuilder(base_offset=i, producer_id=7, producer_epoch=0, base_sequence=i)
        b.append(0, None, b"v")
        positions.append(len(data))
        data += b.build()
    assert list(scan._replayed(bytes(data), positions)) == positions[-5:]
