"""One cluster id: every broker of a ZooKeeper cluster answers Metadata (v2+) and
DescribeCluster with the id in ``/cluster/id``, before and after the controller moves, and so
does a broker restarted afterwards. Checked with librdkafka (``list_topics().cluster_id``,
``describe_cluster()``) and with raw Metadata v7 and DescribeCluster v0 requests to each
broker."""

from __future__ import annotations

from typing import Any

from confluent_kafka.admin import AdminClient
from replication_support import wait_for

from tidelog.client.conn import BrokerConnection
from tidelog.server.zk import data as z
from tidelog.testing import EmbeddedCluster

METADATA, DESCRIBE_CLUSTER = 3, 60


def raw(cluster: EmbeddedCluster, broker_id: int, api_key: int, version: int, body: dict[str, object]) -> Any:
    conn = BrokerConnection("127.0.0.1", cluster.brokers[broker_id].port, client_id="t", timeout_s=10)
    try:
        return conn.call(api_key, version, body)
    finally:
        conn.close()


def check_every_broker(cluster: EmbeddedCluster, cluster_id: str, controller: int) -> None:
    for b, proc in sorted(cluster.brokers.items()):
        if not proc.running:
            continue
        # raw Metadata v7 to this broker alone (the controller id says its image is current)
        wait_for(lambda b=b: raw(cluster, b, METADATA, 7, {"topics": []}).controller_id == controller,
                 30, f"broker {b} knows controller {controller}")  # fmt: skip
        md = raw(cluster, b, METADATA, 7, {"topics": [], "allow_auto_topic_creation": False})
        assert md.cluster_id == cluster_id, (b, md.cluster_id)
        dc = raw(cluster, b, DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
        assert (dc.error_code, dc.cluster_id, dc.controller_id) == (0, cluster_id, controller), b
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{proc.port}"})
        assert admin.list_topics(timeout=10).cluster_id == cluster_id, b
        assert admin.describe_cluster(request_timeout=10).result(10).cluster_id == cluster_id, b


def test_every_broker_answers_the_cluster_id_of_zookeeper(tidelog_cluster: EmbeddedCluster) -> None:
    cluster = tidelog_cluster
    data, _ = cluster.zk.get_data(z.CLUSTER_ID_PATH)
    assert data is not None
    cluster_id = z.decode_cluster_id(data)
    assert len(cluster_id) == 22  # a base64 UUID, as Kafka's
    controller = cluster.wait_for_controller()
    check_every_broker(cluster, cluster_id, controller)

    cluster.kill(controller)  # its session expires; another broker takes over
    new_controller = cluster.wait_for_controller(other_than=controller)
    check_every_broker(cluster, cluster_id, new_controller)

    cluster.start_broker(controller)  # back, with the id it finds in ZooKeeper
    cluster.wait_for_metadata()
    check_every_broker(cluster, cluster_id, new_controller)
