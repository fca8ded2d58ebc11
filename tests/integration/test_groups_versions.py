"""Every advertised version of every group API, over the wire with kio-encoded requests:
a full join/sync/heartbeat/commit/fetch/leave cycle per JoinGroup version, and each admin
API at each version."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import pytest
from test_groups_support import create_topic

from tidelog.client.kafka_client import KafkaClient
from tidelog.testing.embedded import EmbeddedBroker

SUB = struct.pack(">hih1si", 0, 1, 1, b"t", -1)


@pytest.fixture(scope="module")
def conn() -> Iterator[Any]:
    with (
        EmbeddedBroker(
            {
                "group.initial.rebalance.delay.ms": "0",
                "group.min.session.timeout.ms": "500",
                "offsets.topic.num.partitions": "2",
            }
        ) as b,
        KafkaClient(b.bootstrap_servers) as c,
    ):
        create_topic(b.bootstrap_servers, "t", 2)
        conn = c.any_connection()
        # the first request starts the coordinator, which loads in the background
        for _ in range(1000):
            r = conn.call(10, 3, {"key": "warmup", "key_type": 0})
            fetched = conn.call(
                9, 7, {"group_id": "warmup", "topics": None, "require_stable": False}
            )
            if int(r.error_code) == 0 and int(fetched.error_code) == 0:
                break
        yield conn


def _join(conn: Any, v: int, group: str, member_id: str = "") -> Any:
    return conn.call(
        11,
        v,
        {
            "group_id": group,
            "session_timeout": 6000,
            "rebalance_timeout": 6000,
            "member_id": member_id,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUB}],
            "reason": None,
        },
    )


@pytest.mark.parametrize("join_v", range(8))
def test_member_lifecycle_at_each_join_version(conn: Any, join_v: int) -> None:
    group = f"v-join-{join_v}"
    r = _join(conn, join_v, group)
    if join_v >= 4:
        assert int(r.error_code) == 79 and r.member_id  # MEMBER_ID_REQUIRED
        r = _join(conn, join_v, group, r.member_id)
    assert int(r.error_code) == 0 and r.generation_id == 1 and r.leader == r.member_id
    assert [m.member_id for m in r.members] == [r.member_id] and r.members[0].metadata == SUB
    sync_v = min(join_v, 5)
    s = conn.call(
        14,
        sync_v,
        {
            "group_id": group,
            "generation_id": 1,
            "member_id": r.member_id,
            "group_instance_id": None,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": r.member_id, "assignment": b"plan"}],
        },
    )
    assert int(s.error_code) == 0 and s.assignment == b"plan"
    hb = conn.call(
        12,
        min(join_v, 4),
        {
            "group_id": group,
            "generation_id": 1,
            "member_id": r.member_id,
            "group_instance_id": None,
        },
    )
    assert int(hb.error_code) == 0
    commit_v = max(2, min(join_v + 2, 9))
    c = conn.call(
        8,
        commit_v,
        {
            "group_id": group,
            "generation_id_or_member_epoch": 1,
            "member_id": r.member_id,
            "group_instance_id": None,
            "retention_time": -1,
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {
                            "partition_index": 0,
                            "committed_offset": 42,
                            "committed_leader_epoch": 3,
                            "committed_metadata": "md",
                        }
                    ],
                }
            ],
        },
    )
    assert int(c.topics[0].partitions[0].error_code) == 0
    if join_v >= 3:
        leave = conn.call(
            13,
            min(join_v, 5),
            {
                "group_id": group,
                "members": [{"member_id": r.member_id, "group_instance_id": None, "reason": None}],
            },
        )
        assert int(leave.error_code) == 0 and int(leave.members[0].error_code) == 0
    else:
        leave = conn.call(13, join_v, {"group_id": group, "member_id": r.member_id})
        assert int(leave.error_code) == 0
    hb = conn.call(
        12,
        min(join_v, 4),
        {
            "group_id": group,
            "generation_id": 1,
            "member_id": r.member_id,
            "group_instance_id": None,
        },
    )
    assert int(hb.error_code) == 25  # UNKNOWN_MEMBER_ID after leaving


@pytest.mark.parametrize("v", range(1, 9))
def test_offset_fetch_each_version(conn: Any, v: int) -> None:
    group = "v-fetch"
    conn.call(
        8,
        2,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "retention_time": -1,
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 7, "committed_metadata": "x"}
                    ],
                }
            ],
        },
    )
    topics = [{"name": "t", "partition_indexes": [0, 1]}]
    if v >= 8:
        r = conn.call(
            9,
            v,
            {
                "groups": [
                    {"group_id": group, "topics": topics},
                    {"group_id": "v-none", "topics": None},
                ],
                "require_stable": False,
            },
        )
        g0, g1 = r.groups
        parts = {p.partition_index: p.committed_offset for p in g0.topics[0].partitions}
        assert parts == {0: 7, 1: -1} and int(g0.error_code) == 0 and g1.topics == ()
        return
    r = conn.call(9, v, {"group_id": group, "topics": topics, "require_stable": False})
    parts = {p.partition_index: (p.committed_offset, p.metadata) for p in r.topics[0].partitions}
    assert parts == {0: (7, "x"), 1: (-1, "")}
    if v >= 2:
        everything = conn.call(9, v, {"group_id": group, "topics": None, "require_stable": False})
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in everything.topics] == [
            ("t", [0])
        ]


@pytest.mark.parametrize("v", range(7))
def test_find_coordinator_each_version(conn: Any, v: int) -> None:
    if v >= 4:
        r = conn.call(10, v, {"key_type": 0, "coordinator_keys": ["a", "b"]})
        assert [(c.key, int(c.error_code)) for c in r.coordinators] == [("a", 0), ("b", 0)]
    else:
        r = conn.call(10, v, {"key": "a", "key_type": 0})
        assert int(r.error_code) == 0 and r.port > 0


@pytest.mark.parametrize("v", range(6))
def test_list_groups_each_version(conn: Any, v: int) -> None:
    conn.call(
        8,
        2,
        {
            "group_id": "v-list",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "retention_time": -1,
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                    ],
                }
            ],
        },
    )
    r = conn.call(16, v, {"states_filter": ["Empty"], "types_filter": []})
    assert int(r.error_code) == 0 and "v-list" in {g.group_id for g in r.groups}
    if v >= 4:
        stable_only = conn.call(16, v, {"states_filter": ["Stable"], "types_filter": []})
        assert "v-list" not in {g.group_id for g in stable_only.groups}


@pytest.mark.parametrize("v", range(7))
def test_describe_groups_each_version(conn: Any, v: int) -> None:
    r = conn.call(15, v, {"groups": ["v-desc-missing"], "include_authorized_operations": False})
    g = r.groups[0]
    assert g.group_state == "Dead"
    assert int(g.error_code) == (69 if v >= 6 else 0)  # GROUP_ID_NOT_FOUND from v6


@pytest.mark.parametrize("v", range(3))
def test_delete_groups_and_offset_delete(conn: Any, v: int) -> None:
    group = f"v-del-{v}"
    conn.call(
        8,
        2,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "retention_time": -1,
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""},
                        {"partition_index": 1, "committed_offset": 2, "committed_metadata": ""},
                    ],
                }
            ],
        },
    )
    od = conn.call(
        47,
        0,
        {"group_id": group, "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]},
    )
    assert int(od.error_code) == 0 and int(od.topics[0].partitions[0].error_code) == 0
    r = conn.call(42, v, {"groups_names": [group, "v-never"]})
    assert [(x.group_id, int(x.error_code)) for x in r.results] == [(group, 0), ("v-never", 69)]


def test_commit_to_unknown_partitions_is_refused(conn: Any) -> None:
    r = conn.call(8, 8, {
        "group_id": "v-unknown", "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None,
        "topics": [
            {"name": "t", "partitions": [
                {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""},
                {"partition_index": 9, "committed_offset": 5, "committed_metadata": ""}]},
            {"name": "no-such-topic", "partitions": [
                {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}]},
        ],
    })  # fmt: skip
    errors = {
        (t.name, p.partition_index): int(p.error_code) for t in r.topics for p in t.partitions
    }
    assert errors == {("t", 0): 0, ("t", 9): 3, ("no-such-topic", 0): 3}
    fetched = conn.call(9, 7, {"group_id": "v-unknown", "topics": None, "require_stable": False})
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in fetched.topics] == [
        ("t", [0])
    ]
