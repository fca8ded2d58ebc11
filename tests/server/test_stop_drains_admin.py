"""Stopping the broker lets a topic creation already under way finish before the logs close:
no log is made and no topic published after the log manager's clean-shutdown marker, and
the topic is there, whole, after a restart."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.testing import EmbeddedBroker

TOPIC = "stopped-mid-create"
PARTITIONS = 300


def _dirs(log_dir: Path) -> int:
    return sum(1 for p in log_dir.iterdir() if p.name.startswith(TOPIC + "-"))


def test_stop_waits_for_a_create_in_flight(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    b = EmbeddedBroker(log_dir=tmp_path)
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS)], operation_timeout=60)
    deadline = time.monotonic() + 60
    while _dirs(tmp_path) == 0:  # the admin thread has begun making the logs
        assert time.monotonic() < deadline, "the create never started"
        time.sleep(0.001)
    b.stop()
    assert _dirs(tmp_path) == PARTITIONS  # finished before the logs closed
    said = [r.getMessage() for r in caplog.records]
    published = next(i for i, m in enumerate(said) if m.startswith(f"created topic {TOPIC}"))
    closing = next(i for i, m in enumerate(said) if m.startswith("Shutting down the log manager"))
    assert published < closing, "the topic was published after the logs closed"
    with EmbeddedBroker(log_dir=tmp_path) as again:
        info = again.broker.replica_manager.topic(TOPIC)
        assert info is not None and info.partitions == PARTITIONS
    assert _dirs(tmp_path) == PARTITIONS  # start-up found no strays to remove
