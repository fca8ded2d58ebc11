"""OffsetCommit/Fetch/Delete, group deletion, persistence in __consumer_offsets, loading and
expiry, all on a ManualClock with the in-memory store."""

from __future__ import annotations

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.coordinator import CommitEntry
from tidelog.server.coordinator.group.group import GroupState
from tidelog.server.coordinator.group.records import (
    GroupMetadataKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    partition_for,
)
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.util.topic_partition import TopicPartition

from .harness import SESSION, Harness, subscription

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
U0 = TopicPartition("u", 0)


def _records(store: InMemoryOffsetsStore, partition: int) -> list[tuple[object, bytes | None]]:
    out = []
    for data in store.partitions.get(partition, []):
        from tidelog.records import iter_batches

        for batch in iter_batches(data):
            for r in batch.iter_records():
                assert r.key is not None
                out.append((decode_key(r.key), r.value))
    return out


def test_standalone_commit_and_fetch() -> None:
    h = Harness()
    res = h.coord.commit_offsets("solo", {T0: CommitEntry(10, 3, "meta"), T1: CommitEntry(20)})
    assert res == {T0: ErrorCode.NONE, T1: ErrorCode.NONE}
    err, got = h.coord.fetch_offsets("solo", [T0, T1, U0])
    assert err == ErrorCode.NONE
    assert (got[T0].offset, got[T0].leader_epoch, got[T0].metadata) == (10, 3, "meta")
    assert got[T1].offset == 20 and got[U0].offset == -1
    assert set(h.coord.fetch_offsets("solo", None)[1]) == {T0, T1}
    assert h.coord.groups["solo"].state == GroupState.EMPTY
    # the commit is a record in the group's partition, Kafka's schema
    recs = _records(h.store, partition_for("solo", 5))
    keys = [k for k, _ in recs]
    assert OffsetKey("solo", "t", 0) in keys and OffsetKey("solo", "t", 1) in keys
    value = dict(recs)[OffsetKey("solo", "t", 0)]
    assert value is not None and decode_offset_value(value).offset == 10


def test_fetch_unknown_group_returns_invalid_offsets() -> None:
    h = Harness()
    err, got = h.coord.fetch_offsets("nobody", [T0])
    assert err == ErrorCode.NONE and got[T0].offset == -1
    assert h.coord.fetch_offsets("nobody", None) == (ErrorCode.NONE, {})


def test_member_commit_validation() -> None:
    h = Harness()
    m1, _m2 = h.stable_group(2)
    ok = h.coord.commit_offsets("g", {T0: CommitEntry(5)}, member_id=m1, generation_id=1)
    assert ok == {T0: ErrorCode.NONE}
    assert h.coord.commit_offsets("g", {T0: CommitEntry(6)}, member_id=m1, generation_id=9) == {
        T0: ErrorCode.ILLEGAL_GENERATION
    }
    assert h.coord.commit_offsets("g", {T0: CommitEntry(6)}, member_id="x", generation_id=1) == {
        T0: ErrorCode.UNKNOWN_MEMBER_ID
    }
    # a non-member (generation -1) may not commit to an active group
    assert h.coord.commit_offsets("g", {T0: CommitEntry(6)}) == {T0: ErrorCode.UNKNOWN_MEMBER_ID}
    assert h.coord.commit_offsets("nope", {T0: CommitEntry(6)}, member_id="m", generation_id=1,
                                  api_version=8) == {
        T0: ErrorCode.ILLEGAL_GENERATION
    }
    assert h.coord.fetch_offsets("g", [T0])[1][T0].offset == 5


def test_commit_during_rebalance() -> None:
    h = Harness()
    m1, m2 = h.stable_group(2)
    h.join("g")  # a new member: PreparingRebalance, generation still 1
    # Kafka lets members of the current generation commit while it prepares a rebalance
    assert h.coord.commit_offsets("g", {T0: CommitEntry(7)}, member_id=m1, generation_id=1) == {
        T0: ErrorCode.NONE
    }
    h.join("g", m1)
    h.join("g", m2)
    g = h.coord.groups["g"]
    assert g.state == GroupState.COMPLETING_REBALANCE
    assert h.coord.commit_offsets("g", {T0: CommitEntry(8)}, member_id=m1, generation_id=2) == {
        T0: ErrorCode.REBALANCE_IN_PROGRESS
    }


def test_commit_counts_as_heartbeat() -> None:
    h = Harness()
    [m1] = h.stable_group(1)
    for _ in range(3):
        h.clock.advance(SESSION - 1)
        h.coord.commit_offsets("g", {T0: CommitEntry(1)}, member_id=m1, generation_id=1)
    assert m1 in h.coord.groups["g"].members


def test_metadata_too_large() -> None:
    h = Harness(offset_metadata_max_bytes=4)
    res = h.coord.commit_offsets(
        "s", {T0: CommitEntry(1, -1, "12345"), T1: CommitEntry(2, -1, "1234")}
    )
    assert res == {T0: ErrorCode.OFFSET_METADATA_TOO_LARGE, T1: ErrorCode.NONE}


def test_group_metadata_is_persisted_on_sync_and_reloaded() -> None:
    store = InMemoryOffsetsStore()
    h = Harness(store)
    m1, m2 = h.stable_group(2)
    h.coord.commit_offsets("g", {T0: CommitEntry(42, 1, "x")}, member_id=m1, generation_id=1)
    recs = _records(store, partition_for("g", 5))
    groups = [v for k, v in recs if isinstance(k, GroupMetadataKey)]
    assert groups and groups[-1] is not None
    value = decode_group_value(groups[-1])
    assert value.generation == 1 and value.protocol == "range" and value.protocol_type == "consumer"
    assert {m.member_id: m.assignment for m in value.members} == {
        m1: f"a-{m1}".encode(),
        m2: f"a-{m2}".encode(),
    }
    # a new coordinator over the same log (a broker restart)
    h.coord.shutdown()
    h2 = Harness(store)
    g = h2.coord.groups["g"]
    assert g.state == GroupState.STABLE and g.generation_id == 1 and set(g.members) == {m1, m2}
    assert h2.coord.fetch_offsets("g", [T0])[1][T0].offset == 42
    assert h2.coord.heartbeat("g", m1, 1) == ErrorCode.NONE
    # members that do not come back expire after their session timeout
    h2.clock.advance(SESSION)
    assert not g.members and g.state == GroupState.EMPTY
    assert h2.coord.fetch_offsets("g", [T0])[1][T0].offset == 42


def test_loading_returns_load_in_progress() -> None:
    h = Harness()
    h.coord.commit_offsets("s", {T0: CommitEntry(1)})
    p = h.coord.manager.partition_for("s")
    h.coord.manager.mark_loading([p])
    assert h.coord.fetch_offsets("s", [T0])[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coord.commit_offsets("s", {T0: CommitEntry(2)}) == {
        T0: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    }
    h.coord.load_partition(p)
    assert h.coord.fetch_offsets("s", [T0])[1][T0].offset == 1


def test_delete_offsets_respects_subscriptions() -> None:
    h = Harness()
    boxes = [h.join("g", protocols=[("range", subscription("t"))])]
    h.finish_delay(boxes)
    mid = boxes[0].one.member_id  # type: ignore[union-attr]
    h.sync_all("g", [mid])
    h.coord.commit_offsets(
        "g", {T0: CommitEntry(1), U0: CommitEntry(2)}, member_id=mid, generation_id=1
    )
    err, per = h.coord.delete_offsets("g", [T0, U0])
    assert err == ErrorCode.NONE
    assert per == {T0: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, U0: ErrorCode.NONE}
    assert h.coord.fetch_offsets("g", [U0])[1][U0].offset == -1
    assert h.coord.delete_offsets("zzz", [T0])[0] == ErrorCode.GROUP_ID_NOT_FOUND
    # the deletion is a tombstone in the log
    recs = _records(h.store, partition_for("g", 5))
    assert (OffsetKey("g", "u", 0), None) in recs


def test_delete_groups() -> None:
    h = Harness()
    h.stable_group(1, "busy")
    h.coord.commit_offsets("idle", {T0: CommitEntry(1)})
    res = h.coord.delete_groups(["busy", "idle", "missing"])
    assert res == {
        "busy": ErrorCode.NON_EMPTY_GROUP,
        "idle": ErrorCode.NONE,
        "missing": ErrorCode.GROUP_ID_NOT_FOUND,
    }
    assert "idle" not in h.coord.groups
    assert h.coord.fetch_offsets("idle", [T0])[1][T0].offset == -1
    # after a restart the group stays deleted (tombstones win)
    h2 = Harness(h.store)
    assert "idle" not in h2.coord.groups and "busy" in h2.coord.groups


def test_list_and_describe() -> None:
    h = Harness()
    h.stable_group(2, "a")
    h.coord.commit_offsets("b", {T0: CommitEntry(1)})
    err, groups = h.coord.list_groups()
    assert err == ErrorCode.NONE
    assert [(g.group_id, g.state, g.protocol_type) for g in groups] == [
        ("a", "Stable", "consumer"),
        ("b", "Empty", ""),
    ]
    assert [g.group_id for g in h.coord.list_groups(states=["empty"])[1]] == ["b"]
    assert h.coord.list_groups(types=["consumer"])[1] == []
    d = h.coord.describe_group("a")
    assert d.state == "Stable" and d.protocol == "range" and len(d.members) == 2
    assert all(m.assignment.startswith(b"a-") and m.metadata for m in d.members)
    assert h.coord.describe_group("zzz").state == "Dead"


def test_offsets_of_empty_group_expire_after_retention() -> None:
    h = Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
    [m1] = h.stable_group(1)
    h.coord.commit_offsets("g", {T0: CommitEntry(3)}, member_id=m1, generation_id=1)
    h.coord.leave_group("g", [(m1, None)])
    g = h.coord.groups["g"]
    assert g.state == GroupState.EMPTY
    h.clock.advance(59_000)
    assert h.coord.fetch_offsets("g", [T0])[1][T0].offset == 3
    h.clock.advance(1_000)
    assert h.coord.fetch_offsets("g", [T0])[1][T0].offset == -1
    assert "g" not in h.coord.groups  # empty, no offsets: the group is gone
    recs = _records(h.store, partition_for("g", 5))
    assert (OffsetKey("g", "t", 0), None) in recs and (GroupMetadataKey("g"), None) in recs


def test_stable_group_keeps_offsets_of_subscribed_topics() -> None:
    h = Harness(offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000)
    [m1] = h.stable_group(1)  # subscribes to "t"
    h.coord.commit_offsets(
        "g", {T0: CommitEntry(3), U0: CommitEntry(4)}, member_id=m1, generation_id=1
    )
    for _ in range(7):
        h.clock.advance(SESSION - 1)
        h.coord.heartbeat("g", m1, 1)
    got = h.coord.fetch_offsets("g", [T0, U0])[1]
    assert got[T0].offset == 3 and got[U0].offset == -1


def test_retention_time_from_old_commit_versions() -> None:
    h = Harness(offsets_retention_check_interval_ms=1000)
    h.coord.commit_offsets("s", {T0: CommitEntry(1)}, retention_time_ms=5000)
    h.clock.advance(4000)
    assert h.coord.fetch_offsets("s", [T0])[1][T0].offset == 1
    h.clock.advance(1000)
    assert h.coord.fetch_offsets("s", [T0])[1][T0].offset == -1


def test_failed_append_is_reported_and_not_cached() -> None:
    h = Harness()
    h.store.fail_appends = True
    assert h.coord.commit_offsets("s", {T0: CommitEntry(1)}) == {
        T0: ErrorCode.COORDINATOR_NOT_AVAILABLE
    }
    h.store.fail_appends = False
    assert h.coord.fetch_offsets("s", [T0])[1][T0].offset == -1


def test_unreadable_records_are_skipped_at_load() -> None:
    from tidelog.records import build_batch
    from tidelog.server.coordinator.group.records import encode_offset_key

    h = Harness()
    h.coord.commit_offsets("s", {T0: CommitEntry(7)})
    p = partition_for("s", 5)
    # a foreign key version, a truncated offset value and an undecodable group name
    h.store.append(
        p,
        build_batch(
            [
                (1, b"\x00\x09junk", b"x"),
                (1, encode_offset_key("s", "t", 1), b"\x00\x03\x00"),
                (1, b"\x00\x02\x00\x02\xff\xfe", b"\x00\x03"),
            ]
        ),
    )
    h2 = Harness(h.store)
    assert h2.coord.fetch_offsets("s", [T0, T1])[1][T0].offset == 7
    assert h2.coord.fetch_offsets("s", [T1])[1][T1].offset == -1


def test_deleted_topics_lose_their_offsets() -> None:
    h = Harness()
    h.coord.commit_offsets("a", {T0: CommitEntry(1), U0: CommitEntry(2)})
    h.coord.commit_offsets("b", {T1: CommitEntry(3)})
    assert h.coord.on_topics_deleted(["t"]) == 2
    assert h.coord.fetch_offsets("a", [T0, U0])[1][U0].offset == 2
    assert h.coord.fetch_offsets("a", [T0])[1][T0].offset == -1
    h2 = Harness(h.store)  # the tombstones are durable
    assert h2.coord.fetch_offsets("b", [T1])[1][T1].offset == -1
    assert h2.coord.fetch_offsets("a", [U0])[1][U0].offset == 2
