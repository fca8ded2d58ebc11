"""Auto-created topics and the internal topics created by the first FindCoordinator get
their files made on the admin thread, never on the event loop (server/topic_admin.py)."""

from __future__ import annotations

import threading
from typing import Any

import confluent_kafka

from tidelog.testing import EmbeddedBroker


def _record_creating_threads(b: EmbeddedBroker) -> list[tuple[str, str]]:
    logs = b.broker.replica_manager.logs
    seen: list[tuple[str, str]] = []
    original = logs.get_or_create_log

    def spy(tp: Any, *args: Any, **kw: Any) -> Any:
        if logs.get_log(tp) is None:
            seen.append((tp.topic, threading.current_thread().name))
        return original(tp, *args, **kw)

    logs.get_or_create_log = spy
    return seen


def test_auto_created_and_internal_topics_are_created_off_the_loop() -> None:
    with EmbeddedBroker({"offsets.topic.num.partitions": "3",
                         "transaction.state.log.num.partitions": "2"}) as b:
        seen = _record_creating_threads(b)
        p = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap_servers,
                                      "transactional.id": "tx-1"})
        p.init_transactions(30)  # FindCoordinator(transaction) creates __transaction_state
        p.begin_transaction()
        p.produce("auto-made", b"v")  # Metadata auto-creates the topic
        p.commit_transaction(30)
        c = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap_servers,
                                      "group.id": "g1", "auto.offset.reset": "earliest"})
        try:
            c.subscribe(["auto-made"])
            msg = None
            for _ in range(30):
                msg = c.poll(1.0)
                if msg is not None and msg.error() is None:
                    break
            assert msg is not None and msg.value() == b"v"
            c.commit(asynchronous=False)  # the group's coordinator: __consumer_offsets
        finally:
            c.close()
    topics = {t for t, _ in seen}
    assert {"auto-made", "__consumer_offsets", "__transaction_state"} <= topics
    on_loop = [(t, name) for t, name in seen if not name.startswith("tidelog-admin")]
    assert on_loop == []
    assert len([t for t, _ in seen if t == "__consumer_offsets"]) == 3
