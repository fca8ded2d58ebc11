"""RemoteLogMetadataCache: Kafka's transitions and lookups; a state machine against a model."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tidelog.storage.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataSnapshot,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    TopicIdPartition,
)
from tidelog.storage.remote.metadata_cache import (
    InvalidRemoteLogStateError,
    RemoteLogMetadataCache,
)
from tidelog.storage.remote.metadata_serde import deserialize, serialize
from tidelog.storage.remote.storage_manager import RemoteResourceNotFoundError

S = RemoteLogSegmentState
TIP = TopicIdPartition(uuid.UUID(int=1), "orders", 0)


def segment(start: int, end: int, epochs: dict[int, int], event_ms: int = 0
            ) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(TIP), start, end, end, 1,
                                    event_ms, epochs, 100)


def update(m: RemoteLogSegmentMetadata, state: RemoteLogSegmentState
           ) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(m.remote_log_segment_id, 1, None, state, 1)


def test_copy_started_is_never_readable() -> None:
    cache = RemoteLogMetadataCache(TIP)
    m = segment(0, 99, {0: 0})
    cache.apply(m)
    assert cache.remote_log_segment_metadata(0, 10) is None
    assert list(cache.list_remote_log_segments()) == []
    assert cache.highest_offset_for_epoch(0) is None
    assert list(cache.list_all()) == [m]
    cache.apply(update(m, S.COPY_SEGMENT_FINISHED))
    found = cache.remote_log_segment_metadata(0, 10)
    assert found is not None and found.state is S.COPY_SEGMENT_FINISHED
    assert cache.highest_offset_for_epoch(0) == 99


def test_lookup_respects_epoch_ranges_inside_a_segment() -> None:
    cache = RemoteLogMetadataCache(TIP)
    a, b = segment(0, 99, {0: 0, 1: 50}), segment(100, 199, {1: 100, 3: 150})
    for m in (a, b):
        cache.apply(m)
        cache.apply(update(m, S.COPY_SEGMENT_FINISHED))
    assert cache.remote_log_segment_metadata(0, 49).remote_log_segment_id == a.remote_log_segment_id  # type: ignore[union-attr]
    assert cache.remote_log_segment_metadata(0, 50) is None  # offset 50 is epoch 1's
    assert cache.remote_log_segment_metadata(1, 120).remote_log_segment_id == b.remote_log_segment_id  # type: ignore[union-attr]
    assert cache.remote_log_segment_metadata(1, 150) is None
    assert cache.remote_log_segment_metadata(3, 200) is None
    assert cache.remote_log_segment_metadata(2, 120) is None
    assert cache.highest_offset_for_epoch(0) == 49
    assert cache.highest_offset_for_epoch(1) == 149
    assert cache.highest_offset_for_epoch(3) == 199
    assert [m.start_offset for m in cache.list_remote_log_segments(1)] == [0, 100]
    assert [m.start_offset for m in cache.list_remote_log_segments(3)] == [100]


def test_delete_started_unreadable_but_listed_then_gone() -> None:
    cache = RemoteLogMetadataCache(TIP)
    m = segment(0, 99, {0: 0})
    cache.apply(m)
    cache.apply(update(m, S.COPY_SEGMENT_FINISHED))
    cache.apply(update(m, S.DELETE_SEGMENT_STARTED))
    assert cache.remote_log_segment_metadata(0, 0) is None
    assert [x.state for x in cache.list_all()] == [S.DELETE_SEGMENT_STARTED]
    assert cache.highest_offset_for_epoch(0) == 99  # not lowered by deletes, as Kafka
    cache.apply(update(m, S.DELETE_SEGMENT_FINISHED))
    assert list(cache.list_all()) == [] and cache.segment(m.remote_log_segment_id) is None


def test_segments_with_a_txn_index_after_an_offset() -> None:
    """KIP-1058's txnIndexEmpty: only finished copies that index an aborted transaction,
    after the offset, by start offset (where a read_committed remote read searches on)."""
    cache = RemoteLogMetadataCache(TIP)
    for start, txn, state in ((0, True, S.COPY_SEGMENT_FINISHED),
                              (100, False, S.COPY_SEGMENT_FINISHED),
                              (200, True, S.COPY_SEGMENT_STARTED),
                              (300, True, S.DELETE_SEGMENT_STARTED),
                              (500, True, S.COPY_SEGMENT_FINISHED),
                              (400, True, S.COPY_SEGMENT_FINISHED)):
        m = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(TIP), start, start + 99,
                                     start, 1, 0, {0: start}, 100, txn_index_empty=not txn)
        cache.apply(m)
        for step in (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED):
            if step <= state:
                cache.apply(update(m, step))
    assert [m.start_offset for m in cache.with_txn_index_after(-1)] == [0, 400, 500]
    assert [m.start_offset for m in cache.with_txn_index_after(0)] == [400, 500]
    assert cache.with_txn_index_after(500) == []


@pytest.mark.parametrize(("path", "refused"), [
    ((S.COPY_SEGMENT_FINISHED,), S.COPY_SEGMENT_STARTED),
    ((), S.DELETE_SEGMENT_FINISHED),
    ((S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED), S.COPY_SEGMENT_FINISHED),
])
def test_refused_transitions(path: tuple[RemoteLogSegmentState, ...],
                             refused: RemoteLogSegmentState) -> None:
    cache = RemoteLogMetadataCache(TIP)
    m = segment(0, 9, {0: 0})
    cache.apply(m)
    for state in path:
        cache.apply(update(m, state))
    with pytest.raises(InvalidRemoteLogStateError):
        if refused is S.COPY_SEGMENT_STARTED:
            cache.apply(m)
        else:
            cache.apply(update(m, refused))


def test_update_of_unknown_segment_and_other_partition() -> None:
    cache = RemoteLogMetadataCache(TIP)
    with pytest.raises(RemoteResourceNotFoundError):
        cache.apply(update(segment(0, 9, {0: 0}), S.COPY_SEGMENT_FINISHED))
    other = TopicIdPartition(uuid.UUID(int=2), "orders", 0)
    with pytest.raises(InvalidRemoteLogStateError):
        cache.apply(RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(other), 0, 9, 0,
                                             1, 0, {0: 0}, 1))


def test_partition_delete_forgets_everything() -> None:
    cache = RemoteLogMetadataCache(TIP)
    m = segment(0, 9, {0: 0})
    cache.apply(m)
    with pytest.raises(InvalidRemoteLogStateError):
        cache.apply(RemotePartitionDeleteMetadata(
            TIP, RemotePartitionDeleteState.DELETE_PARTITION_STARTED, 0, 1))
    for state in RemotePartitionDeleteState:
        cache.apply(RemotePartitionDeleteMetadata(TIP, state, 0, 1))
    assert cache.partition_delete_state is RemotePartitionDeleteState.DELETE_PARTITION_FINISHED
    assert list(cache.list_all()) == []


def test_a_newer_copy_of_the_same_offsets_supersedes_the_older() -> None:
    """Kafka's duplicate rule: a new leader's upload of a superset of the offsets makes
    lookups find the new copy (the old one is still listed, for retention to delete)."""
    cache = RemoteLogMetadataCache(TIP)
    old, new = segment(0, 99, {0: 0}), segment(0, 199, {0: 0})
    for m in (old, new):
        cache.apply(m)
        cache.apply(update(m, S.COPY_SEGMENT_FINISHED))
    assert cache.remote_log_segment_metadata(0, 50) == cache.segment(new.remote_log_segment_id)
    assert [m.remote_log_segment_id for m in cache.list_remote_log_segments()] == \
        [old.remote_log_segment_id, new.remote_log_segment_id]
    assert {m.remote_log_segment_id for m in cache.list_all(0)} == \
        {old.remote_log_segment_id, new.remote_log_segment_id}
    assert cache.highest_offset_for_epoch(0) == 199


def test_snapshot_entries_restore_the_state() -> None:
    cache = RemoteLogMetadataCache(TIP)
    a, b = segment(0, 9, {0: 0}), segment(10, 19, {0: 10})
    cache.apply(a)
    cache.apply(update(a, S.COPY_SEGMENT_FINISHED))
    cache.apply(b)
    restored = RemoteLogMetadataCache(TIP)
    for m in cache.list_all():
        restored.apply(deserialize(serialize(RemoteLogSegmentMetadataSnapshot.create(m))))
    assert [(m.remote_log_segment_id, m.state) for m in restored.list_all()] == \
        [(m.remote_log_segment_id, m.state) for m in cache.list_all()]
    assert restored.highest_offset_for_epoch(0) == 9


class CacheAgainstModel(RuleBasedStateMachine):
    """Random copies, finishes and deletes (valid and refused) of segments over a few epochs,
    replayed through the serde into a second cache; checked against a plain model: each
    segment's state, readable = COPY_SEGMENT_FINISHED, lookups by (epoch, offset)."""

    def __init__(self) -> None:
        super().__init__()
        self.cache = RemoteLogMetadataCache(TIP)
        self.records: list[bytes] = []
        self.model: dict[RemoteLogSegmentId, tuple[RemoteLogSegmentMetadata, S]] = {}
        self.next_start = 0
        self.epoch = 0
        self.created: list[RemoteLogSegmentMetadata] = []
        self.overlapped: set[RemoteLogSegmentId] = set()  # shared offsets with another copy

    def _apply(self, record: object) -> None:
        self.cache.apply(record)  # type: ignore[arg-type]
        self.records.append(serialize(record))  # type: ignore[arg-type]

    @rule(length=st.integers(1, 20), new_epoch=st.booleans(), overlap=st.booleans())
    def copy_started(self, length: int, new_epoch: bool, overlap: bool) -> None:
        # a retried copy after a crash starts again at the same offset with a new id
        start = max(0, self.next_start - length) if overlap else self.next_start
        epochs = {self.epoch: start}
        if new_epoch and length > 1:
            self.epoch += 1
            epochs[self.epoch] = start + length // 2
        m = segment(start, start + length - 1, epochs)
        for other in self.created:
            if other.start_offset <= m.end_offset and m.start_offset <= other.end_offset:
                self.overlapped |= {other.remote_log_segment_id, m.remote_log_segment_id}
        self.created.append(m)
        self._apply(m)
        self.model[m.remote_log_segment_id] = (m, S.COPY_SEGMENT_STARTED)
        self.next_start = max(self.next_start, start + length)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), to=st.sampled_from(list(S)[1:]))
    def transition(self, data: st.DataObject, to: RemoteLogSegmentState) -> None:
        sid = list(self.model)[data.draw(st.integers(0, len(self.model) - 1))]
        m, state = self.model[sid]
        if not S.is_valid_transition(state, to):
            with pytest.raises(InvalidRemoteLogStateError):
                self.cache.apply(update(m, to))
            return
        self._apply(update(m, to))
        if to is S.DELETE_SEGMENT_FINISHED:
            del self.model[sid]
        else:
            self.model[sid] = (m, to)

    @invariant()
    def states_match(self) -> None:
        listed = {m.remote_log_segment_id: m.state for m in self.cache.list_all()}
        assert listed == {sid: state for sid, (_, state) in self.model.items()}
        readable = [m.remote_log_segment_id for m in self.cache.list_remote_log_segments()]
        finished = {sid for sid, (_, s) in self.model.items() if s is S.COPY_SEGMENT_FINISHED}
        assert set(readable) == finished
        for epoch in range(self.epoch + 1):
            assert {m.remote_log_segment_id for m in self.cache.list_remote_log_segments(epoch)} \
                == {sid for sid in finished if epoch in self.model[sid][0].segment_leader_epochs}
        starts = [m.start_offset for m in self.cache.list_remote_log_segments()]
        assert starts == sorted(starts)

    @invariant()
    def lookups_find_finished_segments(self) -> None:
        for m, state in self.model.values():
            sid = m.remote_log_segment_id
            for epoch, first in m.segment_leader_epochs.items():
                found = self.cache.remote_log_segment_metadata(epoch, first)
                if found is not None:
                    assert found.state is S.COPY_SEGMENT_FINISHED
                    assert found.start_offset <= first <= found.end_offset
                if state is S.COPY_SEGMENT_FINISHED and sid not in self.overlapped:
                    assert found is not None and found.remote_log_segment_id == sid
                elif state is not S.COPY_SEGMENT_FINISHED:
                    assert found is None or found.remote_log_segment_id != sid

    def teardown(self) -> None:
        replayed = RemoteLogMetadataCache(TIP)
        for raw in self.records:
            replayed.apply(deserialize(raw))
        assert list(replayed.list_all()) == list(self.cache.list_all())


TestCacheAgainstModel = CacheAgainstModel.TestCase
TestCacheAgainstModel.settings = settings(max_examples=50, stateful_step_count=30,
                                          deadline=None)
