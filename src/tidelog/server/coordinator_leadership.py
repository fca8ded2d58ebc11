"""Coordinators move with the leadership of their internal topics (Kafka's
KafkaApis.handleLeaderAndIsrRequest onLeadershipChange and handleStopReplicaRequest).

After a LeaderAndIsr, each ``__consumer_offsets`` partition this broker now leads is loaded
by the group coordinator and each one it now follows is unloaded; the same for
``__transaction_state`` and the transaction coordinator, and for ``__share_group_state``
and the share coordinator. A data partition this broker no longer leads drops its
share-partitions (their next leader reads their state back). A StopReplica unloads what it
stops. A broker whose coordinators start after it joined the cluster loads the partitions it
leads by then (``elect_led_partitions``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from tidelog.server.group import election as group_election
from tidelog.server.group.records import OFFSETS_TOPIC
from tidelog.server.group.share import election as share_election
from tidelog.server.group.share.records import SHARE_STATE_TOPIC
from tidelog.server.txn import election as txn_election
from tidelog.server.txn.records import TRANSACTION_STATE_TOPIC
from tidelog.util.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tidelog.server.group.coordinator import GroupCoordinator
    from tidelog.server.replica_manager import ReplicaManager
    from tidelog.server.txn.coordinator import TransactionCoordinator

# loads in flight (the loop keeps only weak references to tasks)
_LOADS: set[asyncio.Task[None]] = set()


class CoordinatorHost(Protocol):
    @property
    def group_coordinator(self) -> GroupCoordinator | None: ...

    @property
    def txn_coordinator(self) -> TransactionCoordinator | None: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...


def _keep(task: asyncio.Task[None]) -> None:
    _LOADS.add(task)
    task.add_done_callback(_LOADS.discard)


def on_leadership_change(broker: CoordinatorHost, new_leaders: Iterable[TopicPartition],
                         new_followers: Iterable[TopicPartition]) -> None:
    """Kafka's onLeadershipChange: elect for the new leaders, resign for the new followers."""
    group, txn = broker.group_coordinator, broker.txn_coordinator
    for tp in new_leaders:
        if tp.topic == OFFSETS_TOPIC and group is not None:
            _keep(group_election.on_election(group, tp.partition))
        elif tp.topic == TRANSACTION_STATE_TOPIC and txn is not None:
            _keep(txn_election.on_election(txn, tp.partition))
        elif tp.topic == SHARE_STATE_TOPIC and group is not None and \
                group.share.state_coordinator is not None:
            _keep(share_election.on_election(group.share.state_coordinator, tp.partition))
    on_resignation(broker, new_followers)


def on_resignation(broker: CoordinatorHost, tps: Iterable[TopicPartition]) -> None:
    """Unload the internal partitions this broker no longer leads (or no longer hosts)."""
    group, txn = broker.group_coordinator, broker.txn_coordinator
    tps = list(tps)
    for tp in tps:
        if tp.topic == OFFSETS_TOPIC and group is not None:
            group_election.on_resignation(group, tp.partition)
        elif tp.topic == TRANSACTION_STATE_TOPIC and txn is not None:
            txn_election.on_resignation(txn, tp.partition)
        elif tp.topic == SHARE_STATE_TOPIC and group is not None and \
                group.share.state_coordinator is not None:
            share_election.on_resignation(group.share.state_coordinator, tp.partition)
    if group is not None and tps:
        group.share.drop_partitions(set(tps))


def elect_led_partitions(broker: CoordinatorHost) -> None:
    """At coordinator start in a cluster: own nothing, then load what is led here now."""
    group, txn = broker.group_coordinator, broker.txn_coordinator
    rm = broker.replica_manager
    if group is not None:
        group.manager.loading.clear()
        group.manager.owned.clear()
    if txn is not None:
        txn.state.loading.clear()
        txn.state.owned.clear()
    if group is not None and group.share.state_coordinator is not None:
        group.share.state_coordinator.loading.clear()
        group.share.state_coordinator.owned.clear()
    internal = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC)
    led = [tp for tp, p in list(rm.partitions.items()) if tp.topic in internal and p.is_leader]
    on_leadership_change(broker, led, ())
