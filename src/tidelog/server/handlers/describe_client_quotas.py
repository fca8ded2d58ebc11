"""DescribeClientQuotas (key 48): the stored quota entities matching the filter components —
match type 0 = that exact name, 1 = the type's default entity, 2 = any named (non-default)
entity; ``strict`` = only entities with no other component types. Needs DESCRIBE_CONFIGS on
the cluster, as in Kafka."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..quota.store import CLIENT_ID, IP, USER, QuotaEntity
from ..quota.wiring import quota_manager
from ..security import AclOperation, ResourceType

API_KEY = 48
MIN_VERSION = 0
MAX_VERSION = 1
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


class _BadFilter(ValueError):
    pass


def _filter(request: Any) -> dict[str, tuple[int, str | None]]:
    out: dict[str, tuple[int, str | None]] = {}
    for c in request.components:
        if c.entity_type in out:
            raise _BadFilter(f"Duplicate {c.entity_type} entity type in filter")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise _BadFilter(f"Unknown entity type {c.entity_type}")
        if c.match_type not in (EXACT, DEFAULT, SPECIFIED):
            raise _BadFilter(f"Unknown match type {c.match_type}")
        if c.match_type == EXACT and c.match is None:
            raise _BadFilter("Exact match requires a non-null match")
        out[c.entity_type] = (int(c.match_type), c.match)
    return out


def _matches(ent: QuotaEntity, wanted: dict[str, tuple[int, str | None]], strict: bool) -> bool:
    names = dict(ent)
    if strict and set(names) != set(wanted):
        return False
    for etype, (mtype, match) in wanted.items():
        if etype not in names:
            return False
        name = names[etype]
        if mtype == EXACT and name != match:
            return False
        if (mtype == DEFAULT) != (name is None):
            return False
    return True


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, "kafka-cluster"):
        return make(cls, throttle_time=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=None, entries=None)
    try:
        wanted = _filter(request)
    except _BadFilter as exc:
        return make(cls, throttle_time=0, error_code=ErrorCode.INVALID_REQUEST,
                    error_message=str(exc), entries=None)
    ecls = nested(cls, "entries")
    dcls = nested(ecls, "entity")
    vcls = nested(ecls, "values")
    store = quota_manager(ctx.broker).store
    entries = tuple(
        make(ecls,
             entity=tuple(make(dcls, entity_type=t, entity_name=n) for t, n in ent),
             values=tuple(make(vcls, key=k, value=v) for k, v in sorted(values.items())))
        for ent, values in sorted(store.entries.items(), key=lambda kv: repr(kv[0]))
        if _matches(ent, wanted, bool(request.strict))
    )
    return make(cls, throttle_time=0, error_code=0, error_message=None, entries=entries)
