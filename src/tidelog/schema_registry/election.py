"""The registries of a cluster elect one leader, as Confluent's registry does with its
Kafka-group election (``schema.registry.group.id``): every eligible registry is a member of
that consumer group subscribed to the one-partition ``_schemas`` topic, so the group's
assignment gives its partition to exactly one member, the leader (the partition is paused:
the member never reads through the group). Members name themselves by their URL in their
client id, so any registry finds the leader's URL by describing the group, and forwards
writes there. A leader that stops leaves the group and the next one takes over at the
rebalance."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)
CLIENT_PREFIX = "schema-registry|"


class GroupLeaderElector:
    def __init__(
        self, client_config: dict[str, Any], group_id: str, topic: str, url: str, eligible: bool
    ) -> None:
        self.client_config = client_config
        self.group_id = group_id
        self.topic = topic
        self.url = url
        self.eligible = eligible
        self.is_leader = False
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._cached: tuple[float, str | None] = (0.0, None)

    def start(self) -> None:
        if not self.eligible:
            return
        self._thread = threading.Thread(target=self._run, name="schema-registry-election")
        self._thread.daemon = True
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.is_leader = False

    def _run(self) -> None:
        consumer = Consumer({
            **self.client_config, "group.id": self.group_id,
            "client.id": CLIENT_PREFIX + self.url, "enable.auto.commit": False,
            "partition.assignment.strategy": "range", "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000,
        })

        def assigned(c: Consumer, parts: list[TopicPartition]) -> None:
            if parts:
                c.pause(parts)  # membership only: the store's own reader reads the topic
            self.is_leader = any(p.topic == self.topic and p.partition == 0 for p in parts)
            log.info("schema registry %s is %s", self.url,
                     "the leader" if self.is_leader else "a follower")

        def revoked(c: Consumer, parts: list[TopicPartition]) -> None:
            self.is_leader = False

        consumer.subscribe([self.topic], on_assign=assigned, on_revoke=revoked)
        try:
            while not self._stopping.is_set():
                consumer.poll(0.2)
        finally:
            self.is_leader = False
            consumer.close()  # leaves the group: the others rebalance at once

    def leader_url(self) -> str | None:
        """This registry's URL when it leads, else the member owning the partition (blocking:
        call off the event loop). Cached for a second."""
        if self.is_leader:
            return self.url
        at, url = self._cached
        if time.monotonic() - at < 1.0 and url is not None:
            return url
        url = self._describe()
        self._cached = (time.monotonic(), url)
        return url

    def _describe(self) -> str | None:
        admin = AdminClient(self.client_config)
        try:
            found = admin.describe_consumer_groups([self.group_id])[self.group_id].result(10)
        except Exception:
            log.debug("describing %s failed", self.group_id, exc_info=True)
            return None
        for member in found.members:
            assignment = getattr(member, "assignment", None)
            parts = getattr(assignment, "topic_partitions", None) or []
            if any(p.topic == self.topic and p.partition == 0 for p in parts):
                client_id = str(member.client_id)
                if client_id.startswith(CLIENT_PREFIX):
                    return client_id[len(CLIENT_PREFIX):]
        return None
