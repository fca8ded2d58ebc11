"""`tidelog reassign` against three `tidelog serve` processes: --generate proposes, --execute
moves (with --throttle: the throttled-replica lists and broker rates set), --list shows the
moves, --verify reports and clears the throttles; a throttled move is held to the throttle
(it cannot finish faster than its rate allows), and the brokers' byte-rate metrics stay near
the throttle while it runs."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from replication_support import log_bytes, partition_dir, wait_for

from tidelog.cli.main import main
from tidelog.server.zk import data as z
from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer
from tidelog.util.topic_partition import TopicPartition

THROTTLE = 200_000  # B/s
RECORD = 1000
RECORDS = 2000  # 2 MB per partition


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MetricsCluster(EmbeddedCluster):
    """Each broker also serves /metrics."""

    def __init__(self, zookeeper: ZooKeeperServer) -> None:
        super().__init__(3, {"replication.quota.window.num": "2", "replica.fetch.max.bytes": "32768"},
                         zookeeper=zookeeper)  # fmt: skip
        self.http_ports = {b: _free_port() for b in (1, 2, 3)}

    def broker_props(self, broker_id: int) -> dict[str, str]:
        return {**super().broker_props(broker_id), "http.listeners": f"http://127.0.0.1:{self.http_ports[broker_id]}"}

    def metric(self, broker_id: int, name: str) -> float:
        url = f"http://127.0.0.1:{self.http_ports[broker_id]}/metrics"
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        found = re.search(rf"^{name} (\S+)$", text, re.M)
        assert found is not None, f"{name} not exported"
        return float(found.group(1))


@pytest.fixture
def cluster(zookeeper_server: ZooKeeperServer) -> Iterator[MetricsCluster]:
    with MetricsCluster(zookeeper_server) as c:
        yield c


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(["reassign", *args])
    captured = capsys.readouterr()
    return rc, captured.out + (captured.err if rc else "")


def _fill(cluster: EmbeddedCluster, topic: str, broker: int) -> TopicPartition:
    tp = TopicPartition(topic, 0)
    cluster.zk.create_topic(topic, uuid.uuid4(), {0: z.ReplicaAssignment((broker,))}, {})
    wait_for(lambda: tp in cluster.zk.get_topic_partition_states([tp]), 30, f"{topic} created")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20, "batch.size": 16384})
    for i in range(RECORDS):
        producer.produce(topic, value=(b"%08d" % i) * (RECORD // 8), partition=0)
        if i % 200 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    return tp


def _write(tmp_path: Path, name: str, parts: dict[TopicPartition, list[int]]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": tp.topic, "partition": tp.partition, "replicas": r} for tp, r in parts.items()]}))
    return str(path)


def _verify_until_done(capsys: pytest.CaptureFixture[str], bootstrap: str, plan: str,
                       during: list[str]) -> str:  # fmt: skip
    deadline = time.monotonic() + 120
    while True:
        rc, out = cli(capsys, "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", plan)
        assert rc == 0, out
        if "still in progress" not in out:
            return out
        during.append(out)
        assert time.monotonic() < deadline, out
        time.sleep(0.2)


def _configs(cluster: EmbeddedCluster, rtype: ResourceType, name: str) -> dict[str, str | None]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    [future] = admin.describe_configs([ConfigResource(rtype, name)]).values()
    return {k: e.value for k, e in future.result(30).items() if not e.is_default}


def test_generate_execute_verify_and_throttle(
    cluster: MetricsCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bootstrap = cluster.bootstrap_servers
    fast, slow = _fill(cluster, "fast", 1), _fill(cluster, "slow", 1)

    # --generate proposes an assignment over the brokers listed; nothing changes
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "fast"}]}))
    rc, out = cli(capsys, "--bootstrap-server", bootstrap, "--generate",
                  "--topics-to-move-json-file", str(topics), "--broker-list", "2")  # fmt: skip
    assert rc == 0, out
    current_json, proposed_json = out.split("Proposed partition reassignment configuration\n")
    assert json.loads(current_json.split("\n", 1)[1]) == {"version": 1, "partitions": [
        {"topic": "fast", "partition": 0, "replicas": [1], "log_dirs": ["any"]}]}  # fmt: skip
    proposed = json.loads(proposed_json)
    assert proposed["partitions"][0]["replicas"] == [2]

    # an unthrottled move of 2 MB
    fast_plan = tmp_path / "fast.json"
    fast_plan.write_text(proposed_json)
    rc, out = cli(capsys, "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", str(fast_plan))
    assert rc == 0 and "Successfully started partition reassignment for fast-0" in out, out
    assert '"replicas":[1]' in out  # the rollback JSON
    _verify_until_done(capsys, bootstrap, str(fast_plan), [])
    assert log_bytes(partition_dir(cluster, 2, fast)) and not partition_dir(cluster, 1, fast).exists()

    # the same data moved under a throttle: [1] -> [1, 3], broker 3 catching up
    slow_plan = _write(tmp_path, "slow.json", {slow: [1, 3]})
    started = time.monotonic()
    rc, out = cli(capsys, "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", slow_plan,
                  "--throttle", str(THROTTLE))  # fmt: skip
    assert rc == 0, out
    assert f"The inter-broker throttle limit was set to {THROTTLE} B/s" in out
    topic_conf = _configs(cluster, ResourceType.TOPIC, "slow")
    assert topic_conf["leader.replication.throttled.replicas"] == "0:1"
    assert topic_conf["follower.replication.throttled.replicas"] == "0:3"
    assert _configs(cluster, ResourceType.BROKER, "3")["follower.replication.throttled.rate"] == str(THROTTLE)
    rc, out = cli(capsys, "--bootstrap-server", bootstrap, "--list")
    assert "slow-0: replicas: 1,3. adding: 3." in out, out
    # the brokers' replication byte rates while it moves
    rates: list[tuple[float, float]] = []
    deadline = time.monotonic() + 120
    while "adding: 3." in cli(capsys, "--bootstrap-server", bootstrap, "--list")[1]:
        rates.append((cluster.metric(1, "kafka_server_leaderreplication_byte_rate"),
                      cluster.metric(3, "kafka_server_followerreplication_byte_rate")))
        assert time.monotonic() < deadline, "the throttled move did not complete"
        time.sleep(0.2)
    during: list[str] = []
    out = _verify_until_done(capsys, bootstrap, slow_plan, during)
    slow_s = time.monotonic() - started
    assert "Reassignment of partition slow-0 is completed." in out
    assert "Clearing topic-level throttles on topic slow" in out

    size = len(log_bytes(partition_dir(cluster, 1, slow)))
    assert size >= RECORDS * RECORD
    assert log_bytes(partition_dir(cluster, 3, slow)) == log_bytes(partition_dir(cluster, 1, slow))
    # the throttle held the move to about its rate (a floor the quota sets, not a measure
    # of the machine), and the brokers' own byte-rate metrics showed it while it ran
    assert slow_s >= size / (2 * THROTTLE), slow_s
    leader_rates = [r for r, _ in rates if r > 0]
    follower_rates = [r for _, r in rates if r > 0]
    assert leader_rates and follower_rates, rates
    assert max(follower_rates) < 3 * THROTTLE and max(leader_rates) < 3 * THROTTLE, rates
    # --verify removed the throttles
    assert "leader.replication.throttled.replicas" not in _configs(cluster, ResourceType.TOPIC, "slow")
    assert "follower.replication.throttled.rate" not in _configs(cluster, ResourceType.BROKER, "3")
    rc, out = cli(capsys, "--bootstrap-server", bootstrap, "--list")
    assert out.strip() == "No partition reassignments found."


def test_execute_refuses_bad_plans(
    cluster: MetricsCluster, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bootstrap = cluster.bootstrap_servers
    tp = _fill(cluster, "refused", 2)
    rc, out = cli(capsys, "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file",
                  _write(tmp_path, "unknown.json", {tp: [2, 9]}))  # fmt: skip
    assert rc == 1 and "Unknown broker id 9" in out
    rc, out = cli(capsys, "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file",
                  _write(tmp_path, "dup.json", {tp: [2, 2]}))  # fmt: skip
    assert rc == 1 and "duplicate" in out
    rc, out = cli(capsys, "--bootstrap-server", bootstrap, "--cancel", "--reassignment-json-file",
                  _write(tmp_path, "none.json", {tp: [1]}))  # fmt: skip
    assert rc == 0 and "None of the specified partition reassignments are active." in out
