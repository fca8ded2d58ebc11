"""Coordinators move with the leadership of their internal topics (Kafka's
KafkaApis.handleLeaderAndIsrRequest onLeadershipChange and handleStopReplicaRequest).

After a LeaderAndIsr the coordinator runtime loads each internal topic partition this broker
now leads and unloads each one it now follows, whichever coordinator registered the topic. A
data partition this broker no longer leads drops its share-partitions (their next leader
reads their state back). A StopReplica unloads what it stops. A broker whose coordinators
start after it joined the cluster loads the partitions it leads by then
(``elect_led_partitions``).
"""

from __future__ import annotations

from collections.abc import Iterable

from tidelog.util.topic_partition import TopicPartition

from .host import CoordinatorHost


def on_leadership_change(broker: CoordinatorHost, new_leaders: Iterable[TopicPartition],
                         new_followers: Iterable[TopicPartition]) -> None:
    """Kafka's onLeadershipChange: elect for the new leaders, resign for the new followers."""
    broker.coordinator_runtime.on_leadership_change(new_leaders, ())
    on_resignation(broker, new_followers)


def on_resignation(broker: CoordinatorHost, tps: Iterable[TopicPartition]) -> None:
    """Unload the internal partitions this broker no longer leads (or no longer hosts)."""
    tps = list(tps)
    runtime = broker.coordinator_runtime
    for tp in tps:
        runtime.schedule_unload(tp)
    group = broker.group_coordinator
    if group is not None and tps:
        group.share.drop_partitions(set(tps))


def elect_led_partitions(broker: CoordinatorHost) -> None:
    """At coordinator start in a cluster: own nothing, then load what is led here now."""
    runtime = broker.coordinator_runtime
    partitions = list(broker.replica_manager.partitions.items())
    runtime.elect(tp for tp, p in partitions if tp.topic in runtime.topics and p.is_leader)
