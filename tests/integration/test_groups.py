"""Consumer groups with real clients: three members split six partitions, a crash and a
graceful leave move partitions, synchronous commits never deliver a record twice, and a
restarted broker resumes the group from its committed offsets."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator

import pytest
from test_groups_support import (
    KAFKA_PYTHON_FIRST_JOIN_DELAY_MS,
    Member,
    balanced,
    create_topic,
    produce,
    removals,
    session_timeouts,
    wait_for,
)

from tidelog.testing.embedded import EmbeddedBroker

SESSION_MS = 3000
PARTITIONS = 6
PER_PARTITION = 10
BROKER_CONFIG = {
    # Not 0: see KAFKA_PYTHON_FIRST_JOIN_DELAY_MS in test_groups_support.py.
    "group.initial.rebalance.delay.ms": KAFKA_PYTHON_FIRST_JOIN_DELAY_MS,
    "group.min.session.timeout.ms": "500",
    "offsets.topic.num.partitions": "5",
}
MIXES = {
    "confluent": ("confluent",) * 3,
    "kafka-python": ("kafka-python",) * 3,
    "aiokafka": ("aiokafka",) * 3,
    "mixed": ("confluent", "kafka-python", "aiokafka"),
}
_ids = itertools.count()


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(BROKER_CONFIG) as b:
        yield b


def _all_committed(members: list[Member]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for m in members:
        with m.cond:
            out.extend(m.committed)
    return out


def _expect(rounds: int) -> set[tuple[int, int]]:
    return {(p, o) for p in range(PARTITIONS) for o in range(rounds * PER_PARTITION)}


@pytest.mark.parametrize("mix", list(MIXES))
def test_three_members_split_partitions_and_fail_over(broker: EmbeddedBroker, mix: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """What the coordinator decided, not how fast (wall-clock bounds flake on a loaded
    machine): the crashed member is removed by its session expiring, with the session timeout
    it asked for; the leaver by its LeaveGroup, no session expiring."""
    caplog.set_level(logging.INFO, logger="tidelog.server.coordinator.group")
    bs = broker.bootstrap_servers
    n = next(_ids)
    topic, group = f"grp-topic-{mix}-{n}", f"grp-{mix}-{n}"
    create_topic(bs, topic, PARTITIONS)
    produce(bs, topic, PARTITIONS, PER_PARTITION, "r1")
    members = [Member(c, bs, topic, group, SESSION_MS) for c in MIXES[mix]]
    try:
        wait_for(lambda: balanced(members, PARTITIONS), 60, "3-way split", members)
        assert sorted(len(m.current) for m in members) == [2, 2, 2]
        wait_for(lambda: set(_all_committed(members)) == _expect(1), 60, "round 1", members)
        sessions = session_timeouts(broker, group)
        assert list(sessions.values()) == [SESSION_MS] * 3, sessions
        assert removals(caplog, group) == []

        # A member crashes (SIGKILL: no LeaveGroup, no more heartbeats).
        crashed, survivors = members[0], members[1:]
        crashed.kill()
        produce(bs, topic, PARTITIONS, PER_PARTITION, "r2")
        wait_for(lambda: balanced(survivors, PARTITIONS), 60, "failover", survivors)
        # detected by its session expiring; the survivors rejoin on their next heartbeat
        [(crashed_id, why)] = removals(caplog, group)
        assert why == "session timeout expired" and crashed_id in sessions
        wait_for(lambda: set(_all_committed(members)) >= _expect(2), 60, "round 2", survivors)

        # A member leaves gracefully: the last one takes everything without waiting a session.
        leaver, last = survivors
        leaver.leave()
        produce(bs, topic, PARTITIONS, PER_PARTITION, "r3")
        wait_for(lambda: balanced([last], PARTITIONS), 30, "leave", [last])
        [_, (leaver_id, why)] = removals(caplog, group)
        assert why == "the consumer is leaving the group", why
        assert leaver_id != crashed_id
        wait_for(lambda: set(_all_committed(members)) >= _expect(3), 60, "round 3", [last])

        committed = _all_committed(members)
        # Every record was committed exactly once: synchronous commits from fenced members
        # are rejected (ILLEGAL_GENERATION / REBALANCE_IN_PROGRESS / UNKNOWN_MEMBER_ID).
        assert len(committed) == len(set(committed)) == 3 * PARTITIONS * PER_PARTITION
    finally:
        for m in members:
            m.stop()


def test_group_resumes_from_committed_offsets_after_broker_restart(tmp_path: object) -> None:
    from pathlib import Path

    log_dir = Path(str(tmp_path)) / "logs"
    topic, group = "restart-topic", "restart-group"
    b1 = EmbeddedBroker(BROKER_CONFIG, log_dir=log_dir).start()
    try:
        bs = b1.bootstrap_servers
        create_topic(bs, topic, PARTITIONS)
        produce(bs, topic, PARTITIONS, PER_PARTITION, "before")
        m = Member("confluent", bs, topic, group, SESSION_MS)
        try:
            wait_for(lambda: set(_all_committed([m])) == _expect(1), 60, "first run", [m])
            m.leave()
        finally:
            m.stop()
    finally:
        b1.stop()

    b2 = EmbeddedBroker(BROKER_CONFIG, log_dir=log_dir).start()
    try:
        bs = b2.bootstrap_servers
        produce(bs, topic, PARTITIONS, PER_PARTITION, "after")
        members = [Member(c, bs, topic, group, SESSION_MS) for c in ("kafka-python", "aiokafka")]
        try:
            wait_for(
                lambda: set(_all_committed(members)) >= _expect(2) - _expect(1),
                60,
                "second run",
                members,
            )
            # nothing committed before the restart is consumed again
            assert set(_all_committed(members)) == _expect(2) - _expect(1)
        finally:
            for x in members:
                x.stop()
    finally:
        b2.stop()
