"""The produce validator's fast path for one plain batch (validate_plain) against its twin
and against the general path: the native function and validate_plain_py accept the same
batches and patch them to the same bytes; and validate_and_assign_offsets answers every
batch alike (the same result and bytes, or the same error) whether the fast path is taken
or switched off.

Inputs: batches built by RecordBatchBuilder (plain, compressed, LogAppendTime, with and
without producer ids, sequences and null keys, non-zero base offsets), the same batches with
header fields overwritten (CRC recomputed or not), bytes flipped, truncated or extended, and
topic settings drawn around the records' timestamps.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_core_support import core, needs_core

from tidelog.config.log_config import LogConfig
from tidelog.records import CompressionType, RecordBatchBuilder, TimestampType
from tidelog.records.batch import crc32c
from tidelog.storage import validator
from tidelog.storage.validator import AppendOrigin, validate_and_assign_offsets

SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
NOW = 1_700_000_000_000
# header fields a mutation may overwrite: (offset, struct format)
FIELDS = [(0, ">q"), (8, ">i"), (16, ">b"), (21, ">h"), (23, ">i"), (27, ">q"), (35, ">q"),
          (43, ">q"), (53, ">i"), (57, ">i")]


@st.composite
def batches(draw: st.DrawFn) -> bytes:
    pid = draw(st.sampled_from([-1, -1, 7, 1 << 40]))
    b = RecordBatchBuilder(
        draw(st.sampled_from([CompressionType.NONE] * 6 + [CompressionType.GZIP])),
        base_offset=draw(st.sampled_from([0] * 8 + [5])),
        timestamp_type=draw(st.sampled_from([TimestampType.CREATE_TIME] * 8
                                            + [TimestampType.LOG_APPEND_TIME])),
        log_append_time=NOW,
        producer_id=pid,
        producer_epoch=draw(st.integers(-1, 3)),
        base_sequence=draw(st.sampled_from([-1, 0, 12, 2**31 - 3])) if pid >= 0 else -1,
        is_transactional=draw(st.booleans()) and pid >= 0)
    for _ in range(draw(st.integers(1, 12))):
        b.append(NOW + draw(st.integers(-10_000, 10_000)),
                 draw(st.one_of(st.none(), st.binary(max_size=8))),
                 draw(st.one_of(st.none(), st.binary(max_size=60))))
    return b.build()


@st.composite
def inputs(draw: st.DrawFn) -> bytes:
    buf = bytearray(draw(batches()))
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["field", "field", "flip", "truncate", "extend"]))
        if kind == "field" and len(buf) >= 65:
            pos, fmt = draw(st.sampled_from(FIELDS))
            size = struct.calcsize(fmt)
            lo, hi = -(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1
            value = draw(st.one_of(st.integers(-2, 3), st.integers(lo, hi)))
            struct.pack_into(fmt, buf, pos, value)
            if draw(st.booleans()):  # a consistent CRC: the deeper checks are reached
                struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
        elif kind == "flip" and buf:
            pos = draw(st.integers(0, len(buf) - 1))
            buf[pos] ^= draw(st.integers(1, 255))
        elif kind == "truncate" and buf:
            del buf[draw(st.integers(0, len(buf) - 1)):]
        elif kind == "extend":
            buf += draw(st.binary(min_size=1, max_size=70))
    return bytes(buf)


@st.composite
def configs(draw: st.DrawFn) -> LogConfig:
    props: dict[str, Any] = {
        "message.timestamp.before.max.ms": draw(st.sampled_from([9223372036854775807, 0,
                                                                 5_000, 20_000])),
        "message.timestamp.after.max.ms": draw(st.sampled_from([9223372036854775807, 0,
                                                                5_000, 20_000])),
        "max.message.bytes": draw(st.sampled_from([1048588, 200, 61])),
        "cleanup.policy": draw(st.sampled_from(["delete", "delete", "compact"])),
        "compression.type": draw(st.sampled_from(["producer"] * 4 + ["uncompressed", "gzip"])),
        "message.timestamp.type": draw(st.sampled_from(["CreateTime"] * 5 + ["LogAppendTime"])),
    }
    return LogConfig.from_props(props)


def plain_args(data: bytes, cfg: LogConfig, offset: int, epoch: int) -> tuple[Any, ...]:
    lo = max(NOW - cfg.timestamp_before_max_ms, -(1 << 63))
    hi = min(NOW + cfg.timestamp_after_max_ms, (1 << 63) - 1)
    return crc32c(data[21:]), offset, epoch, lo, hi, cfg.max_message_bytes, cfg.compact


@needs_core
@SETTINGS
@given(inputs(), configs(), st.integers(0, (1 << 62)), st.integers(-1, (1 << 31) - 1))
def test_native_and_python_twin_agree(data: bytes, cfg: LogConfig, offset: int,
                                      epoch: int) -> None:
    a, b = bytearray(data), bytearray(data)
    got_native = core.validate_plain(a, *plain_args(data, cfg, offset, epoch))
    got_python = validator.validate_plain_py(b, *plain_args(data, cfg, offset, epoch))
    assert got_native == got_python
    assert a == b
    if got_native is None:
        assert a == data  # declined: untouched


def outcome(data: bytes, cfg: LogConfig, offset: int, epoch: int,
            origin: AppendOrigin) -> tuple[Any, ...]:
    buf = bytearray(data)
    try:
        r = validate_and_assign_offsets(buf, cfg, now_ms=NOW, offset=offset,
                                        leader_epoch=epoch, origin=origin)
    except Exception as e:  # the same error either way: type and message
        return ("error", type(e), str(e))
    return ("ok", bytes(r.records), bytes(r.batch.buf), r.first_offset, r.last_offset,
            r.max_timestamp, r.offset_of_max_timestamp, r.log_append_time, r.num_messages,
            r.recompressed)


@pytest.mark.parametrize("fast", ["native", "python"])
@SETTINGS
@given(data=inputs(), cfg=configs(), offset=st.integers(0, (1 << 62)),
       epoch=st.integers(-1, (1 << 31) - 1),
       origin=st.sampled_from([AppendOrigin.CLIENT] * 4 + [AppendOrigin.COORDINATOR]))
def test_the_fast_path_answers_as_the_general_path(
        fast: str, data: bytes, cfg: LogConfig, offset: int, epoch: int,
        origin: AppendOrigin) -> None:
    if fast == "native" and core is None:
        pytest.skip("native core not built")
    saved = validator._plain
    try:
        validator._plain = lambda *a: None  # type: ignore[assignment]
        want = outcome(data, cfg, offset, epoch, origin)
        validator._plain = core.validate_plain if fast == "native" else \
            validator.validate_plain_py  # type: ignore[assignment]
        got = outcome(data, cfg, offset, epoch, origin)
    finally:
        validator._plain = saved  # type: ignore[assignment]
    assert got == want


def test_a_plain_batch_takes_the_fast_path() -> None:
    """The usual producer batch is accepted by the fast path itself (not only answered
    alike): patched offsets, epoch and max timestamp, the CRC still valid; a batch whose
    max timestamp field is stale gets the records' and a new CRC."""
    b = RecordBatchBuilder(producer_id=3, producer_epoch=0, base_sequence=0)
    for i in range(3):
        b.append(NOW + i, None, b"v%d" % i)
    buf = bytearray(b.build())
    cfg = LogConfig.from_props({})
    assert validator.validate_plain_py(buf, *plain_args(bytes(buf), cfg, 40, 2)) == (
        3, NOW + 2, False)
    assert struct.unpack_from(">q", buf, 0)[0] == 40
    assert struct.unpack_from(">i", buf, 12)[0] == 2
    assert struct.unpack_from(">I", buf, 17)[0] == crc32c(memoryview(buf)[21:])
    stale = bytearray(b.build())
    struct.pack_into(">q", stale, 35, NOW - 5)
    struct.pack_into(">I", stale, 17, crc32c(memoryview(stale)[21:]))
    assert validator.validate_plain(stale, *plain_args(bytes(stale), cfg, 40, 2)[1:]) == (
        3, NOW + 2)
    assert bytes(stale) == bytes(buf)
