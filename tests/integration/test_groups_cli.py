"""``tidelog groups`` against a real broker: list, describe with lag in messages and time,
offset resets (plan and execute), deletes."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from test_groups_support import Member, create_topic, wait_for

from tidelog.cli.main import main
from tidelog.client.kafka_client import KafkaClient, TopicPartition
from tidelog.testing.embedded import EmbeddedBroker

TOPIC = "cli-topic"
PARTS = 3
N = 10
STEP_MS = 100_000  # records are 100 s apart, so second-level timing noise cannot matter


@pytest.fixture(scope="module")
def env() -> Iterator[tuple[EmbeddedBroker, int]]:
    import confluent_kafka

    with EmbeddedBroker(
        {
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "500",
            "offsets.topic.num.partitions": "3",
        }
    ) as b:
        create_topic(b.bootstrap_servers, TOPIC, PARTS)
        base = int(time.time() * 1000) - 20 * STEP_MS
        p = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap_servers})
        for i in range(N):
            for part in range(PARTS):
                p.produce(TOPIC, f"v{i}".encode(), partition=part, timestamp=base + i * STEP_MS)
        assert p.flush(30) == 0
        yield b, base


def _run(capsys: pytest.CaptureFixture[str], b: EmbeddedBroker, *args: str) -> tuple[int, str, str]:
    rc = main(["groups", "--bootstrap-server", b.bootstrap_servers, *args])
    out, err = capsys.readouterr()
    return rc, out, err


def _committed(b: EmbeddedBroker, group: str) -> list[int]:
    with KafkaClient(b.bootstrap_servers) as c:
        got = c.committed_offsets(group, [TopicPartition(TOPIC, p) for p in range(PARTS)])
    return [got[TopicPartition(TOPIC, p)] for p in range(PARTS)]


def _commit(b: EmbeddedBroker, group: str, offset: int) -> None:
    with KafkaClient(b.bootstrap_servers) as c:
        c.commit_offsets(group, {TopicPartition(TOPIC, p): offset for p in range(PARTS)})


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines() if line.startswith("g-")]


def test_list_and_describe_lag(
    capsys: pytest.CaptureFixture[str], env: tuple[EmbeddedBroker, int]
) -> None:
    b, base = env
    _commit(b, "g-lag", 4)
    rc, out, _ = _run(capsys, b, "--list")
    assert rc == 0 and "g-lag" in out.split()
    before = int(time.time() * 1000)
    rc, out, _ = _run(capsys, b, "--describe", "--group", "g-lag")
    after = int(time.time() * 1000)
    assert rc == 0 and "has no active members" in out
    rows = _rows(out)
    assert [(r[1], r[2], r[3], r[4], r[5]) for r in rows] == [
        (TOPIC, str(p), "4", str(N), str(N - 4)) for p in range(PARTS)
    ]
    # the oldest unconsumed record (offset 4) was written at base + 4 steps
    for r in rows:
        assert before - (base + 4 * STEP_MS) <= int(r[6]) <= after - (base + 4 * STEP_MS)
    rc, out, _ = _run(capsys, b, "--describe", "--group", "g-lag", "--state")
    assert "Empty" in out


def test_reset_offsets_plans_and_executes(
    capsys: pytest.CaptureFixture[str], env: tuple[EmbeddedBroker, int]
) -> None:
    b, base = env
    g = "g-reset"
    _commit(b, g, 5)

    def plan(*how: str) -> list[int]:
        rc, out, err = _run(capsys, b, "--reset-offsets", "--group", g, "--topic", TOPIC, *how)
        assert rc == 0, err
        return [int(r[3]) for r in _rows(out)]

    assert plan("--to-earliest", "--dry-run") == [0, 0, 0]
    assert _committed(b, g) == [5, 5, 5]  # a dry run changes nothing
    assert plan("--to-latest") == [N] * PARTS  # neither flag: a dry run too
    assert _committed(b, g) == [5, 5, 5]
    assert plan("--shift-by", "-2", "--execute") == [3, 3, 3]
    assert _committed(b, g) == [3, 3, 3]
    assert plan("--shift-by", "100", "--dry-run") == [N] * PARTS  # clamped to the log end
    assert plan("--to-offset", "7", "--execute") == [7, 7, 7]
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((base + 2 * STEP_MS) / 1000)) + "Z"
    assert plan("--to-datetime", iso, "--dry-run") == [2, 2, 2]
    age_s = (int(time.time() * 1000) - (base + 5 * STEP_MS - STEP_MS // 2)) // 1000
    assert plan("--by-duration", f"PT{age_s}S", "--execute") == [5, 5, 5]
    assert _committed(b, g) == [5, 5, 5]
    rc, _out, _ = _run(
        capsys,
        b,
        "--reset-offsets",
        "--group",
        g,
        "--topic",
        f"{TOPIC}:1",
        "--to-earliest",
        "--execute",
    )
    assert rc == 0 and _committed(b, g) == [5, 0, 5]


def test_active_group_cannot_be_reset_or_deleted(
    capsys: pytest.CaptureFixture[str], env: tuple[EmbeddedBroker, int]
) -> None:
    b, _ = env
    g = "g-active"
    m = Member("confluent", b.bootstrap_servers, TOPIC, g, 3000)
    try:
        wait_for(lambda: len(m.committed) == N * PARTS, 60, "consumed", [m])
        rc, out, _ = _run(capsys, b, "--describe", "--group", g, "--members")
        assert rc == 0 and "cli-topic:0,cli-topic:1,cli-topic:2" in out
        rc, out, _ = _run(capsys, b, "--describe", "--group", g)
        rows = _rows(out)
        assert [r[5] for r in rows] == ["0"] * PARTS and all(
            r[7].startswith("rdkafka") for r in rows
        )
        rc, _, err = _run(
            capsys,
            b,
            "--reset-offsets",
            "--group",
            g,
            "--topic",
            TOPIC,
            "--to-earliest",
            "--execute",
        )
        assert rc == 1 and "inactive" in err and "Stable" in err
        rc, out, _ = _run(capsys, b, "--delete", "--group", g)
        assert "NON_EMPTY_GROUP" in out
        m.leave()
        rc, out, _ = _run(capsys, b, "--delete", "--group", g)
        assert "Successful" in out
        rc, out, _ = _run(capsys, b, "--list")
        assert g not in out.split()
        assert _committed(b, g) == [-1, -1, -1]
    finally:
        m.stop()


def test_delete_offsets(
    capsys: pytest.CaptureFixture[str], env: tuple[EmbeddedBroker, int]
) -> None:
    b, _ = env
    _commit(b, "g-deloff", 3)
    rc, out, _ = _run(capsys, b, "--delete-offsets", "--group", "g-deloff", "--topic", f"{TOPIC}:0")
    assert rc == 0 and "Successful" in out
    assert _committed(b, "g-deloff") == [-1, 3, 3]
