"""AlterPartition (key 56): a partition leader asks the controller to change its ISR
(Kafka's tryProcessAlterPartition). The controller checks the broker epoch, the leader and
partition epochs and that every new ISR member is alive, writes the state znode at its
zkVersion and answers the committed state. Only the active controller answers; others say
NOT_CONTROLLER. Needs CLUSTER_ACTION on the cluster (brokers only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..security import AclOperation, ResourceType

if TYPE_CHECKING:  # the controller (kazoo) is imported by the first AlterPartition it answers
    from ..controller.broker_requests import AlterPartitionItem, AlterPartitionResult

API_KEY = 56
MIN_VERSION = 2
MAX_VERSION = 3


def _isr(p: Any) -> tuple[int, ...]:
    with_epochs = getattr(p, "new_isr_with_epochs", None)
    if with_epochs is not None:
        return tuple(int(b.broker_id) for b in with_epochs)
    return tuple(int(b) for b in p.new_isr)


def _partition(pcls: type, index: int, r: AlterPartitionResult) -> Any:
    s = r.state
    if s is None:
        return make(pcls, partition_index=index, error_code=r.error_code, leader_id=-1,
                    leader_epoch=-1, isr=(), leader_recovery_state=0, partition_epoch=-1)  # fmt: skip
    return make(pcls, partition_index=index, error_code=r.error_code, leader_id=s.leader,
                leader_epoch=s.leader_epoch, isr=s.isr,
                leader_recovery_state=s.leader_recovery_state, partition_epoch=s.zk_version)  # fmt: skip


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, "kafka-cluster"):
        return make(cls, throttle_time=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, topics=())
    cluster = ctx.broker.cluster
    if cluster is None or not cluster.controller.is_active:
        return make(cls, throttle_time=0, error_code=ErrorCode.NOT_CONTROLLER, topics=())
    from ..controller.broker_requests import AlterPartitionItem

    controller = cluster.controller
    names = {tid: name for name, tid in controller.context.topic_ids.items()}
    items: list[AlterPartitionItem] = []
    unknown: dict[Any, list[int]] = {}
    for t in request.topics:
        name = names.get(t.topic_id)
        for p in t.partitions:
            if name is None:
                unknown.setdefault(t.topic_id, []).append(int(p.partition_index))
                continue
            items.append(AlterPartitionItem(
                TopicPartition(name, int(p.partition_index)), int(p.leader_epoch), _isr(p),
                int(p.partition_epoch), int(p.leader_recovery_state),
            ))  # fmt: skip
    error, results = await controller.alter_partition(
        int(request.broker_id), int(request.broker_epoch), items
    )
    if error != ErrorCode.NONE:
        return make(cls, throttle_time=0, error_code=error, topics=())
    by_topic: dict[str, list[Any]] = {}
    for tp, r in results.items():
        by_topic.setdefault(tp.topic, []).append(_partition(pcls, tp.partition, r))
    topics = [make(tcls, topic_id=controller.context.topic_ids.get(name), partitions=tuple(ps))
              for name, ps in by_topic.items()]  # fmt: skip
    for tid, parts in unknown.items():
        topics.append(make(tcls, topic_id=tid, partitions=tuple(
            make(pcls, partition_index=i, error_code=ErrorCode.UNKNOWN_TOPIC_ID, leader_id=-1,
                 leader_epoch=-1, isr=(), leader_recovery_state=0, partition_epoch=-1)
            for i in parts)))  # fmt: skip
    return make(cls, throttle_time=0, error_code=ErrorCode.NONE, topics=tuple(topics))
