"""Shared helpers for the cleaner tests: real Logs in real directories."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tidelog.config.log_config import LogConfig
from tidelog.records import CompressionType, ControlRecordType, RecordBatchBuilder, iter_batches
from tidelog.storage.cleaner.cleaner import Cleaner, LogToClean
from tidelog.storage.cleaner.offset_map import SkimpyOffsetMap
from tidelog.storage.cleaner.throttler import Throttler
from tidelog.storage.log import FetchIsolation, Log
from tidelog.storage.validator import AppendOrigin
from tidelog.util.clock import Clock, ManualClock

Rec = tuple[int, bytes | None, bytes | None]  # offset, key, value


def open_log(dir: Path, clock: Clock, scheduler: Any = None, **props: Any) -> Log:
    base = {"cleanup.policy": "compact", "segment.bytes": 1024 * 1024}
    base.update({k.replace("_", "."): v for k, v in props.items()})
    cfg = LogConfig.from_props({k: str(v) for k, v in base.items()})
    return Log.open(dir, cfg, clock=clock, scheduler=scheduler)


def append(lg: Log, records: Iterable[tuple[bytes | None, bytes | None]],
           codec: CompressionType = CompressionType.NONE, ts: int | None = None,
           **batch: Any) -> tuple[int, int]:
    b = RecordBatchBuilder(codec, **batch)
    now = lg.clock.milliseconds() if ts is None else ts
    for k, v in records:
        b.append(now, k, v)
    info = lg.append_as_leader(b.build())
    lg.maybe_increment_high_watermark(lg.log_end_offset)
    return info.first_offset, info.last_offset


def append_each(lg: Log, records: Sequence[tuple[bytes | None, bytes | None]], **kw: Any) -> None:
    for r in records:
        append(lg, [r], **kw)


def append_marker(lg: Log, pid: int, epoch: int, ctype: ControlRecordType) -> int:
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=epoch, is_transactional=True,
                           is_control=True)
    b.append_control(ctype, lg.clock.milliseconds())
    info = lg.append_as_leader(b.build(), origin=AppendOrigin.COORDINATOR)
    lg.maybe_increment_high_watermark(lg.log_end_offset)
    return info.first_offset


def batches(lg: Log) -> list[Any]:
    out: list[Any] = []
    for seg in lg.segments.values():
        out.extend(RecordBatchLike(b) for b in iter_batches(seg.log.read_at(0, seg.size)))
    return out


class RecordBatchLike:
    """A batch copied out of its file (the file may be swapped away later)."""

    def __init__(self, batch: Any) -> None:
        self.base_offset = batch.base_offset
        self.last_offset = batch.last_offset
        self.producer_id = batch.producer_id
        self.last_sequence = batch.last_sequence
        self.records_count = batch.records_count
        self.delete_horizon_ms = batch.delete_horizon_ms
        self.is_control = batch.is_control
        self.records = list(batch.iter_records())


def read_records(lg: Log) -> list[Any]:
    """Every record, as the fetch path returns them (LOG_END isolation)."""
    out: list[Any] = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        info = lg.read(offset, 1 << 22, FetchIsolation.LOG_END)
        data = info.records.read()
        got = list(iter_batches(data))
        if not got:
            break
        for b in got:
            out.extend(b.iter_records())
        offset = got[-1].next_offset
    return out


def kov(lg: Log) -> list[Rec]:
    return [(r.offset, r.key, r.value) for r in read_records(lg)]


def make_cleaner(clock: ManualClock, slots: int = 10_000, load_factor: float = 0.9,
                 **kw: Any) -> Cleaner:
    return Cleaner(0, SkimpyOffsetMap(24 * slots), dup_buffer_load_factor=load_factor,
                   io_buffer_size=kw.pop("io_buffer_size", 64 * 1024),
                   throttler=kw.pop("throttler", Throttler(float("inf"), clock)),
                   clock=clock, **kw)


def clean(cleaner: Cleaner, lg: Log, first_dirty: int = 0, end: int | None = None) -> int:
    upper = lg.active_segment.base_offset if end is None else end
    ltc = LogToClean(lg.topic_partition, lg, first_dirty, upper)  # type: ignore[arg-type]
    next_dirty, _stats = cleaner.clean(ltc)
    return next_dirty
