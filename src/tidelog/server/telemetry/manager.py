"""KIP-714 client metrics on the broker, as Kafka's ClientMetricsManager answers them.

A client asks GetTelemetrySubscriptions with a zero client instance id and gets one; the
broker matches the client (client id, software name and version, source address and port)
against every subscription and answers the union of their metric prefixes, the lowest push
interval, a subscription id (CRC32C of the set and the interval, XORed with the instance
id's hash) and the codecs it accepts. The client then pushes OTLP metrics every interval
until it terminates. A push before its interval is THROTTLING_QUOTA_EXCEEDED, one naming
an old subscription id UNKNOWN_SUBSCRIPTION_ID (a subscription changed: the client asks
again), one larger than ``telemetry.max.bytes`` TELEMETRY_TOO_LARGE, one after the
terminating push INVALID_REQUEST, one that does not decode INVALID_RECORD.

What a client instance pushed is kept, for /metrics, until the instance has sent nothing
for max(60 s, 3 push intervals) (Kafka's cache expiry), or until the connection it last
spoke on is gone (Kafka's disconnect listener; looked for at most once a second). Everything
runs on the event loop.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tidelog.protocol.errors import ErrorCode
from tidelog.records import crc32c
from tidelog.util.clock import Clock

from .configs import ALL_SUBSCRIBED_METRICS, DEFAULT_INTERVAL_MS, ClientMetricsConfigStore
from .otlp import PayloadError, ReceivedMetrics, decode

ZSTD, LZ4, GZIP, SNAPPY = 4, 3, 1, 2
ACCEPTED_COMPRESSION_TYPES = (ZSTD, LZ4, GZIP, SNAPPY)  # Kafka's order of preference
KNOWN_COMPRESSION_TYPES = (0, GZIP, SNAPPY, LZ4, ZSTD)
DEFAULT_TELEMETRY_MAX_BYTES = 1024 * 1024  # telemetry.max.bytes
CACHE_EXPIRY_MS = 60 * 1000
CACHE_MAX_SIZE = 16384  # Kafka's: 16k client instances per broker, the stalest go first
DISCONNECT_SWEEP_MS = 1000
ZERO_UUID = uuid.UUID(int=0)
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Uuid.RESERVED: the zero id and this one


def _java_int(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


def uuid_hash(u: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode: the high and low longs XORed, folded to an int."""
    h = (u.int >> 64) ^ (u.int & 0xFFFFFFFFFFFFFFFF)
    return _java_int((h >> 32) ^ h)


def subscription_id(metrics: frozenset[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    text = "[" + ", ".join(sorted(metrics)) + "]" + str(interval_ms)
    return _java_int(crc32c(text.encode()) ^ uuid_hash(instance_id))


@dataclass
class ClientInstance:
    client_instance_id: uuid.UUID
    attributes: dict[str, str]  # the ``match`` attributes, from its first request
    subscription_id: int
    subscription_version: int
    metrics: frozenset[str]
    push_interval_ms: int
    last_get_ms: int | None = None
    last_push_ms: int | None = None
    got_since_push: bool = False  # a Get answered since the last accepted push
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE
    expires_ms: int = 0
    received: ReceivedMetrics = field(default_factory=ReceivedMetrics)
    connection: object | None = None  # the connection it last spoke on (its shared state)

    def may_get(self, now: int) -> bool:
        """ClientMetricsInstance.maybeUpdateGetRequestTimestamp."""
        last = max(self.last_get_ms or 0, self.last_push_ms or 0)
        if (self.last_get_ms is None and self.last_push_ms is None) or (
                now - last >= self.push_interval_ms):
            self.got_since_push, self.last_get_ms = True, now
            return True
        return False

    def may_push(self, now: int) -> bool:
        """maybeUpdatePushRequestTimestamp: the first push after a Get is always on time
        (clients jitter the interval), later ones need a whole interval."""
        ok = self.got_since_push or self.last_push_ms is None or (
            now - self.last_push_ms >= self.push_interval_ms)
        if ok:
            self.got_since_push, self.last_push_ms = False, now
        return ok


@dataclass(frozen=True)
class SubscriptionAnswer:
    error: ErrorCode
    client_instance_id: uuid.UUID = ZERO_UUID
    subscription_id: int = 0
    push_interval_ms: int = 0
    metrics: tuple[str, ...] = ()
    accepted_compression_types: tuple[int, ...] = ()
    telemetry_max_bytes: int = 0


@dataclass(frozen=True)
class Push:
    client_instance_id: uuid.UUID | None
    subscription_id: int
    terminating: bool
    compression_type: int
    metrics: bytes


class ClientMetricsManager:
    def __init__(self, clock: Clock, *, telemetry_max_bytes: int = DEFAULT_TELEMETRY_MAX_BYTES,
                 cache_expiry_ms: int = CACHE_EXPIRY_MS) -> None:
        self.clock = clock
        self.telemetry_max_bytes = telemetry_max_bytes
        self.cache_expiry_ms = cache_expiry_ms
        self.configs: ClientMetricsConfigStore = ClientMetricsConfigStore()
        self.instances: dict[uuid.UUID, ClientInstance] = {}
        # the broker's open connections (their shared states), for the disconnect sweep
        self.live_connections: Callable[[], Iterable[object]] | None = None
        self._swept_ms = -DISCONNECT_SWEEP_MS
        self.throttled = 0
        self.unknown_subscription_requests = 0

    # ------------------------------------------------------------------ subscriptions
    @property
    def subscription_version(self) -> int:
        return self.configs.version

    def alter(self, name: str, ops: list[tuple[str, int, str | None]],
              validate_only: bool) -> None:
        self.configs.alter(name, ops, validate_only)

    def _instance(self, instance_id: uuid.UUID, attributes: dict[str, str],
                  now: int) -> ClientInstance:
        """The cached instance, re-evaluated when a subscription changed since it was made."""
        found = self.instances.get(instance_id)
        if found is None or found.subscription_version < self.subscription_version:
            attrs = found.attributes if found is not None else {
                **attributes, "client_instance_id": str(instance_id)}
            fresh = self._evaluate(instance_id, attrs)
            if found is not None:
                fresh.received = found.received
            elif len(self.instances) >= CACHE_MAX_SIZE:
                del self.instances[min(self.instances, key=lambda k: self.instances[k].expires_ms)]
            found = self.instances[instance_id] = fresh
        found.expires_ms = now + max(self.cache_expiry_ms, 3 * found.push_interval_ms)
        return found

    def _evaluate(self, instance_id: uuid.UUID, attrs: dict[str, str]) -> ClientInstance:
        # the version before the subscriptions: a store replaces its mapping, then moves the
        # version (on another thread in a cluster), so a change made meanwhile is evaluated
        # again at the next request instead of being stamped as seen
        version = self.subscription_version
        interval = DEFAULT_INTERVAL_MS
        metrics: set[str] = set()
        for sub in self.configs.subscriptions():
            if sub.matches(attrs):
                metrics |= sub.metrics
                interval = min(interval, sub.interval_ms)
        if ALL_SUBSCRIBED_METRICS in metrics:
            metrics = {ALL_SUBSCRIBED_METRICS}
        subscribed = frozenset(metrics)
        return ClientInstance(instance_id, attrs, subscription_id(subscribed, interval, instance_id),
                              version, subscribed, interval)

    def expire(self) -> None:
        now = self.clock.milliseconds()
        self.configs.ensure_loaded(now)
        for key in [k for k, i in self.instances.items() if i.expires_ms <= now]:
            del self.instances[key]
        if self.live_connections is not None and now - self._swept_ms >= DISCONNECT_SWEEP_MS:
            self._swept_ms = now
            live = {id(c) for c in self.live_connections()}
            for key in [k for k, i in self.instances.items()
                        if i.connection is not None and id(i.connection) not in live]:
                del self.instances[key]

    # ------------------------------------------------------------------ requests
    def get_subscriptions(self, instance_id: uuid.UUID | None, attributes: dict[str, str],
                          connection: object | None = None) -> SubscriptionAnswer:
        self.expire()
        now = self.clock.milliseconds()
        if instance_id is None or instance_id == ZERO_UUID:
            instance_id = uuid.uuid4()
            while instance_id in self.instances or instance_id == METADATA_TOPIC_ID:
                instance_id = uuid.uuid4()
        inst = self._instance(instance_id, attributes, now)
        inst.connection = connection
        # a client told its subscription or codec is stale asks again at once (KIP-714)
        exempt = inst.last_error in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                     ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
        if not inst.may_get(now) and not exempt:
            self.throttled += 1
            return SubscriptionAnswer(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        if exempt:
            inst.got_since_push, inst.last_get_ms = True, now
        inst.last_error = ErrorCode.NONE
        return SubscriptionAnswer(ErrorCode.NONE, instance_id, inst.subscription_id,
                                  inst.push_interval_ms, tuple(sorted(inst.metrics)),
                                  ACCEPTED_COMPRESSION_TYPES, self.telemetry_max_bytes)

    def push(self, req: Push, attributes: dict[str, str],
             connection: object | None = None) -> ErrorCode:
        self.expire()
        if req.client_instance_id is None or req.client_instance_id in (ZERO_UUID,
                                                                        METADATA_TOPIC_ID):
            return ErrorCode.INVALID_REQUEST
        inst = self._instance(req.client_instance_id, attributes, self.clock.milliseconds())
        inst.connection = connection
        error = self._validate(inst, req)
        inst.terminating = inst.terminating or req.terminating
        if error == ErrorCode.NONE and req.metrics:
            try:
                inst.received.apply(decode(req.compression_type, req.metrics,
                                           self.telemetry_max_bytes))
            except PayloadError:
                error = ErrorCode.INVALID_RECORD
        inst.last_error = error
        return error

    def _validate(self, inst: ClientInstance, req: Push) -> ErrorCode:
        if inst.terminating:
            return ErrorCode.INVALID_REQUEST
        if not inst.may_push(self.clock.milliseconds()) and not req.terminating:
            self.throttled += 1
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if req.subscription_id != inst.subscription_id:
            self.unknown_subscription_requests += 1
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if req.compression_type not in KNOWN_COMPRESSION_TYPES:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if len(req.metrics) > self.telemetry_max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE
