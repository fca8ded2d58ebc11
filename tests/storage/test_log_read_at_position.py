"""Log.read_at_position (storage/log_read.py read_at_position): a read from where the caller
knows the batch at the offset starts answers the bytes ``Log.read`` answers, or None where
it would take more (then ``read`` answers); and ``mirror_stamp`` writes the Log's state
stamp into the cell it was given as the stamp moves."""
# ruff: noqa: F811  (pytest fixtures imported from test_log_support)

from __future__ import annotations

import struct
from collections.abc import Callable

from test_log_support import T0, batch, clock, make_log  # noqa: F401

from tidelog.records import ControlRecordType, RecordBatchBuilder
from tidelog.storage.log import Log
from tidelog.storage.log_read import FetchIsolation
from tidelog.storage.validator import AppendOrigin

MakeLog = Callable[..., Log]


def appended(lg: Log, *values: bytes) -> None:
    lg.append_as_leader(batch(*values))
    lg.update_high_watermark(lg.log_end_offset)


def where(lg: Log) -> tuple[int, int, int]:
    meta = lg.high_watermark_metadata
    assert meta is not None and meta.message_offset == lg.high_watermark
    return meta.message_offset, meta.segment_base_offset, meta.relative_position_in_segment


def long_way(lg: Log, offset: int) -> bytes:
    return lg.read(offset, 1 << 20).records.read()


def test_a_read_from_the_noted_position_answers_as_read(make_log: MakeLog) -> None:
    lg = make_log()
    appended(lg, b"a", b"b")
    at, base, pos = where(lg)
    appended(lg, b"c")
    appended(lg, b"d", b"e", b"f")
    got = lg.read_at_position(at, 1 << 20, base, pos, 1 << 20)
    assert got is not None and got == long_way(lg, at)
    size = len(got)
    assert lg.read_at_position(at, size, base, pos, size) == got  # exactly at the limits
    assert lg.read_at_position(at, size - 1, base, pos, size) is None  # over max_length
    assert lg.read_at_position(at, size, base, pos, size - 1) is None  # over copy_limit
    assert lg.read_at_position(at + 1, size, base, pos, size) is None  # not where it starts
    assert lg.read_at_position(at, size, base, pos + 1, size) is None
    assert lg.read_at_position(at, size, base + 1, pos, size) is None  # another segment
    assert lg.read_at_position(lg.high_watermark, size, base, pos, size) is None  # nothing new
    lg.roll()
    appended(lg, b"g")  # the bound in the next segment now: the long way
    assert lg.read_at_position(at, 1 << 20, base, pos, 1 << 20) is None


def test_below_the_log_start_or_after_a_truncation_it_takes_the_long_way(
        make_log: MakeLog) -> None:
    lg = make_log()
    appended(lg, b"a")
    appended(lg, b"b")
    at, base, pos = where(lg)
    appended(lg, b"c", b"d")
    lg.truncate_to(at - 1)  # the batch at ``pos`` now holds other offsets
    lg.append_as_leader(batch(b"x", b"y", b"z"))
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.read_at_position(at, 1 << 20, base, pos, 1 << 20) is None
    assert long_way(lg, at)  # (the long way finds the batch holding it)
    at, base, pos = where(lg)
    appended(lg, b"e")
    assert lg.maybe_increment_log_start_offset(at + 1)
    assert lg.read_at_position(at, 1 << 20, base, pos, 1 << 20) is None


def test_an_aborted_transaction_in_the_segment_takes_the_long_way(make_log: MakeLog) -> None:
    """Where the segment's transaction index lists an aborted transaction, a read_committed
    ``read`` lists it: the position read answers None there (so that its bytes stand for
    either isolation's answer), and reads from the position again in the next segment."""
    lg = make_log()
    appended(lg, b"a")
    at, base, pos = where(lg)
    appended(lg, b"b")
    assert lg.read_at_position(at, 1 << 20, base, pos, 1 << 20) == long_way(lg, at)
    lg.append_as_leader(batch(b"t", producer_id=7, producer_epoch=0, base_sequence=0,
                              is_transactional=True))
    m = RecordBatchBuilder(producer_id=7, producer_epoch=0, is_transactional=True,
                           is_control=True)
    m.append_control(ControlRecordType.ABORT, T0, coordinator_epoch=0)
    lg.append_as_leader(m.build(), origin=AppendOrigin.COORDINATOR)
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.read(at, 1 << 20, FetchIsolation.TXN_COMMITTED).aborted_transactions
    assert lg.read_at_position(at, 1 << 20, base, pos, 1 << 20) is None
    at, base, pos = where(lg)
    appended(lg, b"c")  # (the segment lists one still: the long way, whatever the range)
    assert lg.read_at_position(at, 1 << 20, base, pos, 1 << 20) is None
    lg.roll()
    appended(lg, b"d")
    at, base, pos = where(lg)
    appended(lg, b"e")
    assert lg.read(at, 1 << 20, FetchIsolation.TXN_COMMITTED).aborted_transactions == []
    assert lg.read_at_position(at, 1 << 20, base, pos, 1 << 20) == long_way(lg, at)


def test_the_state_stamp_is_mirrored_into_its_cell(make_log: MakeLog) -> None:
    lg = make_log()
    cell = bytearray(16)
    stamp = struct.Struct("=q")
    with lg.lock:
        lg.mirror_stamp((cell, 8))
    assert stamp.unpack_from(cell, 8)[0] == lg.state_stamp and cell[:8] == bytes(8)
    before = lg.state_stamp
    appended(lg, b"a")
    assert lg.state_stamp != before and stamp.unpack_from(cell, 8)[0] == lg.state_stamp
    with lg.lock:
        lg.mirror_stamp(None)
    frozen = bytes(cell)
    appended(lg, b"b")
    assert bytes(cell) == frozen
