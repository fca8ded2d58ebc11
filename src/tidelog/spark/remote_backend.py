"""Path mode on a tiered-storage bucket: the remote segments of each partition, plus
(optionally) a broker for the local tail above the highest remote offset.

The driver lists the bucket and plans (remote_layout.py: which segment copy serves each
offset, and where each copy ends); the plan travels to the executors inside the
``BackendSpec`` of every input partition, so executors never list: they fetch the
``.index`` of a segment to seek and then the ``.log`` in ranged GETs of ``chunk_bytes``,
and hand the batches to the same Arrow decoding as local path mode. read_committed works
as local path mode's (storage/reader_txn.py): aborted transactions from the segments'
``.txnindex`` objects, the stable end from the last segment's producer ``.snapshot`` (the
first offset of every transaction still open there); above it a broker, when given,
serves the rest at read_committed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Protocol, cast

from tidelog.client.kafka_client import KafkaClient
from tidelog.records import RecordBatch, iter_batches
from tidelog.storage.producer_state import parse_snapshot
from tidelog.storage.reader_txn import (
    filter_aborted,
    merge_aborted,
    parse_txn_index,
    scan_transactions,
)
from tidelog.storage.remote.factory import KEY_PREFIX, create_object_storage
from tidelog.storage.remote.object_storage import ListableObjectStorage
from tidelog.storage.remote.storage_manager import RemoteResourceNotFoundError
from tidelog.util.topic_partition import TopicPartition

from .remote_layout import PartitionPlan, SegmentObjects, SegmentSlice, choose_slices, group_objects
from .remote_metadata import FinishedSegment, finished_segments
from .remote_options import RemoteConfigs

_INDEX_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
DEFAULT_CHUNK_BYTES = 8 << 20
PROBE_THREADS = 8  # GETs in flight while the driver finds where segments end


@dataclass(frozen=True)
class RemoteSpec:
    """What an executor needs to read a bucket: its configs and the driver's plan."""

    configs: RemoteConfigs
    use_metadata: bool = False
    plans: tuple[tuple[TopicPartition, PartitionPlan], ...] | None = None


class TailBackend(Protocol):
    """What the bucket reader needs of the broker it reads the tail from (BrokerBackend)."""

    client: KafkaClient

    def topics(self) -> dict[str, list[int]]: ...
    def earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]: ...
    def latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]: ...
    def offsets_for_times(self, times: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]: ...
    def batches(self, tp: TopicPartition, start: int, end: int) -> Iterator[RecordBatch]: ...
    def close(self) -> None: ...


def _index_entries(data: bytes, entry: struct.Struct) -> list[tuple[int, ...]]:
    """Entries of a closed segment's index (a zero relative offset after the first ends it)."""
    out: list[tuple[int, ...]] = []
    rel = 0 if entry is _INDEX_ENTRY else 1
    for i in range(len(data) // entry.size):
        fields = entry.unpack_from(data, i * entry.size)
        if i and fields[rel] == 0:
            break
        out.append(fields)
    return out


class RemoteBackend:
    """The Backend (backend.py) of path mode on ``s3://bucket/prefix``."""

    def __init__(self, spec: RemoteSpec, tail: TailBackend | None = None, *,
                 read_committed: bool = False, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> None:
        self.spec = spec
        self.tail = tail
        self.read_committed = read_committed
        self.chunk_bytes = chunk_bytes
        self.configs = dict(spec.configs)
        self.prefix = self.configs.get(KEY_PREFIX, "")
        self._storage: ListableObjectStorage | None = None
        self._groups: dict[TopicPartition, list[SegmentObjects]] | None = None
        self._plans: dict[TopicPartition, PartitionPlan] = dict(spec.plans or ())
        self._finished: dict[str, FinishedSegment] | None = None
        self._indexes: dict[str, list[tuple[int, ...]]] = {}
        self._tail_tps: set[TopicPartition] | None = None

    @property
    def storage(self) -> ListableObjectStorage:
        if self._storage is None:
            self._storage = cast(ListableObjectStorage, create_object_storage(self.configs))
        return self._storage

    # -- planning (driver) ---------------------------------------------------------------------
    def _listing(self) -> dict[TopicPartition, list[SegmentObjects]]:
        if self._groups is None:
            self._groups = group_objects(self.storage.list_objects(self.prefix), self.prefix)
        return self._groups

    def planned(self, tps: list[TopicPartition]) -> RemoteSpec:
        """The spec with the plan of ``tps`` in it, for the executors."""
        self._ensure(tps)
        return replace(self.spec, plans=tuple(sorted((tp, self._plans[tp]) for tp in tps)))

    def _ensure(self, tps: list[TopicPartition]) -> None:
        missing = [tp for tp in tps if tp not in self._plans]
        if not missing:
            return
        groups = self._listing()
        if self.spec.use_metadata and self._finished is None:
            assert self.tail is not None
            self._finished = finished_segments(self.tail.client)
        segs = [s for tp in missing for s in groups.get(tp, []) if "log" in s.suffixes]
        if self._finished is not None:
            ends = {s.stem: (self._finished[s.segment_id].end_offset if s.segment_id in self._finished else None)
                    for s in segs}
        else:
            with ThreadPoolExecutor(PROBE_THREADS) as pool:
                ends = dict(zip((s.stem for s in segs), pool.map(self._last_offset, segs), strict=True))
        for tp in missing:
            pairs = [(s, last) for s in groups.get(tp, []) if (last := ends.get(s.stem)) is not None]
            plan = PartitionPlan(choose_slices(pairs))
            if self.read_committed and plan.slices:
                plan = replace(plan, stable_end=self._stable_end(plan))
            self._plans[tp] = plan

    def _index(self, stem: str) -> list[tuple[int, ...]]:
        if stem not in self._indexes:
            try:
                self._indexes[stem] = _index_entries(self.storage.fetch(stem + ".index"), _INDEX_ENTRY)
            except RemoteResourceNotFoundError:
                self._indexes[stem] = []
        return self._indexes[stem]

    def _last_offset(self, seg: SegmentObjects) -> int | None:
        """The last offset of a segment copy: its last batch, found from the last index entry
        (None: no complete batch)."""
        entries = self._index(seg.stem) if "index" in seg.suffixes else []
        for position in dict.fromkeys((entries[-1][1] if entries else 0, 0)):
            if position >= seg.log_size:
                continue
            data = self.storage.fetch(seg.stem + ".log", (position, seg.log_size - 1))
            last = None
            for batch in iter_batches(data, path=seg.stem + ".log"):
                last = batch.last_offset
            if last is not None:
                return last
        return None

    def _stable_end(self, plan: PartitionPlan) -> int:
        """read_committed: the remote part ends before the first offset of every transaction
        still open at its end (the last segment's producer snapshot, or a scan)."""
        last = plan.slices[-1]
        end = plan.end
        assert end is not None and plan.start is not None
        if last.has_snapshot:
            entries = parse_snapshot(self.storage.fetch(last.stem + ".snapshot"), last.stem + ".snapshot")
            return min([end, *(e.current_txn_first_offset for e in entries
                                if e.current_txn_first_offset is not None)])
        return scan_transactions(self._raw(plan, plan.start, end), plan.start, {}, end).last_stable_offset

    # -- Backend -------------------------------------------------------------------------------
    def _plan(self, tp: TopicPartition) -> PartitionPlan:
        self._ensure([tp])
        return self._plans[tp]

    def _remote_end(self, plan: PartitionPlan) -> int | None:
        return plan.stable_end if self.read_committed else plan.end

    def _in_tail(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        """The partitions the tail's broker has (a topic may be only in the bucket)."""
        if self.tail is None:
            return []
        if self._tail_tps is None:
            self._tail_tps = {TopicPartition(t, p) for t, ps in self.tail.topics().items() for p in ps}
        return [tp for tp in tps if tp in self._tail_tps]

    def topics(self) -> dict[str, list[int]]:
        self._groups = None  # re-list: a streaming query picks up new segments
        self._plans.clear()
        self._tail_tps = None
        found: dict[str, set[int]] = {}
        for tp in [*self._listing(), *self._in_tail([])]:
            found.setdefault(tp.topic, set()).add(tp.partition)
        for tp in self._tail_tps or ():
            found.setdefault(tp.topic, set()).add(tp.partition)
        return {t: sorted(ps) for t, ps in sorted(found.items())}

    def earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        out = {tp: self._plan(tp).start for tp in tps}
        rest = self._in_tail([tp for tp, o in out.items() if o is None])
        if rest and self.tail is not None:
            out.update(self.tail.earliest(rest))
        return {tp: o or 0 for tp, o in out.items()}

    def latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        out = {tp: self._remote_end(self._plan(tp)) or 0 for tp in tps}
        tail = self._in_tail(tps)
        if tail and self.tail is not None:
            out.update({tp: max(o, out[tp]) for tp, o in self.tail.latest(tail).items()})
        return out

    def offsets_for_times(self, times: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        out = {tp: self._offset_for_time(tp, ts) for tp, ts in times.items()}
        rest = {tp: times[tp] for tp in self._in_tail([tp for tp, o in out.items() if o is None])}
        if rest and self.tail is not None:
            out.update(self.tail.offsets_for_times(rest))
        return out

    def _offset_for_time(self, tp: TopicPartition, timestamp: int) -> int | None:
        plan = self._plan(tp)
        end = self._remote_end(plan)
        for sl in plan.slices:
            try:
                entries = _index_entries(self.storage.fetch(sl.stem + ".timeindex"), _TIME_ENTRY)
            except RemoteResourceNotFoundError:
                entries = []
            if entries and entries[-1][0] < timestamp:
                continue  # a closed segment's last time index entry is its largest timestamp
            for batch in self._slice_batches(sl, sl.first, sl.last + 1):
                if batch.is_control or batch.max_timestamp < timestamp:
                    continue
                for rec in batch.iter_records():
                    if sl.first <= rec.offset and rec.timestamp >= timestamp:
                        return rec.offset if end is None or rec.offset < end else None
        return None

    def batches(self, tp: TopicPartition, start: int, end: int) -> Iterator[RecordBatch]:
        plan = self._plan(tp)
        remote_end = self._remote_end(plan)
        if remote_end is not None and start < remote_end:
            yield from self._remote(plan, start, min(end, remote_end))
        if self.tail is not None and end > (remote_end or 0) and self._in_tail([tp]):
            yield from self.tail.batches(tp, max(start, remote_end or 0), end)

    def _remote(self, plan: PartitionPlan, start: int, end: int) -> Iterator[RecordBatch]:
        batches = self._raw(plan, start, end)
        if not self.read_committed:
            return batches
        indexed = [t for sl in plan.slices if sl.last >= start and sl.has_txn_index
                   for t in parse_txn_index(self.storage.fetch(sl.stem + ".txnindex"))]
        return filter_aborted(batches, merge_aborted(indexed, []), start)

    def _raw(self, plan: PartitionPlan, start: int, end: int) -> Iterator[RecordBatch]:
        for sl in plan.slices:
            if sl.last >= start and sl.first < end:
                yield from self._slice_batches(sl, start, end)

    def _position(self, sl: SegmentSlice, offset: int) -> int:
        """Byte position of the last indexed batch at or below ``offset`` in the slice's .log."""
        if offset <= sl.base_offset or not sl.has_offset_index:
            return 0
        best = 0
        for rel, position in self._index(sl.stem):
            if rel > offset - sl.base_offset:
                break
            best = position
        return best if best < sl.log_size else 0

    def _slice_batches(self, sl: SegmentSlice, start: int, end: int) -> Iterator[RecordBatch]:
        """Batches of the slice holding offsets in [start, end), read in ranged GETs. A batch
        below the slice's first offset belongs to the copy before it and is skipped (copies
        of one log cut between the same batches: followers copy the leader's batches)."""
        lo, hi = max(start, sl.first), min(end, sl.last + 1)
        if lo >= hi:
            return
        key = sl.stem + ".log"
        pos = self._position(sl, lo)
        want = self.chunk_bytes
        while pos < sl.log_size:
            data = self.storage.fetch(key, (pos, min(sl.log_size, pos + want) - 1))
            used = 0
            for batch in iter_batches(data, path=key):
                used += len(batch.buf)
                if batch.base_offset >= hi:
                    return
                cut_below = batch.base_offset < lo and lo == sl.first and sl.first > sl.base_offset
                if batch.last_offset >= lo and not cut_below:
                    yield batch
            if not used:  # one batch larger than the chunk: fetch all of it
                if len(data) < 12 or pos + len(data) >= sl.log_size:
                    return
                want = 12 + int.from_bytes(data[8:12], "big")
                continue
            pos += used
            want = self.chunk_bytes

    def close(self) -> None:
        if self._storage is not None:
            self._storage.close()
            self._storage = None
        if self.tail is not None:
            self.tail.close()
