"""LeaderAndIsr (key 4): the controller makes this broker leader or follower of partitions
(Kafka's KafkaApis.handleLeaderAndIsrRequest -> ReplicaManager.becomeLeaderOrFollower).

Fenced first: CLUSTER_ACTION, then the broker epoch (STALE_BROKER_EPOCH), then the
controller epoch (STALE_CONTROLLER_EPOCH for the whole request when older than the newest
seen). Each partition's state applies only at a newer leader epoch (an older or equal one is
answered STALE_CONTROLLER_EPOCH for that partition, as Kafka does); new followers stop
fetching and fetch from their new leader, new leaders stop fetching. Versions 5-7 (topic ids).

Requests apply one at a time, in arrival order (Kafka's replicaStateChangeLock); the logs
of partitions new here are made on the log-creation thread while the event loop serves
every other request, and the answer goes once they exist (``replica_manager_lai.py``)."""

from __future__ import annotations

import uuid
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..cluster.partition_state import LeaderAndIsrPartitionState
from ..context import RequestContext
from ..coordinator.leadership import on_leadership_change
from ..replica_manager_lai import LeaderAndIsrResult
from .controller_requests import controller_request_error

API_KEY = 4
MIN_VERSION = 5
MAX_VERSION = 7


def _states(request: Any) -> tuple[list[LeaderAndIsrPartitionState], dict[str, uuid.UUID]]:
    states: list[LeaderAndIsrPartitionState] = []
    topic_ids: dict[str, uuid.UUID] = {}
    for t in request.topic_states:
        name = str(t.topic_name)
        if t.topic_id is not None and t.topic_id.int != 0:
            topic_ids[name] = t.topic_id
        for p in t.partition_states:
            states.append(LeaderAndIsrPartitionState(
                topic_name=name,
                partition_index=int(p.partition_index),
                controller_epoch=int(p.controller_epoch),
                leader=int(p.leader),
                leader_epoch=int(p.leader_epoch),
                isr=tuple(int(b) for b in p.isr),
                partition_epoch=int(p.partition_epoch),
                replicas=tuple(int(b) for b in p.replicas),
                adding_replicas=tuple(int(b) for b in p.adding_replicas),
                removing_replicas=tuple(int(b) for b in p.removing_replicas),
                is_new=bool(p.is_new),
                leader_recovery_state=int(getattr(p, "leader_recovery_state", 0)),
            ))  # fmt: skip
    return states, topic_ids


def _response(cls: type, request: Any, error: ErrorCode, errors: dict[Any, ErrorCode]) -> Any:
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partition_errors")
    topics = []
    for t in request.topic_states:
        parts = tuple(
            make(pcls, partition_index=p.partition_index,
                 error_code=errors.get((str(t.topic_name), int(p.partition_index)), error))
            for p in t.partition_states
        )  # fmt: skip
        topics.append(make(tcls, topic_id=t.topic_id, partition_errors=parts))
    return make(cls, error_code=error, topics=tuple(topics))


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    error = controller_request_error(ctx, int(request.broker_epoch))
    if error != ErrorCode.NONE:
        return _response(cls, request, error, {})
    states, topic_ids = _states(request)
    replication = ctx.broker.replication
    if replication is not None:  # where the new leaders are, before following them
        replication.fetcher_manager.update_live_leaders(
            {int(b.broker_id): (str(b.host_name), int(b.port)) for b in request.live_leaders}
        )
    def applied(result: LeaderAndIsrResult) -> None:  # under the state change, whatever
        if result.error == ErrorCode.NONE:  # becomes of this request (its connection closed)
            on_leadership_change(ctx.broker, result.new_leaders, result.new_followers)

    # one state change at a time; the logs of new partitions made off the loop first
    result = await ctx.broker.replica_manager.apply_leader_and_isr(
        int(request.controller_id), int(request.controller_epoch), states, topic_ids, applied
    )
    if result.error != ErrorCode.NONE:
        return _response(cls, request, result.error, {})
    errors = {(tp.topic, tp.partition): e for tp, e in result.errors.items()}
    return _response(cls, request, ErrorCode.NONE, errors)
