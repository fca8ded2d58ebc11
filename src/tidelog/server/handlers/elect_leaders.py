"""ElectLeaders (key 43). In a cluster the controller elects (Kafka's
processReplicaLeaderElection): PREFERRED moves leadership to the first replica when it is
live and in the ISR (PREFERRED_LEADER_NOT_AVAILABLE otherwise), UNCLEAN gives an offline
partition any live replica (ELIGIBLE_LEADERS_NOT_AVAILABLE when none); a partition already
led as asked answers ELECTION_NOT_NEEDED; a broker that is not the controller answers
NOT_CONTROLLER (the admin client asks the controller). On one broker every partition's
preferred (and only) replica is already its leader, so each existing partition answers
ELECTION_NOT_NEEDED and an unknown one UNKNOWN_TOPIC_OR_PARTITION. A null topic list means
every partition. v0 has no election type (preferred); 0 = preferred, 1 = unclean; any other
type is INVALID_REQUEST. Needs ALTER on the cluster."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.util.topic_partition import TopicPartition

from ..context import RequestContext
from ..security import AclOperation, ResourceType

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2
PREFERRED, UNCLEAN = 0, 1


def _asked(ctx: RequestContext, request: Any) -> list[tuple[str, list[int]]]:
    if request.topic_partitions is None:
        return [(i.name, list(range(i.partitions))) for i in ctx.broker.replica_manager.topics()]
    merged: dict[str, list[int]] = {}
    for t in request.topic_partitions:
        merged.setdefault(t.topic, []).extend(int(p) for p in t.partitions)
    return list(merged.items())


def _code(ctx: RequestContext, topic: str, partition: int) -> tuple[ErrorCode, str | None]:
    info = ctx.broker.replica_manager.topic(topic)
    if info is None or not 0 <= partition < info.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
    return ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."


async def _cluster_results(
    ctx: RequestContext, request: Any, election_type: int
) -> dict[TopicPartition, tuple[int, str | None]]:
    cluster = ctx.broker.cluster
    assert cluster is not None
    asked: list[TopicPartition] | None = None
    if request.topic_partitions is not None:
        asked = [TopicPartition(t.topic, int(p)) for t in request.topic_partitions for p in t.partitions]
    if not cluster.controller.is_active:
        return {tp: (int(ErrorCode.NOT_CONTROLLER), None) for tp in asked or []}
    return await cluster.controller.elect_leaders(asked, election_type)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    rcls = nested(cls, "replica_election_results")
    pcls = nested(rcls, "partition_result")
    election_type = int(getattr(request, "election_type", PREFERRED))
    top = ErrorCode.NONE
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster"):
        top = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    elif election_type not in (PREFERRED, UNCLEAN):
        top = ErrorCode.INVALID_REQUEST
    if not top and ctx.broker.cluster is not None:
        if not ctx.broker.cluster.controller.is_active and request.topic_partitions is None:
            top = ErrorCode.NOT_CONTROLLER
        else:
            by_topic: dict[str, list[Any]] = {}
            for tp, (code, msg) in (await _cluster_results(ctx, request, election_type)).items():
                by_topic.setdefault(tp.topic, []).append(
                    make(pcls, partition_id=tp.partition, error_code=code, error_message=msg))
            results = [make(rcls, topic=t, partition_result=tuple(ps)) for t, ps in by_topic.items()]
            return make(cls, throttle_time=0, error_code=top, replica_election_results=tuple(results))
    results = []
    for topic, partitions in _asked(ctx, request):
        parts = []
        for p in partitions:
            code, msg = (top, None) if top else _code(ctx, topic, p)
            parts.append(make(pcls, partition_id=p, error_code=code, error_message=msg))
        results.append(make(rcls, topic=topic, partition_result=tuple(parts)))
    return make(cls, throttle_time=0, error_code=top, replica_election_results=tuple(results))
