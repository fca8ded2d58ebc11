"""Registries of a cluster elect one leader in a Kafka consumer group (Confluent's kafkagroup
election) and forward writes to it: two registries over one broker's _schemas, writes sent to
the follower answered by the leader and readable on the follower at once; the leader stops
and the other takes over."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from registry_support import RegistryBroker, call

from tidelog.schema_registry.listener import SchemaRegistryListener


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def electing(rb: RegistryBroker) -> SchemaRegistryListener:
    broker = rb.embedded.broker
    values = {**broker.config.values, "schema.registry.listeners": ["http://127.0.0.1:0"]}
    listener = SchemaRegistryListener(values, broker.config.originals, rb.bootstrap_servers,
                                      elect=True)
    rb.embedded.run(listener.start())
    return listener


def schema(name: str) -> dict[str, str]:
    return {"schema": json.dumps({"type": "record", "name": name, "fields": []})}


def test_writes_go_to_the_elected_leader(fresh_registry: RegistryBroker) -> None:
    rb = fresh_registry
    a, b = electing(rb), electing(rb)
    try:
        assert a.elector is not None and b.elector is not None
        wait_for("one leader", lambda: [a.elector.is_leader, b.elector.is_leader].count(True) == 1)
        leader, follower = (a, b) if a.elector.is_leader else (b, a)
        assert follower.elector.leader_url() == leader.url
        status, body, _ = call(follower.url, "POST", "/subjects/s/versions", schema("A"))
        assert (status, body) == (200, {"id": 1})
        # the follower has read the leader's write before answering
        assert call(follower.url, "GET", "/subjects/s/versions")[1] == [1]
        assert call(leader.url, "POST", "/subjects/s/versions", schema("A"))[1] == {"id": 1}
        assert call(follower.url, "PUT", "/config/s", {"compatibility": "NONE"})[1] == {
            "compatibility": "NONE"}
        assert call(leader.url, "GET", "/config/s")[1] == {"compatibilityLevel": "NONE"}
        # the leader stops: the follower takes over
        rb.embedded.run(leader.stop())
        wait_for("the follower to lead", lambda: follower.elector.is_leader)
        assert call(follower.url, "POST", "/subjects/s/versions", schema("B"))[1] == {"id": 2}
        assert call(follower.url, "GET", "/subjects/s/versions")[1] == [1, 2]
    finally:
        for listener in (a, b):
            rb.embedded.run(listener.stop())
