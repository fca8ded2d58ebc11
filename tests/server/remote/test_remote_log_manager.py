"""The RemoteLogManager over a real replica manager, a directory as remote storage and the
broker's own __remote_log_metadata, passes driven one at a time with a ManualClock:
closed segments below the LSO/HW copied byte for byte, local retention only after copies,
a new leader (a new manager replaying the metadata topic) continuing without copying twice,
a cut upload deleted, failures backed off and counted, total retention and topic deletion
deleting remote segments."""

from __future__ import annotations

import asyncio
from itertools import pairwise
from pathlib import Path

import pytest

from tidelog.config.remote_log_config import REMOTE_LOG_METADATA_TOPIC
from tidelog.storage.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from tidelog.storage.remote.storage_manager import (
    LogSegmentData,
    RemoteStorageError,
    RemoteStorageManager,
)
from tidelog.util.topic_partition import TopicPartition

from .harness import TOPIC, Tiered, open_tiered


@pytest.fixture
def tiered(tmp_path: Path) -> Tiered:
    t = open_tiered(tmp_path / "logs", tmp_path / "remote")
    yield t  # type: ignore[misc]
    t.close()


def _tip(t: Tiered, partition: int = 0) -> TopicIdPartition:
    info = t.rm.topic(TOPIC)
    assert info is not None
    return TopicIdPartition(info.topic_id, TOPIC, partition)


def _finished(t: Tiered, partition: int = 0) -> list[RemoteLogSegmentMetadata]:
    cache = t.rlm.rlmm.catch_up_for(_tip(t, partition))
    return sorted(cache.list_remote_log_segments(), key=lambda m: m.start_offset)


def _by_suffix(t: Tiered, suffix: str) -> list[Path]:
    return [p for p in t.remote_files() if p.name.endswith(suffix)]


def test_closed_segments_are_copied_byte_for_byte(tiered: Tiered, tmp_path: Path) -> None:
    t = tiered
    t.produce(20)
    lg = t.log()
    closed = list(lg.segments.values())[:-1]
    local = {s.base_offset: (s.log.path.read_bytes(), s.offset_index.file.read_bytes(),
                             s.time_index.file.read_bytes()) for s in closed}
    t.run()
    segments = _finished(t)
    assert [m.start_offset for m in segments] == sorted(local)
    assert all(m.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED for m in segments)
    assert segments[-1].end_offset == lg.active_segment.base_offset - 1
    assert lg.highest_offset_in_remote_storage == segments[-1].end_offset
    logs = {int(p.name[:20]): p.read_bytes() for p in _by_suffix(t, ".log")}
    indexes = {int(p.name[:20]): p.read_bytes() for p in _by_suffix(t, ".index")}
    times = {int(p.name[:20]): p.read_bytes() for p in _by_suffix(t, ".timeindex")}
    for base, (log_bytes, index_bytes, time_bytes) in local.items():
        assert logs[base] == log_bytes
        assert indexes[base] == index_bytes
        assert times[base] == time_bytes
    snapshots = {int(p.name[:20]) for p in _by_suffix(t, ".snapshot")}
    assert snapshots == set(local)
    epochs = _by_suffix(t, ".leader_epoch_checkpoint")
    assert epochs and epochs[0].read_bytes().startswith(b"0\n1\n0 0\n")
    stats = t.rlm.metrics.all_topics
    assert stats.remote_copy_requests == len(local)
    assert stats.remote_copy_bytes == sum(len(v[0]) for v in local.values())
    assert stats.remote_copy_errors == 0


def test_local_retention_deletes_only_copied_segments(tiered: Tiered) -> None:
    t = tiered
    t.produce(20)
    lg = t.log()
    assert lg.delete_old_segments() == 0  # local.retention.bytes=1 but nothing is copied
    copied_end = None
    t.run()
    copied_end = lg.highest_offset_in_remote_storage
    assert copied_end == lg.active_segment.base_offset - 1
    deleted = lg.delete_old_segments()
    assert deleted > 0
    assert lg.local_log_start_offset == copied_end + 1
    assert lg.log_start_offset == 0  # the remote start
    t.produce(10, start=20)
    before = lg.number_of_segments()
    lg.delete_old_segments()
    assert lg.number_of_segments() == before  # the new closed segments are not copied yet


def test_only_records_below_the_high_watermark_are_copied(tiered: Tiered) -> None:
    t = tiered
    t.produce(20)
    lg = t.log()
    hw = lg.high_watermark
    bases = [s.base_offset for s in lg.segments.values()]
    lg.update_high_watermark(bases[2])  # as if followers lagged behind
    t.run()
    assert [m.start_offset for m in _finished(t)] == bases[:2]
    lg.update_high_watermark(hw)
    t.run()
    assert [m.start_offset for m in _finished(t)] == bases[:-1]


def test_a_new_leader_continues_where_the_old_stopped(tmp_path: Path) -> None:
    t = open_tiered(tmp_path / "logs", tmp_path / "remote")
    try:
        t.produce(20)
        t.run()
        first = _finished(t)
        t.produce(15, start=20)
    finally:
        t.close()
    # the broker restarts: a new manager replays __remote_log_metadata
    again = open_tiered(tmp_path / "logs", tmp_path / "remote", create=False)
    try:
        again.run()
        after = _finished(again)
        assert after[:len(first)] == first
        starts = [m.start_offset for m in after]
        assert len(starts) == len(set(starts))  # no segment copied twice
        for a, b in pairwise(after):
            assert b.start_offset == a.end_offset + 1  # none skipped
        lg = again.log()
        assert after[-1].end_offset == lg.active_segment.base_offset - 1
        assert len(_by_suffix(again, ".log")) == len(after)
    finally:
        again.close()


class FailingStorage:
    """A RemoteStorageManager whose copies fail while ``failing`` (S3 answering 5xx)."""

    def __init__(self, inner: RemoteStorageManager) -> None:
        self.inner = inner
        self.failing = True
        self.copies = 0

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        self.copies += 1
        if self.failing:
            raise RemoteStorageError("503 Service Unavailable")
        return self.inner.copy_log_segment_data(metadata, data)

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        return self.inner.fetch_log_segment(metadata, start_position, end_position)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: object) -> bytes:
        return self.inner.fetch_index(metadata, index_type)  # type: ignore[arg-type]

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        self.inner.delete_log_segment_data(metadata)

    def close(self) -> None:
        self.inner.close()


def test_failed_copies_back_off_count_and_keep_local_data(tmp_path: Path) -> None:
    from tidelog.config.remote_log_config import RemoteLogManagerConfig
    from tidelog.storage.remote.factory import create_remote_storage_manager

    from .harness import broker_props

    props = broker_props(tmp_path / "logs", tmp_path / "remote")
    (tmp_path / "remote").mkdir()
    inner = create_remote_storage_manager(RemoteLogManagerConfig.from_props(props).rsm_configs)
    storage = FailingStorage(inner)
    t = open_tiered(tmp_path / "logs", tmp_path / "remote", rsm=storage)
    try:
        t.produce(20)
        lg = t.log()
        segments = lg.number_of_segments()
        t.run()
        assert storage.copies == 1
        assert t.rlm.metrics.all_topics.remote_copy_errors == 1
        assert t.rlm.metrics.topic(TOPIC).remote_copy_errors == 1
        task = t.rlm.tasks[TopicPartition(TOPIC, 0)]
        assert task.backoff.failures == 1
        t.run()  # backing off: not tried again before the back-off ends
        assert storage.copies == 1
        assert lg.delete_old_segments() == 0 and lg.number_of_segments() == segments
        cache = t.rlm.rlmm.catch_up_for(_tip(t))
        states = [m.state for m in cache.list_all()]
        assert RemoteLogSegmentState.COPY_SEGMENT_FINISHED not in states
        assert t.remote_files() == []  # the failed upload's objects are gone
        t.clock.advance(task.backoff.next_attempt_ms - t.clock.milliseconds())
        t.run()
        assert storage.copies == 2 and task.backoff.failures == 2
        assert task.backoff.next_attempt_ms - t.clock.milliseconds() > 500  # doubled
        storage.failing = False
        t.clock.advance(60_000)
        t.run()
        assert task.backoff.failures == 0
        assert [m.start_offset for m in _finished(t)] == \
            [s.base_offset for s in list(lg.segments.values())[:-1]]
        assert lg.delete_old_segments() > 0
    finally:
        t.close()


def test_an_upload_cut_by_a_crash_never_counts_and_is_deleted(tiered: Tiered) -> None:
    t = tiered
    t.produce(20)
    lg = t.log()
    seg = lg.segments.values()[0]
    nxt = lg.segments.values()[1]
    tip = _tip(t)
    cut = RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate_new(tip), seg.base_offset, nxt.base_offset - 1,
        seg.largest_timestamp, 1, t.clock.milliseconds(), {0: seg.base_offset}, seg.size)
    # the old leader announced the copy and uploaded part of it, then died
    asyncio.run(t.rlm.rlmm.add_remote_log_segment_metadata(cut))
    from tidelog.server.remote_log_segments import EnrichedLogSegment, log_segment_data

    data = log_segment_data(lg, EnrichedLogSegment(seg, nxt.base_offset))
    t.rlm.rsm.copy_log_segment_data(cut, data)
    assert any(cut.remote_log_segment_id.id.bytes and p.name.endswith(".log")
               for p in t.remote_files())
    t.run()
    cache = t.rlm.rlmm.catch_up_for(tip)
    ids = {m.remote_log_segment_id for m in cache.list_all()}
    assert cut.remote_log_segment_id not in ids  # DELETE_SEGMENT_FINISHED: forgotten
    finished = _finished(t)
    assert finished[0].start_offset == seg.base_offset  # copied again, under a new id
    assert cut.remote_log_segment_id not in {m.remote_log_segment_id for m in finished}
    assert len(_by_suffix(t, ".log")) == len(finished)  # the cut upload's objects deleted
    assert t.rlm.rlmm.replay_errors == 0


def test_total_retention_deletes_remote_segments_and_moves_the_log_start(
        tmp_path: Path) -> None:
    t = open_tiered(tmp_path / "logs", tmp_path / "remote",
                    topic_configs={"retention.ms": "3600000", "local.retention.ms": "1000",
                                   "local.retention.bytes": "-2"})
    try:
        t.produce(20)  # record timestamps START_MS + i
        t.run()
        lg = t.log()
        copied = _finished(t)
        assert copied and lg.log_start_offset == 0
        t.clock.advance(3_600_000 + 60_000)  # everything past retention.ms
        t.run()
        assert _finished(t) == []
        assert _by_suffix(t, ".log") == []
        assert lg.log_start_offset == copied[-1].end_offset + 1
        assert t.rlm.metrics.all_topics.remote_delete_requests == len(copied)
        assert t.rlm.metrics.topic_gauge("remote_log_size_bytes", TOPIC) == 0
        assert t.rlm.rlmm.replay_errors == 0
    finally:
        t.close()


def test_retention_bytes_counts_local_and_remote(tmp_path: Path) -> None:
    t = open_tiered(tmp_path / "logs", tmp_path / "remote",
                    topic_configs={"retention.bytes": "2500", "local.retention.bytes": "1"})
    try:
        t.produce(30)
        t.run(2)
        lg = t.log()
        remote = sum(m.segment_size_in_bytes for m in _finished(t))
        from tidelog.server.remote_log_expiration import only_local_size

        # Kafka's rule: the oldest segments go while the total stays at or above the limit
        total = remote + only_local_size(lg)
        assert 0 <= total - 2500 < max(m.segment_size_in_bytes for m in _finished(t))
        assert t.rlm.metrics.all_topics.remote_delete_requests > 0
        assert lg.log_start_offset == _finished(t)[0].start_offset > 0
        assert t.rlm.metrics.topic_gauge("remote_log_size_bytes", TOPIC) == remote
    finally:
        t.close()


def test_deleting_a_tiered_topic_deletes_its_remote_segments(tiered: Tiered) -> None:
    t = tiered
    t.produce(20)
    t.run()
    tip = _tip(t)
    assert _by_suffix(t, ".log")
    t.rm.delete_topic(TOPIC)
    t.run()
    assert t.remote_files() == []
    cache = t.rlm.rlmm.catch_up_for(tip)
    assert list(cache.list_all()) == []
    assert t.rm.topic(REMOTE_LOG_METADATA_TOPIC) is not None


def test_the_copy_quota_spreads_copies_over_passes(tmp_path: Path) -> None:
    t = open_tiered(tmp_path / "logs", tmp_path / "remote",
                    **{"remote.log.manager.copy.max.bytes.per.second": "100"})
    try:
        t.produce(20)
        closed = t.log().number_of_segments() - 1
        t.run()
        assert len(_finished(t)) == 1  # one segment's bytes use up the second's quota
        assert t.rlm.quota.throttle_ms() > 0
        t.clock.advance(1000)
        t.run()
        assert len(_finished(t)) == 2
        for _ in range(closed):
            t.clock.advance(1000)
            t.run()
        assert len(_finished(t)) == closed
    finally:
        t.close()


def test_the_fetch_quota_counts_remote_reads(tiered: Tiered) -> None:
    from tidelog.server.remote_log_manager import ByteRateQuota

    quota = ByteRateQuota(500, tiered.clock)
    quota.record(400)
    assert quota.throttle_ms() == 0
    quota.record(200)
    assert quota.throttle_ms() == 1000
    tiered.clock.advance(600)
    assert quota.throttle_ms() == 400
    tiered.clock.advance(400)
    assert quota.throttle_ms() == 0


def test_a_deleted_topics_remote_segments_go_once_storage_is_back(tmp_path: Path) -> None:
    from tidelog.config.remote_log_config import RemoteLogManagerConfig
    from tidelog.storage.remote.factory import create_remote_storage_manager

    from .harness import broker_props

    (tmp_path / "remote").mkdir()
    props = broker_props(tmp_path / "logs", tmp_path / "remote")
    inner = create_remote_storage_manager(RemoteLogManagerConfig.from_props(props).rsm_configs)
    storage = FailingStorage(inner)
    storage.failing = False
    t = open_tiered(tmp_path / "logs", tmp_path / "remote", rsm=storage)
    try:
        t.produce(20)
        t.run()
        assert _by_suffix(t, ".log")
        original = storage.delete_log_segment_data

        def refuse(metadata: RemoteLogSegmentMetadata) -> None:
            raise RemoteStorageError("503 Service Unavailable")

        storage.delete_log_segment_data = refuse  # type: ignore[method-assign]
        t.rm.delete_topic(TOPIC)
        t.run()
        assert _by_suffix(t, ".log") and len(t.rlm.deleting) == 1  # kept to retry
        storage.delete_log_segment_data = original  # type: ignore[method-assign]
        t.clock.advance(60_000)
        t.run()
        assert t.remote_files() == [] and t.rlm.deleting == {}
        assert t.rlm.rlmm.replay_errors == 0  # every event a valid transition
    finally:
        t.close()
