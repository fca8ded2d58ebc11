"""The cleaner's batch runs: native (_core.clean_map_run / clean_filter_run) against their
pure-Python twins (batch_runs.map_run_py / filter_run_py) on the same chunks of batches --
plain ones (keys, keyless records, tombstones, delete horizons, producer ids, offset gaps),
compressed, transactional and control ones, batches whose payload is arbitrary bytes under a
good CRC, overwritten bytes and truncated tails -- demanding the same runs and the same map
state; and the strict record walk against the cleaner's record scan."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_core_support import NativeMap, PythonMap, core, needs_core

from tidelog.records import (
    CompressionType,
    ControlRecordType,
    RecordBatch,
    RecordBatchBuilder,
    assemble_batch,
)
from tidelog.records.batch import DELETE_HORIZON_MASK
from tidelog.records.varint import encode_varint
from tidelog.storage.cleaner import batch_runs
from tidelog.storage.cleaner.batch_filter import _scan_py
from tidelog.storage.cleaner.offset_map import BYTES_PER_ENTRY, SkimpyOffsetMap

SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
KEYS = [b"a", b"b", b"c", b"key-0001", b"x" * 60]  # the last one is hashed outside the lanes


# -- inputs -----------------------------------------------------------------------------------
record_st = st.tuples(st.one_of(st.none(), st.sampled_from(KEYS)),  # key
                      st.one_of(st.none(), st.binary(max_size=6)),  # value (None: tombstone)
                      st.integers(0, 2))  # offset gap before it
batch_st = st.tuples(
    st.sampled_from(["plain"] * 6 + ["lz4", "gzip", "zstd", "snappy", "txn", "control", "raw",
                                      "horizon", "producer"]),
    st.lists(record_st, max_size=6),
    st.binary(max_size=24),  # the payload of a "raw" batch
    st.integers(0, 4),  # its declared count
)
chunk_st = st.tuples(
    st.sampled_from([0, 1000, (1 << 63) - 40, -(1 << 63)]),  # first base offset
    st.lists(batch_st, max_size=8),
    st.one_of(st.none(), st.tuples(st.integers(0, 4000), st.integers(0, 255))),  # overwrite
    st.integers(0, 80),  # bytes cut from the end
)


def _batch(kind: str, recs: list[Any], raw: bytes, count: int, base: int) -> tuple[bytes, int]:
    """One batch at ``base``; returns (bytes, next base)."""
    if kind == "raw":
        data = assemble_batch(base_offset=base, partition_leader_epoch=0, attributes=0,
                              last_offset_delta=max(count - 1, 0), base_timestamp=0,
                              max_timestamp=0, producer_id=-1, producer_epoch=-1,
                              base_sequence=-1, records_count=count, payload=raw)
        return data, base + max(count, 1)
    kw: dict[str, Any] = {"base_offset": base}
    if kind in ("txn", "control", "producer"):
        kw.update(producer_id=7, producer_epoch=0, base_sequence=0)
    if kind in ("txn", "control"):
        kw["is_transactional"] = True
    if kind == "horizon":
        kw["delete_horizon_ms"] = 5000
    codec = {"lz4": CompressionType.LZ4, "gzip": CompressionType.GZIP,
             "zstd": CompressionType.ZSTD, "snappy": CompressionType.SNAPPY}
    b = RecordBatchBuilder(codec.get(kind, CompressionType.NONE), is_control=kind == "control",
                           **kw)
    if kind == "control":
        b.append_control(ControlRecordType.COMMIT, 1000)
        return b.build(), base + 1
    offset = base
    for key, value, gap in recs or [(b"a", b"v", 0)]:
        offset += gap
        if not -(1 << 63) <= offset < (1 << 63) - 1:
            break
        b.append(1000 + offset % 7, key, value, offset=offset)
        offset += 1
    if len(b) == 0:
        b.append(1000, b"a", b"v", offset=base)
        offset = base + 1
    return b.build(), offset


def _chunk(spec: Any) -> bytes:
    base, batches, overwrite, cut = spec
    out = bytearray()
    for kind, recs, raw, count in batches:
        if not -(1 << 63) <= base < (1 << 63) - 8:
            break
        data, base = _batch(kind, recs, raw, count, base)
        out += data
    if overwrite is not None and overwrite[0] < len(out):
        out[overwrite[0]] = overwrite[1]
    return bytes(out[: max(0, len(out) - cut)])


def _state(m: SkimpyOffsetMap) -> tuple[Any, ...]:
    return (bytes(m._bytes), m.size, m._lookups, m._probes, m.latest_offset, list(m._used))


def _runs(fn: Any, m: SkimpyOffsetMap, buf: bytes, *args: Any) -> Any:
    """Runs from the start of ``buf`` until one takes nothing (or fills the map)."""
    out, off = [], 0
    for _ in range(50):
        try:
            r = fn(m, buf, off, *args)
        except Exception as e:  # the twins must fail alike
            out.append(("error", type(e), str(e)))
            break
        out.append(r)
        if not r.batches or getattr(r, "full", False):
            break
        off = r.end
    return out


def _maps(slots: int, stored: list[tuple[bytes, int]]) -> tuple[SkimpyOffsetMap, ...]:
    maps = (NativeMap(slots * BYTES_PER_ENTRY), PythonMap(slots * BYTES_PER_ENTRY))
    for m in maps:
        for key, offset in stored:
            m.put(key, offset)
    return maps


stored_st = st.lists(st.tuples(st.sampled_from(KEYS), st.integers(0, 1100)), max_size=4)


@needs_core
@SETTINGS
@given(chunk_st, st.integers(5, 12), st.integers(0, 14), st.integers(-5, 1020), stored_st)
def test_map_run_twins_agree(spec: Any, slots: int, cap: int, start: int,
                             stored: list[tuple[bytes, int]]) -> None:
    buf = _chunk(spec)
    nat, py = _maps(slots, stored)
    got = _runs(batch_runs._map_run_native, nat, buf, start, cap)
    assert got == _runs(batch_runs.map_run_py, py, buf, start, cap)
    assert _state(nat) == _state(py)


@needs_core
@SETTINGS
@given(chunk_st, stored_st, st.integers(-1, 1030), st.sampled_from([0, 4999, 5000, 9000]),
       st.sampled_from([-1, 1001, 1003, 1 << 62]), st.integers(1, 3000),
       st.sampled_from([-1, 0, 1003, 1 << 40]), st.booleans(),
       st.sampled_from([0, 10_000, (1 << 63) - 9001]))
def test_filter_run_twins_agree(spec: Any, stored: list[tuple[bytes, int]], latest: int,
                                now: int, upper: int, budget: int, max_ts: int,
                                producer_last: bool, horizon_in: int) -> None:
    """Drops, copies and rebuilds (records dropped, a horizon set, deltas re-encoded)."""
    buf = _chunk(spec)
    nat, py = _maps(16, stored)
    last_data = {7: 1001} if producer_last else {}
    fp = batch_runs.FilterParams(latest, now, now + horizon_in, upper, -1, last_data)
    got = _runs(batch_runs._filter_run_native, nat, buf, fp, budget, max_ts)
    assert got == _runs(batch_runs.filter_run_py, py, buf, fp, budget, max_ts)
    assert _state(nat) == _state(py)


def test_runs_stop_before_what_they_do_not_take() -> None:
    """A run takes plain batches, compressed ones too, and stops before a transactional one;
    the filter copies whole batches unchanged and re-writes a partly kept one."""
    plain, nxt = _batch("plain", [(b"a", b"1", 0), (b"b", b"2", 0)], b"", 0, 0)
    lz4, nxt = _batch("lz4", [(b"c", b"3", 0)], b"", 0, nxt)
    txn, _ = _batch("txn", [(b"d", b"4", 0)], b"", 0, nxt)
    buf = plain + lz4 + txn
    m = PythonMap(16 * BYTES_PER_ENTRY)
    r = batch_runs.map_run_py(m, buf, 0, 0, 10)
    assert (r.end, r.batches, r.read, r.full, r.last_offset) == \
        (len(plain + lz4), 2, 3, False, 2)
    assert (m.get(b"a"), m.get(b"b"), m.get(b"c"), m.get(b"d"), m.latest_offset) == \
        (0, 1, 2, -1, 2)
    fp = batch_runs.FilterParams(1, 0, 10, -1, -1, {})
    f = batch_runs.filter_run_py(m, plain + plain[:30], 0, fp, 1 << 20, -1)
    assert (f.batches, f.output, f.last_written) == (1, plain, 1)
    m.put(b"a", 5)  # record 0 superseded: the batch is rebuilt with record 1 alone
    r = batch_runs.filter_run_py(m, plain, 0, fp, 1 << 20, -1)
    want = RecordBatchBuilder(base_offset=0)
    want.append(1001, b"b", b"2", offset=1)
    rebuilt = RecordBatch(r.output)
    assert (r.batches, r.messages_retained, rebuilt.last_offset) == (1, 1, 1)
    assert [(x.offset, x.key, x.value) for x in rebuilt.iter_records()] == [(1, b"b", b"2")]
    assert rebuilt.base_timestamp == 1001 and rebuilt.crc == rebuilt.compute_crc()
    if core is not None:
        n = NativeMap(16 * BYTES_PER_ENTRY)
        n.put(b"a", 5)
        assert batch_runs._filter_run_native(n, plain, 0, fp, 1 << 20, -1) == r


# -- the strict record walk reads what the record scan reads ---------------------------------
def _varint(v: int, pad: int) -> bytes:
    """``v`` zig-zag encoded, with ``pad`` redundant continuation bytes (overlong)."""
    raw = bytearray(encode_varint(v))
    for _ in range(pad):
        raw[-1] |= 0x80
        raw.append(0)
    return bytes(raw)


field_st = st.tuples(st.one_of(st.integers(-(1 << 40), 1 << 40),
                               st.integers(-(1 << 64), 1 << 64)), st.integers(0, 6))
hand_record = st.tuples(field_st, field_st, st.one_of(st.none(), st.binary(max_size=8)),
                        st.binary(max_size=4), st.integers(-2, 2))


@SETTINGS
@given(st.lists(hand_record, max_size=5), st.integers(0, 6), st.integers(-(1 << 63), 1 << 62),
       st.binary(max_size=3), st.sampled_from([0, 1 << 62, -(1 << 63)]))
def test_strict_walk_agrees_with_the_scan(recs: list[Any], count: int, base: int,
                                          tail: bytes, base_ts: int) -> None:
    payload = bytearray()
    for (ts, ts_pad), (delta, d_pad), key, rest, len_fix in recs:
        # pad 6: a 10-byte timestamp delta with bits past 64 (no int64 timestamp)
        ts_bytes = _varint(ts, ts_pad) if ts_pad < 6 else b"\xff" * 9 + b"\x03"
        body = b"\x00" + ts_bytes + _varint(delta, d_pad)
        body += _varint(-1, 0) if key is None else _varint(len(key), 0) + key
        body += rest
        payload += _varint(len(body) + len_fix, 0) + body
    payload += tail
    mv = memoryview(bytes(payload))
    got = batch_runs._plain_records(mv, 0, len(mv), count, base, base_ts)
    if got is None:
        return
    records, end = _scan_py(bytes(payload), base, base_ts, count)
    assert end == len(payload)
    assert [(r.offset, r.key, r.has_value, r.start, r.attr_pos, r.ts_end, r.end)
            for r in records] == \
        [(r.offset, None if r.key < 0 else bytes(mv[r.key : r.key + r.key_length]),
          r.has_value, r.start, r.attr_pos, r.ts_end, r.end) for r in got]
    assert [r.timestamp if -(1 << 63) <= r.timestamp < (1 << 63) else None
            for r in records] == [r.timestamp for r in got]


def test_horizon_attribute_is_the_delete_horizon_bit() -> None:
    data, _ = _batch("horizon", [(b"a", None, 0)], b"", 0, 0)
    assert int.from_bytes(data[21:23], "big") & DELETE_HORIZON_MASK


@pytest.mark.parametrize("count", [7, 1 << 20, (1 << 31) - 1])
def test_a_count_beyond_the_payload_stops_the_run(count: int) -> None:
    """A header claiming more records than its payload has bytes: the run stops before it
    (the reference code raises its error), it does not size scratch space by the count."""
    good, nxt = _batch("plain", [(b"a", b"1", 0)], b"", 0, 0)
    bad, _ = _batch("raw", [], b"\x02\x00\x00\x00\x00\x02", count, nxt)
    for m in [PythonMap(16 * BYTES_PER_ENTRY)] + ([NativeMap(16 * BYTES_PER_ENTRY)] if core else []):
        run = batch_runs.map_run_py if m.native is None else batch_runs._map_run_native
        r = run(m, good + bad, 0, 0, 10)
        assert (r.batches, r.end) == (1, len(good))


@pytest.mark.parametrize("kind", ["lz4", "gzip", "zstd", "snappy"])
def test_a_compressed_batch_is_re_written_in_its_codec(kind: str) -> None:
    data, _ = _batch(kind, [(b"a", b"1", 0), (b"b", None, 0), (b"c", b"3", 0)], b"", 0, 0)
    fp = batch_runs.FilterParams(2, 0, 777, -1, -1, {})
    runs = []
    for m, run in [(PythonMap(16 * BYTES_PER_ENTRY), batch_runs.filter_run_py)] + (
            [(NativeMap(16 * BYTES_PER_ENTRY), batch_runs._filter_run_native)] if core else []):
        m.put(b"a", 9)  # superseded; b's tombstone stays and sets the delete horizon
        runs.append(run(m, data, 0, fp, 1 << 20, -1))
    assert all(r == runs[0] for r in runs)
    out = RecordBatch(runs[0].output)
    assert out.compression == CompressionType[kind.upper()]
    assert (out.delete_horizon_ms, out.records_count) == (777, 2)
    assert [(x.offset, x.key, x.value) for x in out.iter_records()] == \
        [(1, b"b", None), (2, b"c", b"3")]
