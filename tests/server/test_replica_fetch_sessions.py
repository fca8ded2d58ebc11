"""Follower fetch sessions (KIP-227) over real sockets: RemoteLeaderEndPoint's
FetchSessionHandler against a real broker's FetchSessionCache. The first Fetch opens a
session; a Fetch with nothing new names no partition and is answered with none; a changed
fetch offset is sent alone; the leader keeps each partition's last fetched epoch from the
incremental requests (a stale one would make it answer a diverging epoch wrongly) and answers
a real divergence even when nothing else changed; a session the leader lost (evicted)
answers FETCH_SESSION_ID_NOT_FOUND once and the next Fetch is full; a leader without cache
slots answers session id 0 and every Fetch stays full."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import new_leader_epoch
from confluent_kafka import Producer

from tidelog.client.kafka_client import KafkaClient
from tidelog.server.replication.fetch_session_handler import INITIAL
from tidelog.server.replication.leader_endpoint import (
    FetchedPartition,
    FetchPartition,
    FetchSettings,
    RemoteLeaderEndPoint,
)
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

TOPIC = "sessions"
TPS = [TopicPartition(TOPIC, p) for p in range(3)]


@pytest.fixture
def leader() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"num.partitions": "3"}) as b:
        with KafkaClient(b.bootstrap_servers) as client:
            client.create_topics({TOPIC: 3})
        yield b


def produce(broker: EmbeddedBroker, partition: int, n: int) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 2})
    for i in range(n):
        p.produce(TOPIC, value=f"v-{i}".encode(), partition=partition)
    assert p.flush(10) == 0


def topic_id(broker: EmbeddedBroker) -> uuid.UUID:
    return broker.broker.metadata_cache.image.topics[TOPIC].topic_id


def wanted(
    tid: uuid.UUID, offsets: dict[int, int], epoch: int = 0, last: int | None = None
) -> dict[TopicPartition, FetchPartition]:
    return {
        TopicPartition(TOPIC, p): FetchPartition(tid, off, 0, 1 << 20, epoch, last)
        for p, off in offsets.items()
    }


def follower_counts(broker: EmbeddedBroker) -> tuple[int, int, int]:
    c = broker.broker.fetch_sessions.stats.follower
    return c.requests, c.partitions_requested, c.partitions_answered


def endpoint(broker: EmbeddedBroker, **settings: Any) -> RemoteLeaderEndPoint:
    s = FetchSettings(replica_id=5, max_wait_ms=0, **settings)
    return RemoteLeaderEndPoint(broker.broker.node_id, ("127.0.0.1", broker.port), s)


def test_idle_rounds_name_and_answer_no_partition(leader: EmbeddedBroker) -> None:
    produce(leader, 1, 4)
    tid = topic_id(leader)

    async def main() -> list[Any]:
        ep = endpoint(leader)
        seen: list[Any] = []
        full = await ep.fetch(wanted(tid, {0: 0, 1: 0, 2: 0}))
        seen.append((sorted(full), ep.session.session_id, follower_counts(leader)))
        # partition 1 moved to offset 4: sent alone; nothing new to answer (the HW is 4)
        moved = await ep.fetch(wanted(tid, {0: 0, 1: 4, 2: 0}, last=None))
        seen.append((sorted(moved), follower_counts(leader)))
        for _ in range(3):
            seen.append((await ep.fetch(wanted(tid, {0: 0, 1: 4, 2: 0})), follower_counts(leader)))
        # new records on partition 2: only it is answered, nothing was requested
        produce(leader, 2, 2)
        news = await ep.fetch(wanted(tid, {0: 0, 1: 4, 2: 0}))
        seen.append((news, follower_counts(leader)))
        await ep.close()
        return seen

    seen = asyncio.run(main())
    tps, sid, counts = seen[0]
    assert tps == TPS and sid != 0 and counts == (1, 3, 3)
    assert seen[1] == ([], (2, 4, 3))
    for i, (answer, counts) in enumerate(seen[2:5]):
        assert answer == {} and counts == (3 + i, 4, 3)
    news, counts = seen[5]
    assert list(news) == [TPS[2]] and len(news[TPS[2]].records) > 0
    assert counts == (6, 4, 4)
    assert len(leader.broker.fetch_sessions) == 1


def test_the_leader_keeps_the_last_fetched_epoch_of_incremental_requests(
    leader: EmbeddedBroker,
) -> None:
    produce(leader, 0, 3)
    tid = topic_id(leader)
    tp = TPS[0]

    async def main() -> list[FetchedPartition | None]:
        ep = endpoint(leader)
        out: list[FetchedPartition | None] = []
        out.append((await ep.fetch(wanted(tid, {0: 0})))[tp])
        # a session opened with last fetched epoch 0 at offset 3
        ep.session.handle_error(OSError("a new session"))
        out.append((await ep.fetch(wanted(tid, {0: 3}, last=0))).get(tp))
        await asyncio.to_thread(new_leader_epoch, leader, TOPIC, tid, 2)
        await asyncio.to_thread(produce, leader, 0, 2)
        out.append((await ep.fetch(wanted(tid, {0: 3}, epoch=2, last=0))).get(tp))
        # epoch 2 fetched: the leader must check 2, not the session's first 0 (ends at 3)
        out.append((await ep.fetch(wanted(tid, {0: 5}, epoch=2, last=2))).get(tp))
        # a follower whose epoch 0 went on to 5: epoch 0 ends at 3 here, answered at once
        out.append((await ep.fetch(wanted(tid, {0: 5}, epoch=2, last=0))).get(tp))
        await ep.close()
        return out

    first, opened, records, caught_up, forked = asyncio.run(main())
    assert first is not None and len(first.records) > 0
    assert opened is not None and opened.diverging_epoch is None
    assert records is not None and len(records.records) > 0 and records.diverging_epoch is None
    assert caught_up is None or caught_up.diverging_epoch is None
    assert forked is not None and forked.diverging_epoch is not None
    assert (forked.diverging_epoch.leader_epoch, forked.diverging_epoch.end_offset) == (0, 3)


def test_a_lost_session_falls_back_to_a_full_fetch(leader: EmbeddedBroker) -> None:
    produce(leader, 0, 2)
    tid = topic_id(leader)

    async def main() -> list[Any]:
        ep = endpoint(leader)
        out: list[Any] = []
        await ep.fetch(wanted(tid, {0: 2, 1: 0, 2: 0}))
        await ep.fetch(wanted(tid, {0: 2, 1: 0, 2: 0}))  # incremental, idle
        leader.broker.fetch_sessions.sessions.clear()  # the leader lost it
        lost = ep.session.session_id
        out.append((await ep.fetch(wanted(tid, {0: 2, 1: 0, 2: 0})), ep.session.next_metadata))
        full = await ep.fetch(wanted(tid, {0: 2, 1: 0, 2: 0}))
        out.append((sorted(full), ep.session.session_id, lost))
        await ep.close()
        return out

    (lost_answer, metadata), (full, sid, lost) = asyncio.run(main())
    assert lost_answer == {} and metadata == INITIAL
    assert full == TPS and sid not in (0, lost)


def test_a_leader_without_slots_answers_every_fetch_in_full() -> None:
    with EmbeddedBroker({"max.incremental.fetch.session.cache.slots": "0"}) as leader:
        with KafkaClient(leader.bootstrap_servers) as client:
            client.create_topics({TOPIC: 3})
        tid = topic_id(leader)

        async def main() -> list[Any]:
            ep = endpoint(leader)
            out = [(sorted(await ep.fetch(wanted(tid, {0: 0, 1: 0, 2: 0}))),
                    ep.session.next_metadata) for _ in range(3)]  # fmt: skip
            await ep.close()
            return out

        for answer, metadata in asyncio.run(main()):
            assert answer == TPS and metadata == INITIAL
        assert follower_counts(leader) == (3, 9, 9)


def test_sessions_off_sends_sessionless_fetches(leader: EmbeddedBroker) -> None:
    tid = topic_id(leader)

    async def main() -> list[int]:
        ep = endpoint(leader, fetch_sessions=False)
        out = [len(await ep.fetch(wanted(tid, {0: 0, 1: 0, 2: 0}))) for _ in range(3)]
        await ep.close()
        return out

    assert asyncio.run(main()) == [3, 3, 3]
    assert len(leader.broker.fetch_sessions) == 0
    assert follower_counts(leader) == (3, 9, 9)


def test_nothing_ready_forgets_the_session(leader: EmbeddedBroker) -> None:
    """Kafka's buildFetch: with no partition ready, a Fetch that only forgets; the emptied
    session closes (session id 0 in the answer) and the next Fetch is full."""
    tid = topic_id(leader)

    async def main() -> list[Any]:
        ep = endpoint(leader)
        out: list[Any] = []
        await ep.fetch(wanted(tid, {0: 0, 1: 0, 2: 0}))
        out.append((len(leader.broker.fetch_sessions), follower_counts(leader)))
        out.append((await ep.fetch({}), ep.session.next_metadata, follower_counts(leader),
                    len(leader.broker.fetch_sessions)))  # fmt: skip
        out.append((await ep.fetch({}), follower_counts(leader)))  # nothing left: not sent
        out.append(sorted(await ep.fetch(wanted(tid, {0: 0, 1: 0, 2: 0}))))
        await ep.close()
        return out

    opened, forgot, nothing, full = asyncio.run(main())
    assert opened == (1, (1, 3, 3))
    assert forgot == ({}, INITIAL, (2, 3, 3), 0)
    assert nothing == ({}, (2, 3, 3))
    assert full == TPS and len(leader.broker.fetch_sessions) == 1
