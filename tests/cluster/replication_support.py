"""Helpers of the replication tests (tests/cluster/test_replication_*.py): a topic created and
waited for, partition states read from ZooKeeper, and the byte comparison of replicas'
segment files up to the high watermark."""

from __future__ import annotations

import re
import struct
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AdminClient

from tidelog.server.zk import data as z
from tidelog.testing import EmbeddedCluster
from tidelog.util.topic_partition import TopicPartition

_LOG_OVERHEAD = 12


def wait_for(cond: Callable[[], object], timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout} s")
        time.sleep(0.05)


def create_topic(
    cluster: EmbeddedCluster,
    name: str,
    partitions: int,
    replication_factor: int = 3,
    config: dict[str, str] | None = None,
    last: int | None = None,
) -> list[TopicPartition]:
    """Written to ZooKeeper as Kafka's admin tools do (the controller picks it up), the
    replicas placed round-robin over brokers 1..N (broker ``last``, when given, moved to the
    end of each list: the preferred leader of none); returns once every partition has a
    leader and a full ISR, and every live broker's metadata shows the leaders."""
    ids = sorted(cluster.brokers)
    placed = [[ids[(p + i) % len(ids)] for i in range(replication_factor)]
              for p in range(partitions)]  # fmt: skip
    if last is not None:
        placed = [[b for b in r if b != last] + [last] if last in r else r for r in placed]
    assignment = {p: z.ReplicaAssignment(tuple(r)) for p, r in enumerate(placed)}
    cluster.zk.create_topic(name, uuid.uuid4(), assignment, config or {})
    tps = [TopicPartition(name, p) for p in range(partitions)]
    wait_for(lambda: all_have_full_isr(cluster, tps, replication_factor), what="full ISRs")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    def leaders_known() -> bool:
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        return (topic is not None and topic.error is None and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values()))  # fmt: skip

    wait_for(leaders_known, 30, "leaders in the metadata")
    return tps


def states(
    cluster: EmbeddedCluster, tps: list[TopicPartition]
) -> dict[TopicPartition, z.LeaderIsrAndControllerEpoch]:
    return cluster.zk.get_topic_partition_states(tps)


def all_have_full_isr(cluster: EmbeddedCluster, tps: list[TopicPartition], size: int) -> bool:
    found = states(cluster, tps)
    return len(found) == len(tps) and all(
        s.leader >= 0 and len(s.isr) == size for s in found.values()
    )


def partition_dir(cluster: EmbeddedCluster, broker_id: int, tp: TopicPartition) -> Path:
    assert cluster.directory is not None
    return cluster.directory / f"broker-{broker_id}" / f"{tp.topic}-{tp.partition}"


def log_bytes(d: Path) -> bytes:
    """All segment files of a partition, in offset order, concatenated."""
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def metric(cluster: EmbeddedCluster, broker_id: int, series: str) -> float:
    """One series of a broker's /metrics (``http.listeners`` set; its port read from its
    log); 0 when absent."""
    out = "".join(cluster.brokers[broker_id].output)
    url = re.findall(r"HTTP listener on (http://[0-9.]+:\d+)", out)[-1]
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def prefix_up_to(data: bytes, end_offset: int) -> bytes:
    """The whole batches of ``data`` whose offsets are all below ``end_offset``."""
    pos = 0
    while pos + _LOG_OVERHEAD <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        size = _LOG_OVERHEAD + length
        if length <= 0 or pos + size > len(data):
            break
        last_delta = struct.unpack_from(">i", data, pos + 23)[0]
        if base + last_delta >= end_offset:
            break
        pos += size
    return data[:pos]
