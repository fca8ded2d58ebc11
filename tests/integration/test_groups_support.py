"""Helpers for test_groups*.py (no tests here): member processes reporting over stdout,
waiting on conditions, never on fixed sleeps."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidelog.testing.embedded import EmbeddedBroker

WORKER = Path(__file__).with_name("test_groups_worker.py")

# group.initial.rebalance.delay.ms for brokers that kafka-python consumers join (Kafka's
# default is 3000). With 0, a kafka-python 3.0.x leader forms the first generation before its
# topic metadata arrives, assigns nothing, and rejoins when the metadata lands. That rejoin is
# triggered only by its metadata snapshot, not by its rejoin flag; when the JoinGroup response
# comes back after poll(timeout_ms) returned (the group waits for the other members), the
# leader's own assignment clears the snapshot difference, need_rejoin() turns False, and the
# finished join is never consumed: heartbeats stay disabled, the coordinator expires the
# member, and the client waits forever with no partitions. The Java client avoids this by
# treating an in-flight join as "rejoin pending". A short initial delay lets the metadata
# arrive before the first assignment, as it does against Kafka with its default.
KAFKA_PYTHON_FIRST_JOIN_DELAY_MS = "1000"


def _stderr(client: str) -> Any:
    """Workers' logs go nowhere unless WORKER_LOG_DIR names a directory (debugging)."""
    log_dir = os.environ.get("WORKER_LOG_DIR")
    if not log_dir:
        return subprocess.DEVNULL
    return open(Path(log_dir) / f"{client}-{time.monotonic_ns()}.log", "w")


class Member:
    """One consumer process; ``assignments`` and ``committed`` fill in as it reports."""

    def __init__(
        self, client: str, bootstrap: str, topic: str, group: str, session_ms: int
    ) -> None:
        self.client = client
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER), client, bootstrap, topic, group, str(session_ms)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=_stderr(client),
            text=True,
        )
        self.assignments: list[tuple[float, list[int]]] = []
        self.committed: list[tuple[int, int]] = []
        self.closed = False
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self.cond:
                if "assigned" in ev:
                    self.assignments.append((time.monotonic(), ev["assigned"]))
                elif "p" in ev:
                    self.committed.append((ev["p"], ev["o"]))
                elif "closed" in ev:
                    self.closed = True
                self.cond.notify_all()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    @property
    def current(self) -> list[int]:
        with self.cond:
            return self.assignments[-1][1] if self.assignments else []

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def leave(self) -> None:
        """Close stdin: the worker closes its consumer (LeaveGroup) and exits."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill()


def wait_for(pred: Callable[[], bool], timeout: float, what: str, members: list[Member]) -> float:
    """Block until ``pred()`` holds, re-checking whenever a member reports; returns seconds."""
    start = time.monotonic()
    deadline = start + timeout
    while not pred():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            state = [(m.client, m.current, len(m.committed)) for m in members]
            raise AssertionError(f"timed out waiting for {what}: {state}")
        # Wake on any member's report (each has its own condition; poll them briefly).
        for m in members:
            with m.cond:
                m.cond.wait(min(remaining, 0.05))
    return time.monotonic() - start


def balanced(members: list[Member], partitions: int) -> bool:
    current = [m.current for m in members]
    flat = [p for c in current for p in c]
    return sorted(flat) == list(range(partitions)) and all(current)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str) -> None:
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(per_partition):
        for part in range(partitions):
            p.produce(topic, f"{tag}-{part}-{i}".encode(), partition=part)
    assert p.flush(30) == 0


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


# The coordinator's own account of why a member left the group (Kafka's log lines): a
# rebalance "removing member M: session timeout expired" after a crash, "...: the consumer is
# leaving the group" after a LeaveGroup.
REMOVAL = re.compile(
    r"Preparing to rebalance group (\S+) .*\(reason: removing member (\S+): (.*)\)")


def removals(caplog: pytest.LogCaptureFixture, group: str) -> list[tuple[str, str]]:
    """(member id, reason) of every member the coordinator removed from ``group``."""
    found = (REMOVAL.match(r.getMessage()) for r in caplog.records)
    return [(m.group(2), m.group(3)) for m in found if m and m.group(1) == group]


def session_timeouts(broker: EmbeddedBroker, group: str) -> dict[str, int]:
    """member id -> the session timeout the coordinator expires that member by."""

    async def read() -> dict[str, int]:
        members = broker.broker.group_coordinator.groups[group].members
        return {mid: m.session_timeout_ms for mid, m in members.items()}

    return dict(broker.run(read()))
