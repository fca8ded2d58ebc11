"""Unclean leader election on ZooKeeper and three ``tidelog serve`` processes, as Kafka does
it. A topic with replication factor 3 and min.insync.replicas=1; both followers are SIGKILLed
so the ISR shrinks to the leader, which acknowledges more acks=all records alone; then the
leader is SIGKILLed and a stale follower comes back.

* Unclean off: the partition stays offline (leader -1, OfflinePartitionsCount 1) while only
  out-of-sync replicas live, and once an ISR member returns it leads and nothing is lost.
* Unclean turned on for the topic while it is offline (AlterConfigs, a change in
  ``/config/topics``): the stale follower leads at once, UncleanLeaderElectionsPerSec counts
  one, the checker names exactly the acknowledged records lost (those only the old leader
  had), and after the old leader returns and truncates to the new leader's log every replica
  is byte-identical.
"""

from __future__ import annotations

import re
import urllib.request

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource
from jepsen_support import History, check, final_log
from replication_support import create_topic, log_bytes, partition_dir, states, wait_for

from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer
from tidelog.util.topic_partition import TopicPartition

TOPIC = "unclean"
UNCLEAN_METRIC = "kafka_controller_controllerstats_uncleanleaderelections_total"
OFFLINE_METRIC = "kafka_controller_kafkacontroller_offlinepartitionscount"
CONFIG = {"http.listeners": "http://127.0.0.1:0", "auto.leader.rebalance.enable": "false",
          "unclean.leader.election.enable": "false"}  # fmt: skip


def metrics(cluster: EmbeddedCluster, broker_id: int) -> dict[str, float]:
    """One broker's /metrics (its HTTP port read from its log), the unlabelled series."""
    lines = "".join(cluster.brokers[broker_id].output)
    url = re.findall(r"HTTP listener on (http://[0-9.]+:\d+)", lines)[-1]
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    return {ln.split()[0]: float(ln.split()[1]) for ln in text.splitlines()
            if ln and not ln.startswith("#") and "{" not in ln}  # fmt: skip


def produce(cluster: EmbeddedCluster, history: History, values: list[bytes]) -> None:
    """acks=all; each delivery report with an offset is an acknowledgement."""
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                  "message.timeout.ms": 30_000, "topic.metadata.refresh.interval.ms": 500})  # fmt: skip

    def report(err: KafkaError | None, msg: object) -> None:
        value = msg.value()  # type: ignore[attr-defined]
        if err is None:
            history.acked[value] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]
        else:
            history.failed.add(value)

    for v in values:
        history.sent.add(v)
        p.produce(TOPIC, value=v, partition=0, on_delivery=report)
    assert p.flush(60) == 0
    missing = [v for v in values if v not in history.acked]
    assert not missing, f"not acknowledged: {missing[:3]}..."


def values(producer: int, start: int, n: int) -> list[bytes]:
    return [f"p{producer}-{seq:07d}".encode() for seq in range(start, start + n)]


def metadata_leader(cluster: EmbeddedCluster) -> int | None:
    """Partition 0's leader in Metadata; None while the answering broker's metadata has no
    partition yet (a broker just started, before the controller's UpdateMetadata)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    partitions = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    return int(partitions[0].leader) if 0 in partitions else None


def leader_alone_then_dead(cluster: EmbeddedCluster, history: History) -> TopicPartition:
    """Leader 1 with followers 2 and 3; A acknowledged by all three, the followers killed,
    B acknowledged by 1 alone (its ISR), then 1 killed and 2 (stale) restarted."""
    tp = create_topic(cluster, TOPIC, 1, config={"min.insync.replicas": "1"})[0]
    assert states(cluster, [tp])[tp].leader == 1
    produce(cluster, history, values(0, 0, 40))  # A
    cluster.kill(2)
    cluster.kill(3)
    wait_for(lambda: states(cluster, [tp])[tp].isr == (1,), 40, "ISR shrunk to the leader")
    produce(cluster, history, values(0, 40, 25))  # B: on broker 1 only
    cluster.kill(1)
    # the only broker, so the controller (not cluster.restart: librdkafka refuses the empty
    # metadata a lone broker answers before its controller has told it of any broker)
    cluster.brokers[2].start()
    wait_for(lambda: cluster.controller_id() == 2, 30, "broker 2 the controller")
    wait_for(lambda: metrics(cluster, 2)[OFFLINE_METRIC] == 1, 30, "partition offline")
    return tp


def assert_converged(cluster: EmbeddedCluster, tp: TopicPartition) -> None:
    wait_for(lambda: states(cluster, [tp])[tp].leader >= 0 and len(states(cluster, [tp])[tp].isr) == 3,
             60, "full ISR")  # fmt: skip
    leader_dir = partition_dir(cluster, states(cluster, [tp])[tp].leader, tp)
    wait_for(lambda: all(log_bytes(partition_dir(cluster, b, tp)) == log_bytes(leader_dir)
                         for b in (1, 2, 3)), 60, "replicas byte-identical")  # fmt: skip


def test_unclean_off_keeps_the_partition_offline_until_an_isr_member_returns(
    zookeeper_server: ZooKeeperServer,
) -> None:
    with EmbeddedCluster(brokers=3, zookeeper=zookeeper_server, config=CONFIG) as cluster:
        history = History()
        tp = leader_alone_then_dead(cluster, history)
        # both live replicas are out of sync; restart returns once every broker's metadata
        # shows 3, which the controller sends after its election attempt for the partition
        cluster.restart(3)
        controller = cluster.wait_for_controller()
        # the new controller took dead 1 offline (Kafka's removeReplicasFromIsr at failover):
        # no leader, and 1 stays recorded as the last ISR member, the one that may lead
        s = states(cluster, [tp])[tp]
        assert (s.leader, s.isr) == (-1, (1,))
        assert metadata_leader(cluster) == -1
        m = metrics(cluster, controller)
        assert (m[OFFLINE_METRIC], m[UNCLEAN_METRIC]) == (1, 0)
        cluster.restart(1)  # the ISR member returns and leads
        wait_for(lambda: metadata_leader(cluster) == 1, 30, "1 leads again")
        produce(cluster, history, values(1, 0, 10))
        assert_converged(cluster, tp)
        verdict = check(history, final_log(cluster, TOPIC, 1))
        assert verdict.ok and verdict.acked == 75, verdict
        assert sum(metrics(cluster, b)[UNCLEAN_METRIC] for b in (1, 2, 3)) == 0


def test_unclean_on_elects_the_stale_follower_and_counts_the_loss(
    zookeeper_server: ZooKeeperServer,
) -> None:
    with EmbeddedCluster(brokers=3, zookeeper=zookeeper_server, config=CONFIG) as cluster:
        history = History()
        tp = leader_alone_then_dead(cluster, history)
        b_values = set(values(0, 40, 25))
        wait_for(lambda: metadata_leader(cluster) == -1, 30, "the partition offline in Metadata")
        assert metrics(cluster, 2)[UNCLEAN_METRIC] == 0
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        resource = ConfigResource("topic", TOPIC, set_config={
            "min.insync.replicas": "1", "unclean.leader.election.enable": "true"})  # fmt: skip
        for f in admin.alter_configs([resource]).values():
            f.result(30)
        wait_for(lambda: metrics(cluster, 2)[UNCLEAN_METRIC] == 1, 30, "an unclean election")
        s = states(cluster, [tp])[tp]
        assert (s.leader, s.isr) == (2, (2,))
        wait_for(lambda: metadata_leader(cluster) == 2, 30, "2 leads in the metadata")
        produce(cluster, history, values(1, 0, 10))  # C: on the new leader
        cluster.restart(1)  # the old leader truncates its B away
        cluster.restart(3)
        assert_converged(cluster, tp)
        verdict = check(history, final_log(cluster, TOPIC, 1))
        print(f"unclean election: {len(verdict.lost)} of {verdict.acked} acknowledged records "
              f"lost: {sorted(v.decode() for v in verdict.lost)}")  # fmt: skip
        assert set(verdict.lost) == b_values  # exactly what only the old leader had
        assert not (verdict.duplicated or verdict.wrong_offset or verdict.reordered
                    or verdict.unknown_values), verdict  # fmt: skip
        assert verdict.acked == 75
        assert sum(metrics(cluster, b)[UNCLEAN_METRIC] for b in (1, 2, 3)) == 1
