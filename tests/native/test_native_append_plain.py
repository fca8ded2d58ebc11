"""The leader's plain append in one call (storage/log_plain.py): the native append_plain
against its twin append_plain_py: the same answer or the same refusal, the same patched
bytes (untouched when declined), the same bytes in the file (nothing written when declined),
the same OSError for a write that fails; and both accept exactly what validate_plain
accepts, patched alike, when no roll bound applies.

Inputs: test_native_validate_plain's batches (built, then fields overwritten, bytes flipped,
truncated or extended), timestamp bounds and roll bounds drawn around the records'
timestamps, write positions inside and past the file's end.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_core_support import core, needs_core
from test_native_validate_plain import NOW, batches, inputs

from tidelog.records.batch import crc32c
from tidelog.storage.log_plain import INT64_MAX, INT64_MIN, append_plain_py
from tidelog.storage.validator import validate_plain_py

SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])
FILE_START = b"x" * 100


@st.composite
def params(draw: st.DrawFn) -> tuple[int, ...]:
    near = st.integers(NOW - 20_000, NOW + 20_000)

    def mostly(value: int) -> st.SearchStrategy[int]:  # (most batches get past the bounds)
        return st.one_of(st.just(value), st.just(value), st.just(value), near)
    return (draw(st.sampled_from([0, 1, 99, 2**40, 2**63 - 1])),  # offset
            draw(st.sampled_from([-1, 0, 7, 2**31 - 1])),  # leader epoch
            draw(mostly(INT64_MIN)),  # lo
            draw(mostly(INT64_MAX)),  # hi
            draw(st.sampled_from([61, 200] + [1_048_588] * 4)),  # max.message.bytes
            draw(st.sampled_from([False, False, False, True])),  # compact
            draw(mostly(INT64_MAX)),  # max ts bound
            draw(st.sampled_from([0, 37, 100, 4096])))  # position


def _run(fn: object, tmp: Path, name: str, data: bytes, p: tuple[int, ...]
         ) -> tuple[object, bytes, bytes]:
    path = tmp / name
    path.write_bytes(FILE_START)
    buf = bytearray(data)
    fd = os.open(path, os.O_RDWR)
    try:
        got = fn(buf, *p[:7], fd, p[7])  # type: ignore[operator]
    finally:
        os.close(fd)
    return got, bytes(buf), path.read_bytes()


@needs_core
@SETTINGS
@given(data=st.one_of(batches(), batches(), inputs()), p=params())
def test_native_and_twin_agree(tmp_path: Path, data: bytes, p: tuple[int, ...]) -> None:
    native = _run(core.append_plain, tmp_path, "native", data, p)
    twin = _run(append_plain_py, tmp_path, "twin", data, p)
    assert native == twin
    got, buf, file = native
    if got is None:  # declined: untouched, nothing written
        assert buf == data and file == FILE_START
        return
    position = p[7]
    expected = FILE_START[:position] + b"\0" * (position - len(FILE_START)) + buf
    assert file == expected + FILE_START[position + len(buf):]
    assert buf[17:21] == crc32c(memoryview(buf)[21:]).to_bytes(4, "big")


@needs_core
@SETTINGS
@given(data=st.one_of(batches(), batches(), inputs()), p=params(), wrong=st.booleans())
def test_a_given_crc_is_the_computed_one(tmp_path: Path, data: bytes, p: tuple[int, ...],
                                         wrong: bool) -> None:
    """The caller's CRC of buf[21:] (a large batch's, from the crc32c package) gives what
    the CRC computed inside gives, natively and in the twin; a wrong one declines."""
    if len(data) < 61:
        return
    crc = crc32c(memoryview(data)[21:]) ^ (1 if wrong else 0)
    want = _run(append_plain_py, tmp_path, "computed", data, p)
    for name, fn in (("native", core.append_plain), ("twin", append_plain_py)):
        got = _run(lambda *a, fn=fn: fn(*a, crc), tmp_path, name, data, p)
        if wrong:
            assert got == (None, data, FILE_START), name
        else:
            assert got == want, name


@SETTINGS
@given(data=st.one_of(batches(), batches(), inputs()), p=params())
def test_twin_takes_what_validate_plain_takes(tmp_path: Path, data: bytes,
                                              p: tuple[int, ...]) -> None:
    """With no roll bound, the same acceptance and bytes as the validator's plain path."""
    p = (*p[:6], INT64_MAX, p[7])
    got, buf, _file = _run(append_plain_py, tmp_path, "twin", data, p)
    ref = bytearray(data)
    offset, epoch, lo, hi, max_bytes, compact = p[:6]
    want = None
    if len(ref) >= 61:
        want = validate_plain_py(ref, crc32c(memoryview(ref)[21:]), offset, epoch, lo, hi,
                                 max_bytes, bool(compact))
    if want is None:
        assert got is None
        return
    n, max_ts, stale = want
    if stale:
        ref[17:21] = crc32c(memoryview(ref)[21:]).to_bytes(4, "big")
    assert got == (n, max_ts) and buf == bytes(ref)


@needs_core
@pytest.mark.parametrize("fn", ["native", "twin"])
def test_a_failed_write_raises_its_errno(tmp_path: Path, fn: str) -> None:
    """A descriptor that cannot write (read-only): the OSError of pwrite, EBADF."""
    from test_native_validate_plain import RecordBatchBuilder
    b = RecordBatchBuilder()
    b.append(NOW, b"k", b"v")
    path = tmp_path / "ro"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as err:
            (core.append_plain if fn == "native" else append_plain_py)(
                bytearray(b.build()), 5, 0, INT64_MIN, INT64_MAX, 1 << 20, False, INT64_MAX,
                fd, 0)
    finally:
        os.close(fd)
    assert err.value.errno == 9 and path.read_bytes() == b""
