"""AlterClientQuotas (key 49): set or remove quota values per entity (user, client-id, their
defaults; ip with connection_creation_rate), validated as Kafka's controller does (unknown
key, non-positive or non-integral byte rate, bad entity combination: INVALID_REQUEST), stored
durably and applied at once to the byte-rate quotas. validate_only checks without storing.
Needs ALTER_CONFIGS on the cluster."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..quota.store import QuotaEntity, QuotaError, entity, validate
from ..quota.wiring import quota_manager
from ..security import AclOperation, ResourceType

API_KEY = 49
MIN_VERSION = 0
MAX_VERSION = 1


def _change(entry: Any) -> tuple[QuotaEntity, dict[str, float | None]]:
    ent = entity((e.entity_type, e.entity_name) for e in entry.entity)
    ops: dict[str, float | None] = {}
    for op in entry.ops:
        if op.key in ops:
            raise QuotaError(f"Duplicate quota key {op.key} not updating quota for entity")
        value = None if op.remove else float(op.value)
        validate(ent, op.key, value)
        ops[op.key] = value
    return ent, ops


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    ecls = nested(cls, "entries")
    dcls = nested(ecls, "entity")
    allowed = ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, "kafka-cluster")
    results = []
    changes = []
    for entry in request.entries:
        code, msg = ErrorCode.NONE, None
        if not allowed:
            code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        else:
            try:
                changes.append(_change(entry))
            except QuotaError as exc:
                code, msg = ErrorCode.INVALID_REQUEST, str(exc)
        results.append(make(ecls, error_code=code, error_message=msg, entity=tuple(
            make(dcls, entity_type=e.entity_type, entity_name=e.entity_name)
            for e in entry.entity)))
    if changes and not request.validate_only:
        quota_manager(ctx.broker).store.alter(changes)
    return make(cls, throttle_time=0, entries=tuple(results))
