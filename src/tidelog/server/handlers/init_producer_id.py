"""InitProducerId (key 22). Without a transactional id: a fresh producer id (from a durably
reserved block, so ids are never reused after a crash) with epoch 0 — Kafka "blindly
accepts" the request even when the client passes its current id/epoch. With one: the
transaction coordinator bumps the id's epoch, fencing older producers, aborting a
transaction they left open (answered CONCURRENT_TRANSACTIONS, the client retries), and
rotating the producer id when the epoch is exhausted (KIP-360)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, ms
from tidelog.server.coordinator.transaction.wiring import replicated, txn_coordinator_for
from tidelog.server.security.types import AclOperation, ResourceType

from ..context import RequestContext

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    tid = request.transactional_id
    if tid is None:
        # Kafka: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
        if not (ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER,
                              "kafka-cluster")
                or ctx.authorize_by_resource_type(AclOperation.WRITE, ResourceType.TOPIC)):
            return make(cls, throttle_time=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        producer_id=-1, producer_epoch=-1)
        rm = ctx.broker.replica_manager
        return make(cls, throttle_time=0, error_code=0,
                    producer_id=rm.allocate_producer_id(), producer_epoch=0)
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        err, pid, epoch = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1
    else:
        pid_in = int(getattr(request, "producer_id", -1))
        epoch_in = int(getattr(request, "producer_epoch", -1))
        expected = (pid_in, epoch_in) if pid_in != -1 and epoch_in != -1 else None
        coord = txn_coordinator_for(ctx.broker)
        res = coord.init_producer_id(tid, ms(request.transaction_timeout), expected)
        err, pid, epoch = res.error, res.producer_id, res.producer_epoch
        if err == ErrorCode.NONE and tid:
            err = await replicated(coord, tid)
            if err != ErrorCode.NONE:
                pid, epoch = -1, -1
        if err == ErrorCode.PRODUCER_FENCED and ctx.api_version < 4:
            err = ErrorCode.INVALID_PRODUCER_EPOCH  # older clients don't know PRODUCER_FENCED
    return make(cls, throttle_time=0, error_code=err, producer_id=pid, producer_epoch=epoch)
