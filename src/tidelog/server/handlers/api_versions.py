"""ApiVersions (key 18): advertises exactly the registry's ranges (KIP-511 fallback is in
the connection, which answers unknown ApiVersions versions before decoding)."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    key_cls = nested(cls, "api_keys")
    keys = tuple(
        make(key_cls, api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
        for s in ctx.broker.registry
    )
    return make(cls, error_code=0, api_keys=keys, throttle_time=0, finalized_features_epoch=-1)
