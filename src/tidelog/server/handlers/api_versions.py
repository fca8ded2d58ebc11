"""ApiVersions (key 18): advertises exactly the registry's ranges (KIP-511 fallback is in
the connection, which answers unknown ApiVersions versions before decoding), and from v3 the
feature levels (KIP-584) this broker implements. GetTelemetrySubscriptions and PushTelemetry
are left out unless the broker serves /metrics (Kafka leaves them out without a client
metrics receiver); v3+ requests' client software name and version are kept on the
connection.

Finalized features are what clients gate behaviour on: ``group.version`` 1 tells a client
the KIP-848 consumer protocol (ConsumerGroupHeartbeat) exists, as in Kafka 4.x;
``transaction.version`` 2 would say KIP-890 transactions do, which tidelog does not
implement, so it stays at level 0, which Kafka leaves out of the finalized list. ``metadata.version`` is finalized at Kafka 4.1's
production level, the API level the handlers serve."""

from __future__ import annotations

from typing import Any

from tidelog.protocol.codec import response_class
from tidelog.protocol.kio_util import make, nested

from ..context import RequestContext
from ..telemetry import telemetry_enabled

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4
TELEMETRY_APIS = (71, 72)  # KIP-714: only with a receiver for what clients push (/metrics)
METADATA_VERSION_4_1_IV1 = 27
METADATA_VERSION_3_3_IV3 = 7  # the lowest Kafka 4.x bootstraps (MINIMUM_BOOTSTRAP_VERSION)
# name -> (min supported, max supported, finalized level)
FEATURES: dict[str, tuple[int, int, int]] = {
    "metadata.version": (METADATA_VERSION_3_3_IV3, METADATA_VERSION_4_1_IV1,
                         METADATA_VERSION_4_1_IV1),
    "group.version": (0, 1, 1),
    "transaction.version": (0, 0, 0),
}
# Kafka's epoch is the offset of the metadata record that set the levels; they never change
# here, so one fixed epoch is exact.
FINALIZED_FEATURES_EPOCH = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    cls = response_class(API_KEY, ctx.api_version)
    key_cls = nested(cls, "api_keys")
    if ctx.api_version >= 3:  # KIP-511: client metrics subscriptions match on these
        ctx.connection_state.client_software_name = request.client_software_name or ""
        ctx.connection_state.client_software_version = request.client_software_version or ""
    hidden = () if telemetry_enabled(ctx.broker) else TELEMETRY_APIS
    keys = tuple(
        make(key_cls, api_key=s.api_key, min_version=s.min_version, max_version=s.max_version)
        for s in ctx.broker.registry
        if s.api_key not in hidden
    )
    kw: dict[str, Any] = {}
    if ctx.api_version >= 3:
        kw = _features(cls, omit_min_zero=ctx.api_version < 4)
    return make(cls, error_code=0, api_keys=keys, throttle_time=0, **kw)


def _features(cls: Any, omit_min_zero: bool) -> dict[str, Any]:
    """Before v4 a supported range starting at 0 breaks older clients' parsers, so Kafka
    leaves those features out (KAFKA-17492)."""
    scls = nested(cls, "supported_features")
    fcls = nested(cls, "finalized_features")
    supported = tuple(
        make(scls, name=name, min_version=lo, max_version=hi)
        for name, (lo, hi, _) in FEATURES.items()
        if not (omit_min_zero and lo == 0)
    )
    finalized = tuple(
        make(fcls, name=name, min_version_level=level, max_version_level=level)
        for name, (_, _, level) in FEATURES.items()
        if level > 0
    )
    return {
        "supported_features": supported,
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": finalized,
    }
