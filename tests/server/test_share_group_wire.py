"""Share groups seen by the admin APIs on the wire: ShareGroupDescribe (77) for two
confluent-kafka ShareConsumers, ListGroups v5 by type, DescribeGroups and ConsumerGroupDescribe
refusing a share group, DeleteGroups once it is empty; DescribeShareGroupOffsets (90)."""

from __future__ import annotations

import time
from typing import Any

from broker_wire import Wire, request_class
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.testing import EmbeddedBroker


def test_share_groups_in_the_admin_apis() -> None:
    with EmbeddedBroker({"group.share.heartbeat.interval.ms": 250,
                         "offsets.topic.num.partitions": 3}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("shared", 2, 1)])["shared"].result(10)
        consumers = [ShareConsumer({"bootstrap.servers": b.bootstrap_servers,
                                    "group.id": "sg-admin"}) for _ in range(2)]
        for c in consumers:
            c.subscribe(["shared"])
        share = b.broker.group_coordinator.share
        deadline = time.monotonic() + 30

        def spread() -> bool:  # two members, each with its one partition (SimpleAssignor)
            g = share.groups.get("sg-admin")
            return g is not None and len(g.members) == 2 and all(
                sum(map(len, m.assigned.values())) == 1 for m in g.members.values())

        while time.monotonic() < deadline and not spread():
            for c in consumers:
                c.poll(0.05)
        with Wire(b) as w:
            d: Any = w.call(77, 1, group_ids=("sg-admin", "nobody"),
                            include_authorized_operations=False)
            group, missing = d.groups
            assert (group.error_code, group.group_state, len(group.members)) == (
                ErrorCode.NONE, "Stable", 2)
            owned = []
            for m in group.members:
                assert m.subscribed_topic_names == ("shared",)
                [tp] = m.assignment.topic_partitions
                assert tp.topic_name == "shared" and len(tp.partitions) == 1
                owned += tp.partitions
            assert sorted(owned) == [0, 1]  # the SimpleAssignor: one partition each
            assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND
            listed: Any = w.call(16, 5, states_filter=(), types_filter=("share",))
            assert [(g.group_id, g.group_type) for g in listed.groups] == [("sg-admin", "share")]
            classic: Any = w.call(15, 6, groups=("sg-admin",),
                                  include_authorized_operations=False)
            assert classic.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
            kip848: Any = w.call(69, 1, group_ids=("sg-admin",),
                                 include_authorized_operations=False)
            assert kip848.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
            busy: Any = w.call(42, 2, groups_names=("sg-admin",))
            assert busy.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
            for c in consumers:
                c.close()
            deleted: Any = w.call(42, 2, groups_names=("sg-admin",))
            assert deleted.results[0].error_code == ErrorCode.NONE
            assert "sg-admin" not in share.groups


def test_describe_share_group_offsets_reports_start_offset_and_lag() -> None:
    with EmbeddedBroker({"offsets.topic.num.partitions": 3}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("lagging", 2, 1)])["lagging"].result(10)
        c = ShareConsumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "sg-lag",
                           "share.acknowledgement.mode": "explicit"})
        c.subscribe(["lagging"])
        share = b.broker.group_coordinator.share
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(share.partitions) < 2:
            c.poll(0.05)
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(5):
            p.produce("lagging", str(i).encode(), partition=0)
        p.flush(10)
        held: list[Any] = []
        deadline = time.monotonic() + 30
        while len(held) < 5 and time.monotonic() < deadline:
            held += list(c.poll(0.1))
        for m in held:
            c.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 3 else AcknowledgeType.RELEASE)
        c.commit_sync(10)
        with Wire(b) as w:
            everything: Any = w.call(90, 1, groups=(make_group("sg-lag", None),))
            [g] = everything.groups
            [t] = g.topics
            got = {p.partition_index: (p.start_offset, p.lag) for p in t.partitions}
            assert (t.topic_name, got) == ("lagging", {0: (3, 2), 1: (0, 0)})
            named: Any = w.call(90, 0, groups=(make_group("sg-lag", [("lagging", (0,)),
                                                                   ("nothing", (0,))], 0),))
            starts = {t.topic_name: [p.start_offset for p in t.partitions]
                      for t in named.groups[0].topics}
            assert starts == {"lagging": [3], "nothing": [-1]}
            busy: Any = w.call(91, 0, group_id="sg-lag", topics=(alter_topic("lagging", 0, 1),))
            assert busy.error_code == ErrorCode.NON_EMPTY_GROUP  # a member is still there
            c.close()
            reset: Any = w.call(91, 0, group_id="sg-lag", topics=(alter_topic("lagging", 0, 1),))
            assert reset.error_code == ErrorCode.NONE
            assert reset.responses[0].partitions[0].error_code == ErrorCode.NONE
            again: Any = w.call(90, 1, groups=(make_group("sg-lag", [("lagging", (0,))]),))
            assert again.groups[0].topics[0].partitions[0].start_offset == 1
            gone: Any = w.call(92, 0, group_id="sg-lag", topics=(delete_topic("lagging"),))
            assert (gone.error_code, gone.responses[0].error_code) == (ErrorCode.NONE,
                                                                      ErrorCode.NONE)
            after: Any = w.call(90, 1, groups=(make_group("sg-lag", [("lagging", (0,))]),))
            assert after.groups[0].topics[0].partitions[0].start_offset == -1


def alter_topic(name: str, partition: int, start: int) -> Any:
    tcls = nested(request_class(91, 0), "topics")
    pcls = nested(tcls, "partitions")
    return make(tcls, topic_name=name,
                partitions=(make(pcls, partition_index=partition, start_offset=start),))


def delete_topic(name: str) -> Any:
    return make(nested(request_class(92, 0), "topics"), topic_name=name)


def make_group(group_id: str, topics: list[tuple[str, tuple[int, ...]]] | None,
               version: int = 1) -> Any:
    cls = request_class(90, version)
    gcls = nested(cls, "groups")
    tcls = nested(gcls, "topics")
    return make(gcls, group_id=group_id, topics=None if topics is None else tuple(
        make(tcls, topic_name=n, partitions=ps) for n, ps in topics))


def share_fetch_body(group: str, member: str, epoch: int, topic_id: Any, max_bytes: int,
                     max_wait_ms: int = 0) -> Any:
    import datetime

    cls = request_class(78, 1)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    return make(cls, group_id=group, member_id=member, share_session_epoch=epoch,
                max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1,
                max_bytes=max_bytes, max_records=500, batch_size=500,
                topics=(make(tcls, topic_id=topic_id, partitions=(
                    make(pcls, partition_index=0, acknowledgement_batches=()),)),),
                forgotten_topics_data=())


def test_share_fetch_with_max_bytes_zero_returns_no_records() -> None:
    """Kafka's ShareFetch, unlike Fetch, returns no first batch past ``max_bytes``: with 0,
    nothing is acquired; the same session then fetches them with room."""
    with EmbeddedBroker({"offsets.topic.num.partitions": 1}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("zero", 1, 1)])["zero"].result(10)
        topic_id = b.broker.replica_manager.topic("zero").topic_id
        with Wire(b) as w:
            hb: Any = w.call(76, 1, group_id="sg-zero", member_id="m-zero", member_epoch=0,
                             rack_id=None, subscribed_topic_names=("zero",))
            assert hb.error_code == ErrorCode.NONE
            opened: Any = w.call(78, 1, body=share_fetch_body("sg-zero", "m-zero", 0,
                                                              topic_id, 1 << 20))
            assert opened.error_code == ErrorCode.NONE
            p = Producer({"bootstrap.servers": b.bootstrap_servers})
            for i in range(5):
                p.produce("zero", str(i).encode(), partition=0)
            p.flush(10)
            none: Any = w.call(78, 1, body=share_fetch_body("sg-zero", "m-zero", 1, topic_id,
                                                            0, 200))
            assert none.error_code == ErrorCode.NONE
            got = [a for t in none.responses for part in t.partitions
                   for a in part.acquired_records]
            assert got == []
            five: Any = w.call(78, 1, body=share_fetch_body("sg-zero", "m-zero", 2, topic_id,
                                                            1 << 20, 5000))
            [part] = five.responses[0].partitions
            assert [(a.first_offset, a.last_offset, a.delivery_count)
                    for a in part.acquired_records] == [(0, 4, 1)]


def _alter_group(w: Wire, group: str, configs: list[tuple[str, str]]) -> Any:
    cls = request_class(44, 1)
    rcls = nested(cls, "resources")
    ccls = nested(rcls, "configs")
    resp: Any = w.call(44, 1, validate_only=False, resources=(make(
        rcls, resource_type=32, resource_name=group,
        configs=tuple(make(ccls, name=n, config_operation=0, value=v) for n, v in configs)),))
    return resp.responses[0]


def test_share_partition_max_record_locks_caps_what_a_group_holds() -> None:
    """The group config share.partition.max.record.locks (Kafka's name; at least 100): a
    share-partition acquires no more records at once; whole batches, as Kafka."""
    with EmbeddedBroker({"offsets.topic.num.partitions": 1}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("capped", 1, 1)])["capped"].result(10)
        topic_id = b.broker.replica_manager.topic("capped").topic_id
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 1000})
        for _ in range(3):  # three batches of 50
            for i in range(50):
                p.produce("capped", str(i).encode(), partition=0)
            p.flush(10)
        with Wire(b) as w:
            low = _alter_group(w, "sg-capped", [("share.partition.max.record.locks", "99")])
            assert low.error_code == ErrorCode.INVALID_CONFIG
            held = {}
            for group, cap in (("sg-capped", "100"), ("sg-free", None)):
                configs = [("share.auto.offset.reset", "earliest")]
                if cap is not None:
                    configs.append(("share.partition.max.record.locks", cap))
                assert _alter_group(w, group, configs).error_code == ErrorCode.NONE
                hb: Any = w.call(76, 1, group_id=group, member_id="m", member_epoch=0,
                                 rack_id=None, subscribed_topic_names=("capped",))
                assert hb.error_code == ErrorCode.NONE
                got: Any = w.call(78, 1, body=share_fetch_body(group, "m", 0, topic_id,
                                                               1 << 20, 2000))
                held[group] = sum(a.last_offset - a.first_offset + 1 for t in got.responses
                                  for part in t.partitions for a in part.acquired_records)
            assert held == {"sg-capped": 100, "sg-free": 150}  # the broker's default: 2000


def test_the_persister_asks_for_the_state_topic_only_while_it_is_unknown() -> None:
    """Kafka's persister looks its share coordinator up (FindCoordinator, which makes
    __share_group_state) only while it is unknown: a share-partition's state writes do not
    check the topic in the cluster metadata store every time."""
    with EmbeddedBroker({"offsets.topic.num.partitions": 1,
                         "share.coordinator.state.topic.num.partitions": 1}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("asked", 1, 1)])["asked"].result(10)
        topic_id = b.broker.replica_manager.topic("asked").topic_id
        persister = b.broker.group_coordinator.share.durable.persister
        asked = []
        ensure = persister.ensure_topic

        async def counted() -> bool:
            asked.append(1)
            return await ensure()

        persister.ensure_topic = counted
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        with Wire(b) as w:
            assert _alter_group(w, "sg-asked", [("share.auto.offset.reset", "earliest")]
                                ).error_code == ErrorCode.NONE
            hb: Any = w.call(76, 1, group_id="sg-asked", member_id="m", member_epoch=0,
                             rack_id=None, subscribed_topic_names=("asked",))
            assert hb.error_code == ErrorCode.NONE
            for i in range(5):  # each: a record fetched, then acknowledged (a write)
                p.produce("asked", b"x", partition=0)
                p.flush(10)
                got: Any = w.call(78, 1, body=share_fetch_body("sg-asked", "m", 2 * i,
                                                               topic_id, 1 << 20, 2000))
                [part] = got.responses[0].partitions
                [(first, last)] = [(a.first_offset, a.last_offset)
                                   for a in part.acquired_records]
                cls = request_class(79, 1)
                tcls = nested(cls, "topics")
                pcls = nested(tcls, "partitions")
                bcls = nested(pcls, "acknowledgement_batches")
                acked: Any = w.call(79, 1, group_id="sg-asked", member_id="m",
                                    share_session_epoch=2 * i + 1, topics=(make(
                                        tcls, topic_id=topic_id, partitions=(make(
                                            pcls, partition_index=0,
                                            acknowledgement_batches=(make(
                                                bcls, first_offset=first, last_offset=last,
                                                acknowledge_types=(1,)),)),)),))
                assert acked.responses[0].partitions[0].error_code == ErrorCode.NONE
        assert len(asked) <= 1  # the read and the writes after found the topic known


def _acquired(resp: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count) for t in resp.responses
            for part in t.partitions for a in part.acquired_records]


def test_a_session_closed_while_its_share_fetch_waits_acquires_nothing() -> None:
    """A ShareFetch waits for records; a final ShareAcknowledge (epoch -1) sent after it on the
    same connection closes the session meanwhile. A record produced then is not acquired for
    the closed session (Kafka reads that acknowledgement only after the fetch's answer, whose
    records the close gives back): the member's next session gets it at delivery count 1."""
    import select

    with EmbeddedBroker({"offsets.topic.num.partitions": 1}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        admin.create_topics([NewTopic("closing", 1, 1)])["closing"].result(10)
        topic_id = b.broker.replica_manager.topic("closing").topic_id
        share = b.broker.group_coordinator.share
        with Wire(b) as w:
            hb: Any = w.call(76, 1, group_id="sg-close", member_id="m", member_epoch=0,
                             rack_id=None, subscribed_topic_names=("closing",))
            assert hb.error_code == ErrorCode.NONE
            opened: Any = w.call(78, 1, body=share_fetch_body("sg-close", "m", 0, topic_id,
                                                              1 << 20))
            assert opened.error_code == ErrorCode.NONE and _acquired(opened) == []
            w.send(78, 1, body=share_fetch_body("sg-close", "m", 1, topic_id, 1 << 20, 8000))
            w.send(79, 1, group_id="sg-close", member_id="m", share_session_epoch=-1,
                   topics=())
            deadline = time.monotonic() + 10
            while ("sg-close", "m") in share.sessions and time.monotonic() < deadline:
                time.sleep(0.01)  # polling the broker's decision, not waiting for time
            assert ("sg-close", "m") not in share.sessions
            # the fault took effect: the session ended while the fetch had not answered
            poller = select.poll()  # (not select(): a worker's descriptors may pass 1023)
            poller.register(w.sock, select.POLLIN)
            assert poller.poll(0) == []
            p = Producer({"bootstrap.servers": b.bootstrap_servers})
            p.produce("closing", b"after-close", partition=0)
            assert p.flush(10) == 0
            waited: Any = w.recv(78, 1)
            closed: Any = w.recv(79, 1)
            assert (waited.error_code, closed.error_code) == (ErrorCode.NONE, ErrorCode.NONE)
            assert _acquired(waited) == []
            again: Any = w.call(78, 1, body=share_fetch_body("sg-close", "m", 0, topic_id,
                                                             1 << 20, 5000))
            assert _acquired(again) == [(0, 0, 1)]
