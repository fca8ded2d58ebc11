"""``tidelog groups --type share`` (kafka-share-groups.sh's options) and ``--list --type``
against a real broker and real confluent-kafka ShareConsumers: list with types and states,
describe offsets / members / state, reset offsets (refused while a member is there, planned
with --dry-run, applied with --execute and then honoured by a new consumer), delete offsets,
delete the group."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from test_groups_support import create_topic

from tidelog.cli.main import main
from tidelog.client.kafka_client import KafkaClient, TopicPartition
from tidelog.testing.embedded import EmbeddedBroker

TOPIC = "work-queue"
GROUP = "sg-cli"


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker({"offsets.topic.num.partitions": "3",
                         "group.share.heartbeat.interval.ms": "250"}) as b:
        create_topic(b.bootstrap_servers, TOPIC, 2)
        p = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(6):
            p.produce(TOPIC, b"job-%d" % i, partition=0)
        assert p.flush(30) == 0
        yield b


def _run(capsys: pytest.CaptureFixture[str], b: EmbeddedBroker, *args: str
         ) -> tuple[int, str, str]:
    rc = main(["groups", "--bootstrap-server", b.bootstrap_servers, *args])
    out, err = capsys.readouterr()
    return rc, out, err


def _rows(out: str, first: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines() if line.split()[:1] == [first]]


def _share_consumer(b: EmbeddedBroker) -> Any:
    c = ShareConsumer({"bootstrap.servers": b.bootstrap_servers, "group.id": GROUP,
                       "client.id": "cli-worker", "share.acknowledgement.mode": "explicit"})
    c.subscribe([TOPIC])
    return c


def _take(c: Any, n: int) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        got += [m for m in c.poll(0.1) if m.error() is None]
    return got


def _until(fn: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not fn():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _set_earliest(b: EmbeddedBroker) -> None:
    body = {"resources": [{"resource_type": 32, "resource_name": GROUP, "configs": [
        {"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]}],
        "validate_only": False}
    with KafkaClient(b.bootstrap_servers) as kc:
        assert int(kc.any_connection().call(44, 1, body).responses[0].error_code) == 0


def test_share_group_cli(capsys: pytest.CaptureFixture[str], broker: EmbeddedBroker) -> None:
    b = broker
    _set_earliest(b)
    with KafkaClient(b.bootstrap_servers) as kc:  # a classic group, to list beside it
        kc.commit_offsets("classic-cli", {TopicPartition(TOPIC, 1): 0})
    c = _share_consumer(b)
    records = _take(c, 6)
    assert sorted(m.offset() for m in records) == list(range(6))
    for m in records:
        c.acknowledge(m, AcknowledgeType.ACCEPT)
    c.commit_sync(10)

    rc, out, _ = _run(capsys, b, "--list", "--type")
    assert rc == 0 and out.splitlines()[0].split() == ["GROUP", "TYPE"]
    assert {tuple(r) for r in _rows(out, GROUP) + _rows(out, "classic-cli")} == {
        (GROUP, "Share"), ("classic-cli", "Classic")}
    rc, out, _ = _run(capsys, b, "--list", "--type", "share", "--state")
    assert _rows(out, GROUP) == [[GROUP, "Share", "Stable"]] and "classic-cli" not in out
    rc, out, _ = _run(capsys, b, "--list", "--state", "empty")
    assert "classic-cli" in out and GROUP not in out

    rc, _, err = _run(capsys, b, "--describe", "--group", GROUP)  # as a consumer group
    assert rc == 1 and f"'{GROUP}' is a share group: use --type share." in err
    rc, out, _ = _run(capsys, b, "--type", "share", "--describe", "--group", GROUP, "--offsets")
    assert rc == 0 and out.splitlines()[0].split() == [
        "GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]
    assert [r[1:3] + r[4:] for r in _rows(out, GROUP)] == [
        [TOPIC, "0", "6", "0"], [TOPIC, "1", "0", "0"]]
    rc, out, _ = _run(capsys, b, "--type", "share", "--describe", "--group", GROUP, "--members")
    [member] = _rows(out, GROUP)
    assert member[3:5] == ["cli-worker", "2"] and member[6] == f"{TOPIC}:0,{TOPIC}:1"
    rc, out, _ = _run(capsys, b, "--type", "share", "--describe", "--group", GROUP, "--state")
    [state] = _rows(out, GROUP)
    assert state[2] == "Stable" and state[-1] == "1"

    rc, _, err = _run(capsys, b, "--type", "share", "--reset-offsets", "--group", GROUP,
                      "--topic", TOPIC, "--to-earliest", "--execute")
    assert rc == 1 and f"Share group '{GROUP}' is not empty." in err
    c.close()
    _until(lambda: _run(capsys, b, "--type", "share", "--describe", "--group", GROUP,
                          "--state")[1].count("Empty") == 1, "the group to empty")

    rc, out, _ = _run(capsys, b, "--type", "share", "--reset-offsets", "--group", GROUP,
                      "--topic", f"{TOPIC}:0", "--to-earliest", "--dry-run")
    assert _rows(out, GROUP) == [[GROUP, TOPIC, "0", "0"]]
    rc, out, _ = _run(capsys, b, "--type", "share", "--describe", "--group", GROUP)
    assert _rows(out, GROUP)[0][4:] == ["6", "0"]  # a dry run changes nothing
    rc, out, _ = _run(capsys, b, "--type", "share", "--reset-offsets", "--group", GROUP,
                      "--topic", f"{TOPIC}:0", "--to-datetime", "2001-01-01T00:00:00.000",
                      "--execute")
    assert rc == 0 and _rows(out, GROUP) == [[GROUP, TOPIC, "0", "0"]]
    rc, out, _ = _run(capsys, b, "--type", "share", "--describe", "--group", GROUP)
    assert _rows(out, GROUP)[0][4:] == ["0", "6"]
    rc, out, _ = _run(capsys, b, "--type", "share", "--reset-offsets", "--group", GROUP,
                      "--topic", f"{TOPIC}:0", "--to-offset", "4", "--execute")
    assert rc == 0 and _rows(out, GROUP) == [[GROUP, TOPIC, "0", "4"]]
    again = _share_consumer(b)
    redelivered = _take(again, 2)
    assert sorted((m.partition(), m.offset()) for m in redelivered) == [(0, 4), (0, 5)]
    for m in redelivered:
        again.acknowledge(m, AcknowledgeType.ACCEPT)
    again.commit_sync(10)
    again.close()
    _until(lambda: _run(capsys, b, "--type", "share", "--describe", "--group", GROUP,
                          "--state")[1].count("Empty") == 1, "the group to empty again")

    rc, out, _ = _run(capsys, b, "--type", "share", "--delete-offsets", "--group", GROUP,
                      "--topic", TOPIC)
    assert rc == 0 and _rows(out, TOPIC) == [[TOPIC, "Successful"]]
    rc, out, _ = _run(capsys, b, "--type", "share", "--describe", "--group", GROUP)
    assert _rows(out, GROUP) == []
    rc, out, _ = _run(capsys, b, "--type", "share", "--delete", "--group", GROUP)
    assert rc == 0 and f"Deletion of group '{GROUP}': Successful" in out
    rc, _, err = _run(capsys, b, "--type", "share", "--describe", "--group", GROUP)
    assert rc == 1 and f"Share group '{GROUP}' does not exist." in err
