"""AlterUserScramCredentials (key 51): needs ALTER on the cluster. The client sends the
salted password (never the password); the broker derives StoredKey/ServerKey and persists
them. Validation and error codes as Kafka's ScramControlManager."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted,
)
from ..security.types import AclOperation, ResourceType

API_KEY = 51
MIN_VERSION = 0
MAX_VERSION = 0

Upsert = tuple[str, ScramMechanism, ScramCredential]


def _check_upsert(u: Any) -> tuple[int, str | None, Upsert | None]:
    mech = ScramMechanism.by_code(int(u.mechanism))
    if mech is None:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism", None
    if not u.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty", None
    if int(u.iterations) < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations", None
    if int(u.iterations) > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations", None
    if not u.salt or not u.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password are required", None
    cred = credential_from_salted(mech, bytes(u.salted_password), bytes(u.salt), int(u.iterations))
    return 0, None, (u.name, mech, cred)


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    rcls = nested(cls, "results")
    names = [d.name for d in request.deletions] + [u.name for u in request.upsertions]
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, "kafka-cluster"):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return make(cls, throttle_time=0, results=tuple(
            make(rcls, user=n, error_code=code, error_message=None) for n in dict.fromkeys(names)
        ))
    store = ctx.broker.credentials
    counts = Counter(names)
    outcome: dict[str, tuple[int, str | None]] = {}
    deletions: list[tuple[str, ScramMechanism]] = []
    upserts: list[Upsert] = []
    for d in request.deletions:
        mech = ScramMechanism.by_code(int(d.mechanism))
        if counts[d.name] > 1:
            outcome[d.name] = (ErrorCode.DUPLICATE_RESOURCE,
                               "A user credential cannot be altered twice in the same request")
        elif mech is None:
            outcome[d.name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif store.get(d.name, mech) is None:
            outcome[d.name] = (ErrorCode.RESOURCE_NOT_FOUND,
                               "Attempt to delete a user credential that does not exist")
        else:
            deletions.append((d.name, mech))
            outcome[d.name] = (ErrorCode.NONE, None)
    for u in request.upsertions:
        if counts[u.name] > 1:
            outcome[u.name] = (ErrorCode.DUPLICATE_RESOURCE,
                               "A user credential cannot be altered twice in the same request")
            continue
        checked = _check_upsert(u)
        outcome[u.name] = checked[:2]
        upsert = checked[2]
        if upsert is not None:
            upserts.append(upsert)
    if deletions or upserts:
        store.apply(upserts, deletions)
    results = tuple(make(rcls, user=n, error_code=c, error_message=m)
                    for n, (c, m) in outcome.items())
    return make(cls, throttle_time=0, results=results)
