"""confluent-kafka (librdkafka) consumer-group members polled on threads of their own, for the
group tests of both protocols."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from confluent_kafka import Consumer, TopicPartition


class Kafka(Protocol):
    @property
    def bootstrap_servers(self) -> str: ...


class Member:
    """A consumer (``group.protocol=consumer`` unless ``conf`` says otherwise) polled on its
    own thread; records every revocation (time, partitions), every record it receives
    (partition, time; and its offset) and its assignment after each poll."""

    def __init__(self, kafka: Kafka, group: str, topics: list[str], **conf: Any) -> None:
        self.consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers,
                                  "group.id": group, "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest", **conf})
        self.revoked: list[tuple[float, set[int]]] = []
        self.received: list[tuple[int, float]] = []
        self.offsets: list[int] = []
        self.assigned: set[tuple[str, int]] = set()
        self._stop = threading.Event()
        self.consumer.subscribe(topics, on_revoke=self._on_revoke)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_revoke(self, _c: Consumer, parts: list[TopicPartition]) -> None:
        self.revoked.append((time.monotonic(), {p.partition for p in parts}))

    def _run(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                self.received.append((msg.partition(), time.monotonic()))
                self.offsets.append(msg.offset())
            self.assigned = {(p.topic, p.partition) for p in self.consumer.assignment()}

    def partitions(self) -> set[int]:
        return {p for _, p in self.assigned}

    def revoked_since(self, moment: float) -> set[int]:
        return set().union(*(parts for t, parts in list(self.revoked) if t >= moment))

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def wait_for(cond: Callable[[], bool], timeout: float = 30.0, what: str = "") -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if cond():
            return time.monotonic() - start
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def first_offset(consumer: Consumer, partition: int, timeout: float = 30.0) -> int | None:
    """The offset of the first record ``consumer`` (subscribed) polls from ``partition``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = consumer.poll(0.1)
        if msg is not None and msg.error() is None and msg.partition() == partition:
            return msg.offset()
    return None
