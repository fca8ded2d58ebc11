"""A ShareFetch with nothing to acquire parks (Kafka's DelayedShareFetch) until its
partition's high watermark moves or its share-partition gives records back, then answers:
it does not read the log over and over meanwhile."""

from __future__ import annotations

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

RELEASE = 2
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
    assert len(reads) == 2  # before parking and once woken


def test_a_parked_share_fetch_is_woken_by_records_given_back(broker: EmbeddedBroker,
                                                             reads: list[int]) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    p.produce("parked", b"x", partition=0)
    p.flush(10)
    topic_id = broker.broker.replica_manager.topic("parked").topic_id
    with Wire(broker) as holder, Wire(broker) as waiter:
        assert _alter_group(holder, "sg-back", [("share.auto.offset.reset", "earliest")]
                            ).error_code == ErrorCode.NONE
        _join(holder, "sg-back", "a")
        _join(waiter, "sg-back", "b")
        held: Any = holder.call(78, 1, body=share_fetch_body("sg-back", "a", 0, topic_id,
                                                              1 << 20, 5000))
        assert _acquired(held) == [(0, 0, 1)]
        reads.clear()

        def give_back() -> None:
            cls = request_class(79, 1)
            tcls = nested(cls, "topics")
            pcls = nested(tcls, "partitions")
            bcls = nested(pcls, "acknowledgement_batches")
            acked: Any = holder.call(79, 1, group_id="sg-back", member_id="a",
                                     share_session_epoch=1, topics=(make(
                                         tcls, topic_id=topic_id, partitions=(make(
                                             pcls, partition_index=0,
                                             acknowledgement_batches=(make(
                                                 bcls, first_offset=0, last_offset=0,
                                                 acknowledge_types=(RELEASE,)),)),)),))
            assert acked.responses[0].partitions[0].error_code == ErrorCode.NONE

        got = _parked_fetch(broker, waiter, "sg-back", "b", 0, give_back, reads)
    assert _acquired(got) == [(0, 0, 2)]  # the second delivery of offset 0
    assert len(reads) == 2
