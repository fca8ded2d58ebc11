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
from typing import TYPE_CHECKING, Protocol

from tidelog.util.topic_partition import TopicPartition

from .runtime import CoordinatorRuntime

if TYPE_CHECKING:
    from tidelog.server.group.coordinator import GroupCoordinator
    from tidelog.server.replica_manager import ReplicaManager


class CoordinatorHost(Protocol):
    @property
    def coordinator_runtime(self) -> CoordinatorRuntime: ...

    @property
    def group_coordinator(self) -> GroupCoordinator | None: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...


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
