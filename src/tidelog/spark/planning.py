"""Offset resolution and range splitting, shared by the batch and the streaming reader.

Pure Python (no pyspark): the driver resolves startingOffsets/endingOffsets/timestamps to
concrete offsets per topic-partition, then cuts [start, end) ranges into Spark partitions
(Spark's KafkaOffsetRangeCalculator for minPartitions / maxRecordsPerPartition).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

from tidelog.util.topic_partition import TopicPartition

from .backend import Backend
from .options import EARLIEST, LATEST, OffsetSpec, OptionError, ReadOptions

Offsets = dict[TopicPartition, int]


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def to_json_offsets(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark offsets are JSON round-tripped: partition keys must be strings."""
    out: dict[str, dict[str, int]] = {}
    for tp, off in sorted(offsets.items()):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(off)
    return out


def from_json_offsets(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {TopicPartition(t, int(p)): int(o) for t, ps in data.items() for p, o in ps.items()}


def _spec_covers_all(spec: OffsetSpec, tps: list[TopicPartition], option: str) -> None:
    given = {TopicPartition(t, p) for t, ps in spec.offsets.items() for p in ps}
    missing = sorted(set(tps) - given)
    if missing:
        names = ", ".join(str(tp) for tp in missing)
        raise OptionError(
            f"{option} must name every partition read (use -2 for earliest, -1 for latest); missing: {names}"
        )
    unknown = sorted(given - set(tps))
    if unknown:
        raise OptionError(f"{option} names partitions that do not exist: {', '.join(str(t) for t in unknown)}")


def _timestamps(spec: OffsetSpec, tps: list[TopicPartition], option: str) -> dict[TopicPartition, int]:
    if spec.kind == "timestamp":
        return dict.fromkeys(tps, spec.timestamp)
    _spec_covers_all(spec, tps, option)
    return {tp: spec.offsets[tp.topic][tp.partition] for tp in tps}


def resolve_start(
    backend: Backend,
    tps: list[TopicPartition],
    spec: OffsetSpec,
    *,
    strategy: str = "error",
) -> Offsets:
    """startingOffsets (earliest/latest/JSON) or starting timestamps -> offsets."""
    if not tps:
        return {}
    if spec.kind == "earliest":
        return backend.earliest(tps)
    if spec.kind == "latest":
        return backend.latest(tps)
    if spec.kind == "offsets":
        _spec_covers_all(spec, tps, "startingOffsets")
        wanted = {tp: spec.offsets[tp.topic][tp.partition] for tp in tps}
        earliest = backend.earliest([tp for tp, o in wanted.items() if o == EARLIEST])
        latest = backend.latest([tp for tp, o in wanted.items() if o == LATEST])
        return {tp: earliest.get(tp, latest.get(tp, o)) for tp, o in wanted.items()}
    found = backend.offsets_for_times(_timestamps(spec, tps, "startingOffsetsByTimestamp"))
    missing = [tp for tp, o in found.items() if o is None]
    if missing and strategy == "error":
        raise OptionError(
            "no record at or after the starting timestamp in "
            + ", ".join(str(tp) for tp in sorted(missing))
            + " (set startingOffsetsByTimestampStrategy=latest to start at the end instead)"
        )
    latest = backend.latest(missing)
    return {tp: (o if o is not None else latest[tp]) for tp, o in found.items()}


def resolve_end(backend: Backend, tps: list[TopicPartition], spec: OffsetSpec) -> Offsets:
    """endingOffsets (latest/JSON) or ending timestamps -> offsets (exclusive)."""
    if not tps:
        return {}
    if spec.kind == "latest":
        return backend.latest(tps)
    if spec.kind == "offsets":
        _spec_covers_all(spec, tps, "endingOffsets")
        wanted = {tp: spec.offsets[tp.topic][tp.partition] for tp in tps}
        latest = backend.latest([tp for tp, o in wanted.items() if o == LATEST])
        return {tp: latest.get(tp, o) for tp, o in wanted.items()}
    found = backend.offsets_for_times(_timestamps(spec, tps, "endingOffsetsByTimestamp"))
    latest = backend.latest([tp for tp, o in found.items() if o is None])
    return {tp: (o if o is not None else latest[tp]) for tp, o in found.items()}


def _unresolved(spec: OffsetSpec, tps: list[TopicPartition], option: str) -> Offsets | None:
    """Offsets with earliest/latest kept as -2/-1, or None when the spec needs a lookup now."""
    if spec.kind == "earliest":
        return dict.fromkeys(tps, EARLIEST)
    if spec.kind == "latest":
        return dict.fromkeys(tps, LATEST)
    if spec.kind == "offsets":
        _spec_covers_all(spec, tps, option)
        return {tp: spec.offsets[tp.topic][tp.partition] for tp in tps}
    return None


def late_bound_ranges(backend: Backend, tps: list[TopicPartition], opts: ReadOptions) -> list[OffsetRange]:
    """One range per partition for a batch read, with earliest (-2) and latest (-1) left for
    the executor to resolve when the partition runs (Spark's KafkaSourceRDD.resolveRange), so
    a DataFrame whose plan is reused by later actions never reads stale bounds. Timestamps
    and concrete offsets are looked up and checked now."""
    start = _unresolved(opts.starting, tps, "startingOffsets")
    if start is None:
        start = resolve_start(backend, tps, opts.starting, strategy=opts.starting_by_timestamp_strategy)
    end = _unresolved(opts.ending, tps, "endingOffsets")
    if end is None:
        end = resolve_end(backend, tps, opts.ending)
    concrete = [tp for tp in tps if start[tp] >= 0 and end[tp] >= 0]
    checked = check_ranges(
        {tp: start[tp] for tp in concrete}, {tp: end[tp] for tp in concrete},
        backend.earliest(concrete), fail_on_data_loss=opts.fail_on_data_loss,
    )
    out = []
    for tp in tps:
        s, e = checked.get(tp, (start[tp], end[tp]))
        if tp in checked and e <= s:
            continue
        out.append(OffsetRange(tp.topic, tp.partition, s, e))
    return out


def check_ranges(
    start: Offsets, end: Offsets, earliest: Offsets, *, fail_on_data_loss: bool
) -> dict[TopicPartition, tuple[int, int]]:
    """Validated [start, end) per partition; data already deleted below ``earliest`` fails
    the query with failOnDataLoss=true, or is skipped with false."""
    out = {}
    for tp, s in start.items():
        e = end[tp]
        lo = earliest.get(tp, s)
        if s < lo:
            if fail_on_data_loss:
                raise OptionError(
                    f"offsets {s}..{lo - 1} of {tp} are no longer available (deleted by retention); "
                    "set failOnDataLoss=false to skip them"
                )
            s = lo if e >= lo else e  # everything up to the end is gone: empty range
        if s > e:
            raise OptionError(f"the starting offset {s} of {tp} is after its ending offset {e}")
        out[tp] = (s, e)
    return out


def split_ranges(
    ranges: Mapping[TopicPartition, tuple[int, int]],
    *,
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """One range per topic-partition, cut further so that there are about ``min_partitions``
    in total (in proportion to each range's size) and none exceeds
    ``max_records_per_partition`` (Spark's KafkaOffsetRangeCalculator)."""
    base = [OffsetRange(tp.topic, tp.partition, s, e) for tp, (s, e) in sorted(ranges.items()) if e > s]
    total = sum(r.size for r in base)
    out: list[OffsetRange] = []
    for r in base:
        parts = 1
        if min_partitions is not None and len(base) < min_partitions and total:
            parts = max(1, math.ceil(r.size / total * min_partitions))
        if max_records_per_partition is not None:
            parts = max(parts, math.ceil(r.size / max_records_per_partition))
        out.extend(_cut(r, parts))
    return out


def _cut(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = min(parts, r.size)
    if parts <= 1:
        return [r]
    step = r.size / parts
    bounds = [r.start + round(i * step) for i in range(parts)] + [r.end]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in itertools.pairwise(bounds) if b > a]


def rate_limit(
    start: Offsets, latest: Offsets, max_rows: int
) -> Offsets:
    """Spread ``max_rows`` over partitions in proportion to their lag (Spark's rateLimit):
    each gets floor(prorate), or ceil when the share is below one record."""
    lags = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(lags.values())
    if total <= max_rows:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        share = max_rows * lags[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, begin + step)
    return out
