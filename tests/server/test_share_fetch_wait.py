"""A ShareFetch with nothing to acquire reads once more a moment later (records that come
meanwhile go in one answer), then parks (Kafka's DelayedShareFetch) until its partition's
high watermark moves or its share-partition gives records back, then answers: it does not
read the log over and over meanwhile."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from broker_wire import Wire, request_class
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from test_share_group_wire import _alter_group, share_fetch_body

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.server.handlers import share_fetch
from tidelog.testing import EmbeddedBroker

ACCEPT, RELEASE = 1, 2
WAIT_MS = 20_000  # the parked fetch's max wait: far longer than any wake-up takes


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per share-partition read of the log by a ShareFetch."""
    counted: list[int] = []
    real = share_fetch.fetch_partition

    def counting(*args: Any, **kwargs: Any) -> Any:
        counted.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(share_fetch, "fetch_partition", counting)
    return counted


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"offsets.topic.num.partitions": 1}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("parked", 1, 1)])["parked"].result(10)
        yield b


def _join(w: Wire, group: str, member: str) -> None:
    hb: Any = w.call(76, 1, group_id=group, member_id=member, member_epoch=0, rack_id=None,
                     subscribed_topic_names=("parked",))
    assert hb.error_code == ErrorCode.NONE


def _acquired(resp: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count) for t in resp.responses
            for p in t.partitions for a in p.acquired_records]


def _hold(w: Wire, group: str, topic_id: Any, *configs: tuple[str, str]) -> Any:
    """The group reads from the earliest offset (and ``configs``); member "h" joins and
    fetches: its answer."""
    assert _alter_group(w, group, [("share.auto.offset.reset", "earliest"), *configs]
                        ).error_code == ErrorCode.NONE
    _join(w, group, "h")
    return w.call(78, 1, body=share_fetch_body(group, "h", 0, topic_id, 1 << 20, 5000))


def _release(w: Wire, group: str, member: str, topic_id: Any, first: int, last: int,
             kind: int = RELEASE) -> None:
    cls = request_class(79, 1)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    bcls = nested(pcls, "acknowledgement_batches")
    acked: Any = w.call(79, 1, group_id=group, member_id=member, share_session_epoch=1,
                        topics=(make(tcls, topic_id=topic_id, partitions=(make(
                            pcls, partition_index=0, acknowledgement_batches=(make(
                                bcls, first_offset=first, last_offset=last,
                                acknowledge_types=(kind,)),)),)),))
    assert acked.responses[0].partitions[0].error_code == ErrorCode.NONE


def _parked_fetch(b: EmbeddedBroker, w: Wire, group: str, member: str, epoch: int,
                  wake: Callable[[], None], reads: list[int]) -> Any:
    """A ShareFetch sent with ``WAIT_MS``; once it has read the log and found nothing to
    acquire, and a while after, ``wake()``: its answer."""
    topic_id = b.broker.replica_manager.topic("parked").topic_id
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(w.call(78, 1, body=share_fetch_body(
        group, member, epoch, topic_id, 1 << 20, WAIT_MS))))
    t.start()
    deadline = time.monotonic() + 10
    while not reads and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)  # parked a while: a polling fetch would read the log again and again
    wake()
    t.join(WAIT_MS / 1000 / 2)  # (a generous deadline: woken, not timed out)
    assert not t.is_alive()
    return out[0]


def test_a_parked_share_fetch_is_woken_by_an_append(broker: EmbeddedBroker,
                                                    reads: list[int]) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    with Wire(broker) as w:
        assert _alter_group(w, "sg-park", [("share.auto.offset.reset", "earliest")]
                            ).error_code == ErrorCode.NONE
        _join(w, "sg-park", "m")
        got = _parked_fetch(broker, w, "sg-park", "m", 0,
                            lambda: (p.produce("parked", b"x", partition=0), p.flush(10)),
                            reads)
    assert _acquired(got) == [(0, 0, 1)]
    assert len(reads) == 3  # before parking (twice: the second after COALESCE_S), woken


def test_a_parked_share_fetch_is_woken_by_records_given_back(broker: EmbeddedBroker,
                                                             reads: list[int]) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    p.produce("parked", b"x", partition=0)
    p.flush(10)
    topic_id = broker.broker.replica_manager.topic("parked").topic_id
    with Wire(broker) as holder, Wire(broker) as waiter:
        held = _hold(holder, "sg-back", topic_id)
        _join(waiter, "sg-back", "b")
        assert _acquired(held) == [(0, 0, 1)]
        reads.clear()

        def give_back() -> None:
            _release(holder, "sg-back", "h", topic_id, 0, 0)

        got = _parked_fetch(broker, waiter, "sg-back", "b", 0, give_back, reads)
    assert _acquired(got) == [(0, 0, 2)]  # the second delivery of offset 0
    assert len(reads) == 3


def _park_all(b: EmbeddedBroker, group: str, members: list[str], max_records: int,
              ) -> tuple[list[threading.Thread], dict[str, Any], list[Wire]]:
    """Each member's first ShareFetch (``max_records``, ``WAIT_MS``) in its thread, once all
    are parked."""
    share = b.broker.group_coordinator.share
    topic_id = b.broker.replica_manager.topic("parked").topic_id
    out: dict[str, Any] = {}
    wires = [Wire(b) for _ in members]
    threads = []
    for m, w in zip(members, wires, strict=True):
        _join(w, group, m)
        body = dataclasses.replace(share_fetch_body(group, m, 0, topic_id, 1 << 20, WAIT_MS),
                                   max_records=max_records)
        threads.append(threading.Thread(
            target=lambda w=w, m=m, body=body: out.__setitem__(m, w.call(78, 1, body=body))))
        threads[-1].start()
    deadline = time.monotonic() + 10
    while len(share.fetch_waits) < len(members) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(share.fetch_waits) == len(members)
    return threads, out, wires


def test_an_append_wakes_one_parked_fetch_of_the_group(broker: EmbeddedBroker,
                                                       reads: list[int]) -> None:
    """Three members parked on one partition, one record appended: one fetch reads and
    acquires it, the other two stay parked (no read each for a record only one can have)."""
    share = broker.broker.group_coordinator.share
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    with Wire(broker) as w:
        assert _alter_group(w, "sg-one", [("share.auto.offset.reset", "earliest")]
                            ).error_code == ErrorCode.NONE
    threads, out, wires = _park_all(broker, "sg-one", ["a", "b", "c"], 500)
    try:
        reads.clear()
        p.produce("parked", b"x", partition=0)
        p.flush(10)
        deadline = time.monotonic() + 10
        while not out and time.monotonic() < deadline:
            time.sleep(0.01)
        [got] = out.values()
        assert _acquired(got) == [(0, 0, 1)]
        assert len(reads) == 1 and len(share.fetch_waits) == 2
        p.produce("parked", b"y", partition=0)  # the next wakes the next
        p.flush(10)
        deadline = time.monotonic() + 10
        while len(out) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sorted(_acquired(g) for g in out.values()) == [[(0, 0, 1)], [(1, 1, 1)]]
        assert len(reads) == 2
        p.produce("parked", b"z", partition=0)
        p.flush(10)
        for t in threads:
            t.join(WAIT_MS / 1000 / 2)
        assert sorted(_acquired(g) for g in out.values()) == [
            [(0, 0, 1)], [(1, 1, 1)], [(2, 2, 1)]]
        assert len(reads) == 3
    finally:
        for w in wires:
            w.close()
        for t in threads:
            t.join(WAIT_MS / 1000)


def test_records_left_by_a_woken_fetch_wake_the_next(broker: EmbeddedBroker,
                                                     reads: list[int]) -> None:
    """Three batches of two records held by one member and released at once: the one fetch
    woken takes a batch (its max_records 2) and wakes the next, which takes the next."""
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for _ in range(3):  # three batches
        p.produce("parked", b"x", partition=0)
        p.produce("parked", b"y", partition=0)
        p.flush(10)
    topic_id = broker.broker.replica_manager.topic("parked").topic_id
    with Wire(broker) as holder:
        held = _hold(holder, "sg-pass", topic_id)
        assert _acquired(held) == [(0, 5, 1)]
        threads, out, wires = _park_all(broker, "sg-pass", ["a", "b", "c"], 2)
        try:
            reads.clear()
            _release(holder, "sg-pass", "h", topic_id, 0, 5)
            for t in threads:
                t.join(WAIT_MS / 1000 / 2)  # (a generous deadline: woken, not timed out)
            assert sorted(_acquired(g) for g in out.values()) == [
                [(0, 1, 2)], [(2, 3, 2)], [(4, 5, 2)]]
            assert len(reads) == 3
        finally:
            for w in wires:
                w.close()


def test_accepting_wakes_a_parked_fetch_only_when_it_frees_room_under_the_lock_cap(
        broker: EmbeddedBroker, reads: list[int]) -> None:
    """Records accepted are nothing to acquire: a parked fetch stays parked (no read), unless
    the share-partition held ``share.partition.max.record.locks`` records: then the room
    made lets it acquire what the cap held back."""
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 1000})
    for _ in range(3):  # three batches of 50
        for i in range(50):
            p.produce("parked", str(i).encode(), partition=0)
        p.flush(10)
    topic_id = broker.broker.replica_manager.topic("parked").topic_id
    with Wire(broker) as holder:
        held = _hold(holder, "sg-cap", topic_id, ("share.partition.max.record.locks", "100"))
        assert _acquired(held) == [(0, 99, 1)]  # two batches: the cap
        threads, out, wires = _park_all(broker, "sg-cap", ["w"], 500)
        try:
            reads.clear()
            _release(holder, "sg-cap", "h", topic_id, 0, 49, ACCEPT)
            for t in threads:
                t.join(WAIT_MS / 1000 / 2)
            assert _acquired(out["w"]) == [(100, 149, 1)]
            assert len(reads) == 1
        finally:
            for w in wires:
                w.close()


def test_accepting_under_the_lock_cap_leaves_a_parked_fetch_parked(
        broker: EmbeddedBroker, reads: list[int]) -> None:
    share = broker.broker.group_coordinator.share
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    p.produce("parked", b"x", partition=0)
    p.flush(10)
    topic_id = broker.broker.replica_manager.topic("parked").topic_id
    with Wire(broker) as holder:
        held = _hold(holder, "sg-acc", topic_id)
        assert _acquired(held) == [(0, 0, 1)]
        threads, out, wires = _park_all(broker, "sg-acc", ["w"], 500)
        try:
            reads.clear()
            _release(holder, "sg-acc", "h", topic_id, 0, 0, ACCEPT)
            time.sleep(0.5)
            assert reads == [] and len(share.fetch_waits) == 1 and not out
            p.produce("parked", b"y", partition=0)
            p.flush(10)
            for t in threads:
                t.join(WAIT_MS / 1000 / 2)
            assert _acquired(out["w"]) == [(1, 1, 1)]
            assert len(reads) == 1
        finally:
            for w in wires:
                w.close()
