"""The share groups' SimpleAssignor (share/assignor.py), as properties over member and
partition counts: every partition consumed, one member a partition while members do not
outnumber partitions (shares within one of each other), each member one partition when they
do; a join moves partitions only to the new member; subscriptions are respected."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from tidelog.server.coordinator.group.consumer.records import TopicMetadata
from tidelog.server.coordinator.group.share.assignor import assign

T = TopicMetadata(uuid.UUID(int=1), "t", 1)


def owners(a: dict[str, dict[uuid.UUID, frozenset[int]]]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for m, parts in a.items():
        for p in parts.get(T.topic_id, frozenset()):
            out.setdefault(p, []).append(m)
    return out


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12))
def test_spread_then_shared(members: int, partitions: int) -> None:
    topics = {"t": TopicMetadata(T.topic_id, "t", partitions)}
    subs = {f"m{i:02}": ("t",) for i in range(members)}
    a = assign(subs, topics, {})
    sizes = [sum(map(len, x.values())) for x in a.values()]
    by_partition = owners(a)
    assert sorted(by_partition) == list(range(partitions))  # every partition consumed
    if members <= partitions:
        assert all(len(ms) == 1 for ms in by_partition.values())
        assert max(sizes) - min(sizes) <= 1
    else:
        assert sizes == [1] * members
        counts = [len(ms) for ms in by_partition.values()]
        assert max(counts) - min(counts) <= 1


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 10), st.integers(1, 16))
def test_a_join_moves_partitions_only_to_the_new_member(members: int, partitions: int) -> None:
    topics = {"t": TopicMetadata(T.topic_id, "t", partitions)}
    subs = {f"m{i:02}": ("t",) for i in range(members)}
    before = assign(subs, topics, {})
    after = assign({**subs, "new": ("t",)}, topics, before)
    if members + 1 <= partitions:
        for m in subs:  # the old members keep a subset of what they had
            assert after[m].get(T.topic_id, frozenset()) <= before[m].get(T.topic_id,
                                                                          frozenset())
    back = assign(subs, topics, after)  # and a leave spreads the new member's share again
    assert sorted(owners(back)) == list(range(partitions))


def test_members_get_only_the_topics_they_subscribe_to() -> None:
    u = TopicMetadata(uuid.UUID(int=2), "u", 2)
    topics = {"t": TopicMetadata(T.topic_id, "t", 4), "u": u}
    a = assign({"a": ("t",), "b": ("t", "u"), "c": ("u",)}, topics, {})
    assert set(a["a"]) == {T.topic_id} and set(a["c"]) == {u.topic_id}
    every = [(t, p) for x in a.values() for t, ps in x.items() for p in ps]
    assert sorted(every, key=str) == sorted({(t.topic_id, p) for t in topics.values()
                                             for p in range(t.num_partitions)}, key=str)
    sizes = sorted(len(every_m) for every_m in
                   ([(t, p) for t, ps in x.items() for p in ps] for x in a.values()))
    assert sizes == [2, 2, 2]  # six partitions, balanced over three members
