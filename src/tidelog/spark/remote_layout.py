"""The segments of a tiered-storage bucket, and which of them a read uses (pure Python).

Objects are laid out as tidelog's (and Aiven's) RemoteStorageManager writes them:
``<key prefix><topic>-<topic id>/<partition>/<20-digit base offset>-<segment id>.<suffix>``,
each suffix the local file of that name, byte for byte. A segment can be there more than
once: copied again under a new segment id by a new leader (Kafka's RemoteLogSegmentId is
per copy), cut by a crash (some files, no ``.log``: the ``.log`` is uploaded last), or
partial. A read must return each offset once, so one copy is chosen per offset:

* with ``__remote_log_metadata`` (option ``remoteLogMetadata``): only segments whose
  latest state is COPY_SEGMENT_FINISHED, with the end offsets it records;
* without: every segment with a ``.log`` (its end offset read from its last batch).

Then, in both cases, segments are taken in order of base offset; at the same base offset
a complete file set (``.log``, ``.index``, ``.timeindex``, ``.snapshot``,
``.leader_epoch_checkpoint``) before an incomplete one, then the one reaching the higher end
offset, then the smaller segment id; each segment contributes only the offsets above those
already covered (:func:`choose_slices`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from tidelog.util.topic_partition import TopicPartition

from .options import OptionError

_KEY = re.compile(
    r"^(?P<topic>.+)-(?P<topic_id>[A-Za-z0-9_-]{22})/(?P<partition>\d+)/"
    r"(?P<base>\d{20})-(?P<segment_id>[A-Za-z0-9_-]{22})"
    r"\.(?P<suffix>log|index|timeindex|snapshot|txnindex|leader_epoch_checkpoint)$")
COMPLETE_SET = frozenset({"log", "index", "timeindex", "snapshot", "leader_epoch_checkpoint"})


@dataclass(frozen=True)
class SegmentObjects:
    """The objects of one copy of one segment."""

    topic_partition: TopicPartition
    topic_id: str
    base_offset: int
    segment_id: str
    stem: str  # the key without ``.<suffix>``
    suffixes: frozenset[str]
    log_size: int  # bytes of the ``.log`` (0 when there is none)

    @property
    def complete(self) -> bool:
        return self.suffixes >= COMPLETE_SET


@dataclass(frozen=True)
class SegmentSlice:
    """Offsets ``first``..``last`` (inclusive) of the partition, read from one segment copy."""

    stem: str
    base_offset: int
    first: int
    last: int
    log_size: int
    has_txn_index: bool
    has_snapshot: bool
    has_offset_index: bool


@dataclass(frozen=True)
class PartitionPlan:
    """The slices of one partition, in offset order (empty: nothing in the bucket)."""

    slices: tuple[SegmentSlice, ...] = ()
    stable_end: int | None = None  # read_committed: the remote part's last stable offset

    @property
    def start(self) -> int | None:
        return self.slices[0].first if self.slices else None

    @property
    def end(self) -> int | None:
        """One past the last remote offset, or None."""
        return self.slices[-1].last + 1 if self.slices else None


def group_objects(listing: Iterable[tuple[str, int]], prefix: str) -> dict[TopicPartition, list[SegmentObjects]]:
    """The segment copies found under ``prefix``, per partition (other keys are ignored).
    A topic found under two topic ids (deleted and created again) is an error."""
    found: dict[tuple[TopicPartition, str, int, str], tuple[str, dict[str, int]]] = {}
    for key, size in listing:
        m = _KEY.match(key[len(prefix):]) if key.startswith(prefix) else None
        if m is None:
            continue
        tp = TopicPartition(m["topic"], int(m["partition"]))
        stem = key[: -len(m["suffix"]) - 1]
        found.setdefault((tp, m["topic_id"], int(m["base"]), m["segment_id"]), (stem, {}))[1][m["suffix"]] = size
    ids: dict[str, set[str]] = {}
    out: dict[TopicPartition, list[SegmentObjects]] = {}
    for (tp, topic_id, base, segment_id), (stem, files) in sorted(found.items()):
        ids.setdefault(tp.topic, set()).add(topic_id)
        out.setdefault(tp, []).append(SegmentObjects(
            tp, topic_id, base, segment_id, stem, frozenset(files), files.get("log", 0)))
    twice = {t: sorted(i) for t, i in ids.items() if len(i) > 1}
    if twice:
        raise OptionError("topic(s) stored under more than one topic id (deleted and created "
                          "again?): " + "; ".join(f"{t}: {', '.join(i)}" for t, i in sorted(twice.items()))
                          + "; point path at a prefix holding one of them")
    return out


def choose_slices(segments: Iterable[tuple[SegmentObjects, int]]) -> tuple[SegmentSlice, ...]:
    """Each offset once, from (segment, last offset) pairs, by the rule of the module
    docstring. Offsets no segment holds are gaps (the read goes on above them)."""
    order = sorted(segments, key=lambda s: (s[0].base_offset, not s[0].complete, -s[1], s[0].segment_id))
    out: list[SegmentSlice] = []
    cursor = -1
    for seg, last in order:
        if last < seg.base_offset or last < cursor:
            continue
        first = max(seg.base_offset, cursor)
        out.append(SegmentSlice(seg.stem, seg.base_offset, first, last, seg.log_size,
                                "txnindex" in seg.suffixes, "snapshot" in seg.suffixes,
                                "index" in seg.suffixes))
        cursor = last + 1
    return tuple(out)
