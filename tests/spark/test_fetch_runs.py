"""Broker-mode reads a fetch response at a time (spark/fetch_runs.py) give what the per-batch
path gives (KafkaClient.iter_batches into the Arrow builder): the same rows in the same
Arrow batches, the same errors, for random logs of plain, compressed, idempotent and
transactional batches with COMMIT/ABORT markers, read at isolation level 0 and 1 through
fetches cut at random sizes (partial trailing batches, batches larger than the fetch size),
with the native core and with its Python twins. No broker: the fetches are answered from the
log in memory, as a broker answers them (the batches from the one holding the position, cut
at the size asked, with the aborted transactions overlapping them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidelog.client.kafka_client import FetchedPartition, KafkaClient, TopicPartition
from tidelog.records import CompressionType, RecordBatch, RecordBatchBuilder
from tidelog.records.batch import ControlRecordType
from tidelog.spark import arrow, columns, fetch_runs

TP = TopicPartition("t", 0)
TS0 = 1_700_000_000_000


@dataclass
class Log:
    batches: list[bytes] = field(default_factory=list)
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # (pid, first, marker)
    end: int = 0


class LogClient(KafkaClient):
    """Answers Fetch from a Log: no sockets."""

    def __init__(self, log: Log) -> None:
        super().__init__("127.0.0.1:1")
        self.log = log
        self.fetches = 0

    def fetch_partition(self, tp: TopicPartition, offset: int, *, partition_max_bytes: int = 8 << 20,
                        isolation_level: int = 0) -> FetchedPartition:
        self.fetches += 1
        if self.fetches > 100:
            raise RuntimeError("the read does not end")
        out = b""
        first = None
        for raw in self.log.batches:
            b = RecordBatch(raw)
            if b.last_offset < offset:
                continue
            first = b.base_offset if first is None else first
            out += raw
            if len(out) >= partition_max_bytes:
                break
        out = out[:partition_max_bytes]
        upper = self.log.end
        aborted = [(pid, f) for pid, f, marker in self.log.aborted
                   if isolation_level and marker >= offset and f < upper]
        return FetchedPartition(0, self.log.end, 0, self.log.end, out, aborted)


@st.composite
def logs(draw: st.DrawFn) -> Log:
    log = Log()
    offset = draw(st.integers(0, 50))
    open_txn: dict[int, int] = {}
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(["plain", "plain", "idempotent", "txn", "txn", "marker"]))
        pid = draw(st.integers(1, 3))
        codec = draw(st.sampled_from([CompressionType.NONE, CompressionType.NONE, CompressionType.GZIP,
                                      CompressionType.ZSTD]))
        if kind == "marker":
            b = RecordBatchBuilder(base_offset=offset, producer_id=pid, producer_epoch=0,
                                   is_transactional=True, is_control=True)
            abort = draw(st.booleans())
            b.append_control(ControlRecordType.ABORT if abort else ControlRecordType.COMMIT, TS0)
            if pid in open_txn:
                first = open_txn.pop(pid)
                if abort:
                    log.aborted.append((pid, first, offset))
        else:
            b = RecordBatchBuilder(codec, base_offset=offset,
                                   producer_id=-1 if kind == "plain" else pid,
                                   producer_epoch=-1 if kind == "plain" else 0,
                                   base_sequence=-1 if kind == "plain" else 0,
                                   is_transactional=kind == "txn")
            if kind == "txn":
                open_txn.setdefault(pid, offset)
            for i in range(draw(st.integers(1, 12))):
                headers = [("h", b"x")] if draw(st.integers(0, 9)) == 0 else []
                key = None if draw(st.integers(0, 5)) == 0 else b"k%d" % i
                b.append(TS0 + i, key, b"v" * draw(st.integers(0, 30)), headers)
        raw = b.build()
        log.batches.append(raw)
        offset = RecordBatch(raw).next_offset + draw(st.integers(0, 2))
    log.end = offset
    return log


def _per_batch(client: KafkaClient, start: int, end: int, level: int, pmb: int, headers: bool,
               rows: int) -> list[pa.RecordBatch]:
    return list(arrow.batches_to_arrow(
        client.iter_batches(TP, start, end, partition_max_bytes=pmb, isolation_level=level),
        topic="t", partition=0, start=start, end=end, include_headers=headers, rows_per_batch=rows))


def _runs(client: KafkaClient, start: int, end: int, level: int, pmb: int, headers: bool,
          rows: int) -> list[pa.RecordBatch]:
    return list(arrow.runs_to_arrow(
        fetch_runs.fetch_runs(client, TP, start, end, partition_max_bytes=pmb, isolation_level=level),
        topic="t", partition=0, start=start, end=end, include_headers=headers, rows_per_batch=rows))


def _outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    try:
        return ("ok", [b.to_pydict() for b in fn(*args)])
    except Exception as e:  # both paths must fail alike
        return ("error", type(e), str(e))


@pytest.fixture(params=["native", "python"])
def twin(request: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs on the native core's walks and on their Python twins."""
    if request.param == "python":
        monkeypatch.setattr(fetch_runs, "_batch_spans", fetch_runs.batch_spans_py)
        monkeypatch.setattr(arrow, "decode_runs", columns.decode_runs_py)
        monkeypatch.setattr(arrow, "decode_columns", columns.decode_columns_py)
    else:
        assert fetch_runs._batch_spans is fetch_runs._batch_spans_native, "native core not built"
        assert arrow.decode_runs is columns._decode_runs_native
    return str(request.param)


@st.composite
def reads(draw: st.DrawFn) -> tuple[Log, int, int, int, int, bool, int]:
    log = draw(logs())
    start = draw(st.integers(0, log.end + 2))
    end = draw(st.integers(start, log.end + 5))
    return (log, start, end, draw(st.sampled_from([0, 1])), draw(st.integers(80, 3000)),
            draw(st.booleans()), draw(st.sampled_from([1, 7, 40, 65536])))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(reads())
def test_runs_read_what_the_per_batch_path_reads(twin: str, read: tuple[Log, int, int, int, int, bool, int]) -> None:
    log, start, end, level, pmb, headers, rows = read
    expected = _outcome(_per_batch, LogClient(log), start, end, level, pmb, headers, rows)
    got = _outcome(_runs, LogClient(log), start, end, level, pmb, headers, rows)
    assert got == expected
    if level and expected[0] == "ok":  # aborted data really is left out
        kept = {o for b in expected[1] for o in b["offset"]}
        for raw in log.batches:
            b = RecordBatch(raw)
            if b.is_transactional and not b.is_control and any(
                    pid == b.producer_id and f <= b.base_offset < m for pid, f, m in log.aborted):
                assert not kept & set(range(b.base_offset, b.next_offset))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(logs(), st.integers(0, 400), st.data())
def test_a_corrupt_batch_fails_both_paths_alike(twin: str, log: Log, cut: int, data: st.DataObject) -> None:
    """A flipped byte (CRC, magic, length field) fails a read that reaches it, in both paths
    with the same error, and does not fail one that stops before it."""
    if not log.batches:
        return
    i = data.draw(st.integers(0, len(log.batches) - 1))
    raw = bytearray(log.batches[i])
    at = data.draw(st.sampled_from([8, 9, 10, 11, 16, 17, 30, len(raw) - 1]))
    raw[at] ^= data.draw(st.integers(1, 255))
    log.batches[i] = bytes(raw)
    start = data.draw(st.integers(0, log.end))
    end = data.draw(st.integers(start, log.end + 1))
    level = data.draw(st.sampled_from([0, 1]))
    for headers in (False, True):
        expected = _outcome(_per_batch, LogClient(log), start, end, level, 1 << 20, headers, 65536)
        assert _outcome(_runs, LogClient(log), start, end, level, 1 << 20, headers, 65536) == expected


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(logs(), st.data())
def test_the_array_selection_equals_the_batch_loop(twin: str, log: Log, data: st.DataObject) -> None:
    """select()'s array path and its batch-by-batch loop keep the same batches and leave the
    aborted-transaction state alike, response after response."""
    buf = b"".join(log.batches)
    rows, _ = fetch_runs.batch_spans(buf)
    fast, slow = fetch_runs.AbortedRuns(), fetch_runs.AbortedRuns()
    position = data.draw(st.integers(0, log.end))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(rows)), max_size=3)))
    for lo, hi in zip([0, *cuts], [*cuts, len(rows)], strict=True):
        aborted = [(pid, f) for pid, f, _m in log.aborted]
        fast.add(aborted)
        slow.add(aborted)
        part = rows[lo:hi]
        a = fetch_runs.select(part, buf, position, log.end + 1, fast)
        b = fetch_runs._select_loop(part, buf, position, log.end + 1, slow)
        assert (a.keep.tolist(), a.position, a.progressed, a.done) == (
            b.keep.tolist(), b.position, b.progressed, b.done)
        assert (sorted(fast._pending), fast._aborting) == (sorted(slow._pending), slow._aborting)
        position = a.position


def test_batch_spans_twins_agree_on_cut_and_random_bytes() -> None:
    """The native walk and its twin: same rows, same problem and position, on a log cut
    anywhere and on bytes flipped anywhere in it."""
    core = pytest.importorskip("tidelog._native._core")
    b = RecordBatchBuilder(CompressionType.GZIP, base_offset=5)
    for i in range(4):
        b.append(TS0 + i, b"k", b"v" * i)
    c = RecordBatchBuilder(base_offset=9, producer_id=7, producer_epoch=0, is_transactional=True,
                           is_control=True)
    c.append_control(ControlRecordType.ABORT, TS0)
    buf = b.build() + c.build() + b.build()
    rng = np.random.default_rng(7)
    for cut in range(len(buf) + 1):
        assert core.batch_spans(buf[:cut]) == fetch_runs.batch_spans_py(buf[:cut])
    for _ in range(3000):
        flipped = bytearray(buf)
        flipped[int(rng.integers(len(buf)))] ^= int(rng.integers(1, 256))
        assert core.batch_spans(bytes(flipped)) == fetch_runs.batch_spans_py(bytes(flipped))
    rows, problem, pos, _a, _b = core.batch_spans(buf)
    assert (problem, pos) == (0, len(buf))
    got = np.frombuffer(rows, np.int64).reshape(-1, fetch_runs.SPAN_FIELDS)
    assert got[:, fetch_runs.BASE].tolist() == [5, 9, 5]
    assert got[:, fetch_runs.PID].tolist() == [-1, 7, -1]
    assert got[:, fetch_runs.COUNT].tolist() == [4, 1, 4]


def test_decode_runs_twins_refuse_bad_spans_alike() -> None:
    """Spans outside their buffer, shorter than a batch header, or without one payload each
    fail the native pass and its twin with the same error; good spans decode alike."""
    core = pytest.importorskip("tidelog._native._core")
    b = RecordBatchBuilder(base_offset=3)
    for i in range(3):
        b.append(TS0 + i, b"k%d" % i, None if i == 1 else b"v", [("h", b"x")] if i == 2 else [])
    raw = b.build()
    bufs = [raw + raw, raw]
    good = [[0, 0, len(raw)], [0, len(raw), len(raw)], [1, 0, len(raw)]]
    cases: list[tuple[list[list[int]], int]] = [
        (good, 3), ([[2, 0, len(raw)]], 1), ([[0, 1, len(raw) * 2]], 1), ([[0, -1, 61]], 1),
        ([[0, 0, 60]], 1), ([[1, 0, len(raw)]], 2), ([[0, 0, len(raw)], [1, 1, 60]], 2),
    ]
    for spans, n in cases:
        arr = np.array(spans, np.int64)
        outcomes = []
        for fn in (lambda *a: columns.Columns(*core.decode_runs(*a)), columns.decode_runs_py):
            try:
                outcomes.append(("ok", fn(bufs, arr, [None] * n, 0, 100, True)))
            except ValueError as e:
                outcomes.append(("error", str(e)))
        assert outcomes[0] == outcomes[1], spans
        assert (outcomes[0][0] == "ok") == (spans is good)
    c = columns.decode_runs(bufs, np.array(good, np.int64), [None] * 3, 0, 100, True)
    assert np.frombuffer(c.offsets, np.int64).tolist() == [3, 4, 5] * 3
    assert c.value_nulls == 3


def test_an_abort_marker_at_the_start_of_its_transaction_ends_it() -> None:
    """An aborted transaction whose first offset is only reached at its own ABORT marker (its
    data below the fetch position) starts and ends at that marker: the producer's next
    transaction is read, as AbortedFilter reads it (the start is taken before the marker)."""
    marker = RecordBatchBuilder(base_offset=5, producer_id=1, producer_epoch=0,
                                is_transactional=True, is_control=True)
    marker.append_control(ControlRecordType.ABORT, TS0)
    data = RecordBatchBuilder(base_offset=6, producer_id=1, producer_epoch=0, base_sequence=0,
                              is_transactional=True)
    data.append(TS0, None, b"committed later")
    buf = marker.build() + data.build()
    rows, corrupt = fetch_runs.batch_spans(buf)
    assert corrupt is None
    for pick in (fetch_runs.select, fetch_runs._select_loop):
        aborted = fetch_runs.AbortedRuns()
        aborted.add([(1, 5)])
        got = pick(rows, buf, 5, 100, aborted)
        assert (got.keep.tolist(), got.position, aborted._aborting) == ([1], 7, set())
