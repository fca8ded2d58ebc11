"""The cleaner's batch runs: native (_core.clean_map_run / clean_filter_run) against their
pure-Python twins (batch_runs.map_run_py / filter_run_py) on the same chunks of batches --
plain ones (keys, keyless records, tombstones, delete horizons, producer ids, offset gaps),
compressed, transactional and control ones, batches whose payload is arbitrary bytes under a
good CRC, overwritten bytes and truncated tails -- demanding the same runs and the same map
state; and the strict record walk against the cleaner's record scan."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
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
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _varint(v: int, pad: int) -> bytes:
    """``v`` zig-zag encoded, with ``pad`` redundant continuation bytes (overlong)."""
    raw = bytearray(encode_varint(v))
    for _ in range(pad):
        raw[-1] |= 0x80
        raw.append(0)
    return bytes(raw)


def _padded(v: int, pad: int, limit: int) -> bytes:
    """``v`` with up to ``pad`` redundant bytes, staying within ``limit`` bytes in all."""
    return _varint(v, min(pad, max(0, limit - len(encode_varint(v)))))


# A record as Kafka writes it (DefaultRecord): length, attributes, timestamp delta, offset
# delta, key, value, headers; each varint possibly padded within the strict walk's widths.
TS_PAST_64 = b"\xff" * 9 + b"\x03"  # a 10-byte timestamp delta with bits past 64
ts_st = st.one_of(st.tuples(st.integers(INT64_MIN, INT64_MAX), st.integers(0, 9)),
                  st.just((None, 0)))  # None: TS_PAST_64
value_st = st.one_of(st.none(), st.binary(max_size=8))
header_st = st.one_of(st.just(b"\x00"), st.just(b"\x02\x02h\x02v"))  # none, or h=v
key_st = st.one_of(st.none(), st.binary(max_size=8))
record_st_walk = st.tuples(ts_st, st.integers(-(1 << 20), 1 << 20), key_st, value_st, header_st,
                           st.integers(0, 4))  # length pad, delta pad, key-length pad (shared)
# What breaks the payload, in a minority of examples: each of these must be refused by the
# strict walk ("random" is arbitrary bytes, read alike by both when the walk takes them).
FAULTS = ["count+1", "count-1", "tail", "longer", "shorter", "length>5", "ts>10", "delta>5",
          "key>5", "no value", "key past end", "offset past int64", "random"]
fault_st = st.one_of(st.just("none"), st.just("none"), st.sampled_from(FAULTS))  # 2 in 3 valid


def _record(ts: tuple[int | None, int], delta: int, key: bytes | None, value: bytes | None,
            headers: bytes, pads: int, fault: str) -> bytes:
    ts_delta, ts_pad = ts
    ts_bytes = TS_PAST_64 if ts_delta is None else _padded(ts_delta, ts_pad, 10)
    if fault == "ts>10":
        ts_bytes = _varint(0, 10)
    d_bytes = _varint(delta, 5) if fault == "delta>5" else _padded(delta, pads, 5)
    klen = -1 if key is None else len(key)
    k_bytes = _varint(klen, 5) if fault == "key>5" else _padded(klen, pads, 5)
    body = b"\x00" + ts_bytes + d_bytes + k_bytes + (key or b"")
    if fault == "key past end":
        body = b"\x00" + ts_bytes + d_bytes + _varint(len(key or b"") + 20, 0) + (key or b"")
    if fault != "no value":
        body += (_varint(-1, 0) if value is None else _varint(len(value), 0) + value) + headers
    length = _padded(len(body) + {"longer": 3, "shorter": -1}.get(fault, 0), pads, 5)
    return (_varint(len(body), 5) if fault == "length>5" else length) + body


def _walk_input(recs: list[Any], fault: str, base: int, junk: bytes) -> tuple[bytes, int, int]:
    """The payload (its last record carrying the fault), its count and its base offset."""
    if fault == "offset past int64":  # past either end, as the last delta's sign says
        sign = -1 if recs[-1][1] < 0 else 1
        base = INT64_MIN + 10 if sign < 0 else INT64_MAX - 10
        recs = [*recs[:-1], (recs[-1][0], sign * (11 + abs(recs[-1][1])), *recs[-1][2:])]
    if fault == "random":
        return junk, len(recs), base
    parts = [_record(*r, fault="none") for r in recs[:-1]] + [_record(*recs[-1], fault=fault)]
    payload = b"".join(parts)
    count = len(recs) + {"count+1": 1, "count-1": -1}.get(fault, 0)
    return payload + (junk or b"\x00" if fault == "tail" else b""), count, base


def _expected(recs: list[Any], base: int, base_ts: int) -> list[Any]:
    """What both readers must find in a payload without a fault."""
    out = []
    for (ts_delta, _pad), delta, key, value, *_rest in recs:
        ts = None if ts_delta is None else base_ts + ts_delta
        out.append((base + delta, key, value is not None,
                    ts if ts is not None and INT64_MIN <= ts <= INT64_MAX else None))
    return out


def test_strict_walk_agrees_with_the_scan() -> None:
    """Mostly valid payloads (both readers must read exactly the records written), a
    minority with one fault each (the strict walk must refuse them; arbitrary bytes it takes
    must read alike). Most examples must compare records, or the test proves little."""
    seen: dict[str, int] = {}

    @SETTINGS
    @given(st.lists(record_st_walk, min_size=1, max_size=5), fault_st,
           st.integers(INT64_MIN + (1 << 20), INT64_MAX - (1 << 20)), st.binary(max_size=24),
           st.sampled_from([0, 1 << 62, INT64_MIN]))
    def walk(recs: list[Any], fault: str, base: int, junk: bytes, base_ts: int) -> None:
        payload, count, base = _walk_input(recs, fault, base, junk)
        mv = memoryview(payload)
        got = batch_runs._plain_records(mv, 0, len(mv), count, base, base_ts)
        outcome = "refused" if got is None else f"compared {len(got)} records"
        event(f"{fault}: {outcome}")
        tally = "refused" if got is None else "compared"
        seen[tally] = seen.get(tally, 0) + 1
        if fault not in ("none", "random"):
            assert got is None, f"the strict walk took a payload with a fault: {fault}"
            return
        if fault == "none":
            assert got is not None and len(got) == count, "a valid payload was refused"
            assert [(r.offset, None if r.key < 0 else bytes(mv[r.key : r.key + r.key_length]),
                     r.has_value, r.timestamp) for r in got] == _expected(recs, base, base_ts)
        if got is None:
            return
        records, end = _scan_py(payload, base, base_ts, count)
        assert end == len(payload)
        assert [(r.offset, r.key, r.has_value, r.start, r.attr_pos, r.ts_end, r.end)
                for r in records] == \
            [(r.offset, None if r.key < 0 else bytes(mv[r.key : r.key + r.key_length]),
              r.has_value, r.start, r.attr_pos, r.ts_end, r.end) for r in got]
        assert [r.timestamp if INT64_MIN <= r.timestamp <= INT64_MAX else None
                for r in records] == [r.timestamp for r in got]

    walk()
    total = sum(seen.values())
    assert seen.get("compared", 0) >= 0.5 * total, f"too few examples compared records: {seen}"


@pytest.mark.parametrize("fault", [f for f in FAULTS if f != "random"])
def test_strict_walk_refuses_every_fault(fault: str) -> None:
    """Each fault on its own (the property test draws them unevenly): two records that both
    readers take whole, then the same two with the fault in the last one, refused."""
    recs = [((5, 0), 0, b"k", b"v", b"\x00", 1), ((-3, 2), 1, None, None, b"\x02\x02h\x02v", 0)]
    payload, count, base = _walk_input(recs, "none", 100, b"")
    got = batch_runs._plain_records(memoryview(payload), 0, len(payload), count, base, 1000)
    assert got is not None
    assert [(r.offset, r.key_length, r.has_value, r.timestamp) for r in got] == \
        [(100, 1, True, 1005), (101, 0, False, 997)]
    payload, count, base = _walk_input(recs, fault, 100, b"")
    assert batch_runs._plain_records(memoryview(payload), 0, len(payload), count, base,
                                     1000) is None


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
