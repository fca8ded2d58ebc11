"""Shared helpers and fixtures for the Log-level tests (imported by test_log*.py, no tests)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tidelog.config.log_config import LogConfig
from tidelog.records import CompressionType, RecordBatch, build_batch, iter_batches
from tidelog.storage.log import Log
from tidelog.util.clock import ManualClock

T0 = 1_700_000_000_000


def batch(*values: bytes, ts: int | None = T0, key: bytes | None = b"k",
          codec: CompressionType = CompressionType.NONE, **kw: Any) -> bytes:
    """One client batch of ``values`` (timestamp ``ts``; None = no timestamp -1)."""
    t = -1 if ts is None else ts
    return build_batch([(t, key, v) for v in values], codec, **kw)


def read_batches(lg: Log, start: int, max_bytes: int = 1 << 20, **kw: Any) -> list[RecordBatch]:
    info = lg.read(start, max_bytes, **kw)
    data = info.records.read()
    return list(iter_batches(data))


def values_from(lg: Log, start: int, **kw: Any) -> list[tuple[int, bytes | None]]:
    out = []
    pos = start
    while pos < lg.log_end_offset:
        bs = read_batches(lg, pos, **kw)
        if not bs:
            break
        for b in bs:
            out.extend((r.offset, r.value) for r in b.iter_records() if r.offset >= start)
        pos = bs[-1].next_offset
    return out


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def make_log(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[..., Log]]:
    opened: list[Log] = []

    def make(props: dict[str, str] | None = None, *, name: str = "topic-0", **kw: Any) -> Log:
        kw.setdefault("clock", clock)
        lg = Log.open(tmp_path / name, LogConfig.from_props(props or {}), **kw)
        opened.append(lg)
        return lg

    yield make
    for lg in opened:
        try:
            lg.close()
        except Exception:
            pass
