"""Fetch from follower (KIP-392) on ZooKeeper and three ``tidelog serve`` processes in racks
a, b and c with ``replica.selector.class`` = Kafka's RackAwareReplicaSelector. A
confluent-kafka consumer with ``client.rack`` reads every record, and the brokers' own counts
of the record bytes they sent consumers (BytesOutPerSec of the topic; what followers fetch
is ReplicationBytesOutPerSec, as in Kafka) show where it read: from the follower in its rack, not from the other one. When that
follower dies, the consumer goes back to the leader and still reads every record. Metadata
still names the leader, and ListOffsets is answered there."""

from __future__ import annotations

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from replication_support import create_topic, log_bytes, metric, partition_dir, states, wait_for

from tidelog.testing import EmbeddedCluster
from tidelog.testing.zookeeper import ZooKeeperServer

TOPIC = "ffr"
RACKS = {1: "a", 2: "b", 3: "c"}
CONFIG = {"http.listeners": "http://127.0.0.1:0", "auto.leader.rebalance.enable": "false",
          "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}  # fmt: skip


def bytes_out(cluster: EmbeddedCluster, broker_id: int) -> float:
    """The topic's BytesOutPerSec total: record bytes the broker sent consumers."""
    return metric(cluster, broker_id, 'kafka_server_brokertopicmetrics_bytesout_total{topic="ffr"}')


def produce(cluster: EmbeddedCluster, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 5})
    delivered: list[bytes] = []
    for v in values:
        p.produce(TOPIC, value=v, partition=0,
                  on_delivery=lambda err, msg: err is None and delivered.append(msg.value()))  # fmt: skip
    assert p.flush(60) == 0 and len(delivered) == len(values)


def consumer(cluster: EmbeddedCluster, rack: str) -> Consumer:
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"ffr-{rack}",
                  "client.rack": rack, "enable.auto.commit": False,
                  "topic.metadata.refresh.interval.ms": 1000})  # fmt: skip
    c.assign([KafkaTopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    return c


def read(c: Consumer, n: int, timeout: float = 60) -> list[bytes]:
    out: list[bytes] = []
    wait_for(lambda: _poll_into(c, out) >= n, timeout, f"{n} records read")
    return out


def _poll_into(c: Consumer, out: list[bytes]) -> int:
    for msg in c.consume(500, 0.2):
        if msg.error() is None:
            out.append(msg.value())
        else:
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
    return len(out)


def test_consumer_reads_from_the_follower_in_its_rack(zookeeper_server: ZooKeeperServer) -> None:
    with EmbeddedCluster(brokers=3, zookeeper=zookeeper_server, config=CONFIG, racks=RACKS) as cluster:
        tp = create_topic(cluster, TOPIC, 1)[0]
        assert states(cluster, [tp])[tp].leader == 1  # in rack a
        first = [f"v{i:05d}".encode() for i in range(2000)]
        produce(cluster, first)
        c = consumer(cluster, "b")
        assert read(c, len(first)) == first
        data = len(log_bytes(partition_dir(cluster, 1, tp)))
        assert bytes_out(cluster, 2) >= data  # every batch came from broker 2, in rack b
        assert bytes_out(cluster, 3) == 0.0
        assert bytes_out(cluster, 1) == 0.0  # the leader only named broker 2
        assert metric(cluster, 1, "kafka_server_brokertopicmetrics_replicationbytesout_total") >= 2 * data
        # ListOffsets at the leader: the end offset is the leader's
        assert c.get_watermark_offsets(KafkaTopicPartition(TOPIC, 0), timeout=10) == (0, len(first))

        # the rack's follower dies: the consumer goes back to the leader and reads on
        cluster.kill(2)
        more = [f"w{i:05d}".encode() for i in range(500)]
        produce(cluster, more)
        assert read(c, len(more), timeout=90) == more
        assert bytes_out(cluster, 1) > 0.0 and bytes_out(cluster, 3) == 0.0
        c.close()


def test_consumer_in_the_leaders_rack_reads_from_the_leader(zookeeper_server: ZooKeeperServer) -> None:
    with EmbeddedCluster(brokers=3, zookeeper=zookeeper_server, config=CONFIG, racks=RACKS) as cluster:
        tp = create_topic(cluster, TOPIC, 1)[0]
        assert states(cluster, [tp])[tp].leader == 1
        values = [f"v{i:05d}".encode() for i in range(1000)]
        produce(cluster, values)
        c = consumer(cluster, "a")
        assert read(c, len(values)) == values
        assert (bytes_out(cluster, 2), bytes_out(cluster, 3)) == (0.0, 0.0)
        assert bytes_out(cluster, 1) >= len(log_bytes(partition_dir(cluster, 1, tp)))
        c.close()
