"""A Produce answered by the handler's ``handle_now`` (no coroutine: the common request)
answers byte for byte as ``handle`` does: two brokers, one with ``handle_now`` and one
without, get the same requests over real sockets (the common shape and every one it must
hand back or refuse) and send the same bytes back."""

from __future__ import annotations

import dataclasses
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from broker_wire import (
    connect,
    corrupt_batch,
    decode_response,
    produce_batch,
    produce_body,
    recv_frame,
    request_frame,
)

from tidelog.server.registry import NOT_NOW
from tidelog.storage.free_space import JUST_BELOW_FLOOR
from tidelog.testing.embedded import EmbeddedBroker

# (version, topic, {partition: records}, acks): each answered by both brokers in turn
REQUESTS = [
    (9, "t", {0: produce_batch()}, 1),  # auto-creates "t" (the general path on both)
    (9, "t", {0: produce_batch()}, 1),
    (9, "t", {0: produce_batch(n=3)}, -1),
    (3, "t", {0: produce_batch()}, -1),  # not flexible
    (9, "t", {0: produce_batch(7, 0, 0)}, -1),  # a new idempotent producer
    (9, "t", {0: produce_batch(7, 0, 1)}, -1),  # its next batch
    (9, "t", {0: produce_batch(7, 0, 1)}, -1),  # a duplicate of it
    (9, "t", {0: produce_batch(7, 0, 5)}, -1),  # out of sequence
    (9, "t", {0: produce_batch(9, 0, 0, txn=True)}, 1),  # transactional, no transaction started
    (9, "t", {0: b""}, 1),  # empty
    (9, "t", {0: corrupt_batch()}, 1),
    (9, "t", {3: produce_batch()}, 1),  # no such partition
    (9, "t", {0: produce_batch()}, 2),  # invalid acks
    (9, "__consumer_offsets", {0: produce_batch()}, 1),  # internal
    (9, "t", {0: produce_batch(), 3: produce_batch()}, -1),  # two partitions
    (8, "t", {0: produce_batch()}, 1),
    (9, "t", {0: b"\x00" * 30}, 1),  # shorter than a batch header
    (9, "t", {0: produce_batch(9, 0, 0, txn=True)[:40]}, 1),  # a transactional header, cut
]


TAKEN: list[bool] = []  # per request that ``now`` tried: answered there (not NOT_NOW)


@pytest.fixture
def brokers() -> Iterator[tuple[EmbeddedBroker, EmbeddedBroker]]:
    TAKEN.clear()
    with EmbeddedBroker() as now, EmbeddedBroker() as later:
        spec = later.broker.registry._specs[0]
        assert spec.handle_now is not None
        later.broker.registry._specs[0] = dataclasses.replace(spec, handle_now=None)
        handle_now = spec.handle_now

        def counted(ctx: Any, request: Any) -> Any:
            answer = handle_now(ctx, request)
            TAKEN.append(answer is not NOT_NOW)
            return answer

        now.broker.registry._specs[0] = dataclasses.replace(spec, handle_now=counted)
        yield now, later


def _answer(sock: socket.socket, corr: int, version: int, topic: str,
            parts: dict[int, bytes], acks: int) -> bytes:
    sock.sendall(request_frame(0, version, corr, produce_body(version, topic, parts, acks)))
    return recv_frame(sock)


def test_same_answers_with_and_without_handle_now(
        brokers: tuple[EmbeddedBroker, EmbeddedBroker]) -> None:
    now, later = brokers
    with connect(now) as a, connect(later) as b:
        for corr, (version, topic, parts, acks) in enumerate(REQUESTS, 1):
            got = _answer(a, corr, version, topic, parts, acks)
            want = _answer(b, corr, version, topic, parts, acks)
            assert struct.unpack_from(">i", got)[0] == corr
            assert got == want, (version, topic, sorted(parts), acks)
    # ``handle_now`` answered all but the requests naming a topic unknown here (its
    # creation may suspend): the first, and the internal topic no coordinator made yet
    assert [i for i, t in enumerate(TAKEN) if not t] == [0, 13], TAKEN
    for b in brokers:
        tp = next(tp for tp in b.broker.replica_manager.partitions if tp.topic == "t")
        assert b.broker.replica_manager.partitions[tp].log.log_end_offset == 10


def test_a_dir_below_its_floor_refuses_the_same_with_and_without_handle_now(
        brokers: tuple[EmbeddedBroker, EmbeddedBroker]) -> None:
    """The common Produce's plain append counts the dir's free-space headroom itself: a
    fault plan's override set while headroom is left refuses its very next batch as the
    general path does, and once lifted both take batches again."""
    now, later = brokers
    with connect(now) as a, connect(later) as b:
        corr = 0

        def both(acks: int) -> Any:
            nonlocal corr
            corr += 1
            got = _answer(a, corr, 9, "f", {0: produce_batch()}, acks)
            want = _answer(b, corr, 9, "f", {0: produce_batch()}, acks)
            if got == want:
                return decode_response(0, 9, got)
            # (a refusal's message names each broker's own log dir: all else the same)
            mine, theirs = (decode_response(0, 9, f).responses[0]  # type: ignore[attr-defined]
                            .partition_responses[0] for f in (got, want))
            assert mine.error_message.startswith("Log dir ")
            assert dataclasses.replace(mine, error_message="") == \
                dataclasses.replace(theirs, error_message="")
            return decode_response(0, 9, got)

        for _ in range(3):  # created, then answered by ``handle_now`` with headroom counted
            both(-1)
        for br in brokers:
            br.broker.replica_manager.logs.free_space.override = \
                lambda path: JUST_BELOW_FLOOR
        refused = both(-1).responses[0].partition_responses[0]
        for br in brokers:
            br.broker.replica_manager.logs.free_space.override = None
        both(1)
    assert (refused.error_code, refused.base_offset) == (19, -1)  # NOT_ENOUGH_REPLICAS
    assert TAKEN[-2:] == [True, True]  # the refused and the next one: both ``handle_now``'s
    for br in brokers:
        tp = next(tp for tp in br.broker.replica_manager.partitions if tp.topic == "f")
        assert br.broker.replica_manager.partitions[tp].log.log_end_offset == 4


def test_a_due_flush_answers_the_same_with_and_without_handle_now(
        brokers: tuple[EmbeddedBroker, EmbeddedBroker]) -> None:
    """flush.messages 1: every append's flush is due, so the plain append leaves the high
    watermark where it was and the group commit moves it once the records are on disk. The
    answers (acks -1 and 1, plain and idempotent batches, a duplicate) are the same bytes
    through ``handle_now`` as through ``handle``, all ``handle_now``'s, and every answered
    batch is flushed and below the high watermark when its answer arrives."""
    for br in brokers:
        async def create(b: EmbeddedBroker = br) -> None:
            b.broker.replica_manager.create_topic("fl", 1, {"flush.messages": "1"})
        br.run(create())
    TAKEN.clear()
    now, later = brokers
    requests = [(produce_batch(), -1), (produce_batch(7, 0, 0), -1), (produce_batch(7, 0, 1), -1),
                (produce_batch(7, 0, 1), -1), (produce_batch(7, 0, 2), 1), (produce_batch(n=3), -1)]
    with connect(now) as a, connect(later) as b:
        for corr, (records, acks) in enumerate(requests, 1):
            got = _answer(a, corr, 9, "fl", {0: records}, acks)
            assert got == _answer(b, corr, 9, "fl", {0: records}, acks)
            for br in brokers:
                tp = next(tp for tp in br.broker.replica_manager.partitions if tp.topic == "fl")
                lg = br.broker.replica_manager.partitions[tp].log
                assert lg.recovery_point == lg.high_watermark == lg.log_end_offset
    assert len(TAKEN) == len(requests) and all(TAKEN), TAKEN
    assert lg.log_end_offset == 7  # (the duplicate not appended again)
