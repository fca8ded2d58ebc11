"""Client metrics subscriptions (KIP-714): the CLIENT_METRICS config resource (type 16), one
per subscription name, with Kafka's ClientMetricsConfigs keys ``metrics`` (metric name
prefixes, ``*`` for all), ``interval.ms`` (push interval, 100 ms to 1 h, default 5 min) and
``match`` (``attribute=regex`` client selectors). Altered with IncrementalAlterConfigs,
described with DescribeConfigs, listed with ListConfigResources; persisted in
``client-metrics-configs.json`` in the first log dir (Kafka keeps them in its metadata).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from tidelog.protocol.errors import ErrorCode
from tidelog.server.errors import ApiError
from tidelog.storage.checkpoints import write_atomically

log = logging.getLogger(__name__)

CLIENT_METRICS = 16  # ConfigResource.Type.CLIENT_METRICS
CLIENT_METRICS_CONFIGS_FILE = "client-metrics-configs.json"
SUBSCRIPTION_METRICS, PUSH_INTERVAL_MS, CLIENT_MATCH_PATTERN = "metrics", "interval.ms", "match"
ALL_SUBSCRIBED_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3600000
# what a ``match`` pattern may select on (ClientMetricsConfigs.ALLOWED_MATCH_PARAMS)
MATCH_PARAMS = ("client_instance_id", "client_id", "client_software_name",
                "client_software_version", "client_source_address", "client_source_port")
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs' operations
CLIENT_METRICS_CONFIG_SOURCE, DEFAULT_CONFIG_SOURCE = 7, 5  # DescribeConfigs' ConfigSource
INT_TYPE, LIST_TYPE = 3, 7  # DescribeConfigs' ConfigType
DOCS = {
    SUBSCRIPTION_METRICS: "Subscription metrics list",
    PUSH_INTERVAL_MS: "Push interval in milliseconds",
    CLIENT_MATCH_PATTERN: "Client match pattern list",
}
LIST_KEYS = (SUBSCRIPTION_METRICS, CLIENT_MATCH_PATTERN)


@dataclass(frozen=True)
class Subscription:
    """One subscription as the manager applies it (ClientMetricsManager.SubscriptionInfo)."""

    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, attributes: dict[str, str]) -> bool:
        """Every pattern matches its attribute in full (no patterns: every client)."""
        for param, pattern in self.match:
            value = attributes.get(param)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


@dataclass(frozen=True)
class ConfigValue:
    """One DescribeConfigs entry of a subscription."""

    name: str
    value: str
    source: int
    type: int
    doc: str


def _items(raw: str) -> list[str]:
    return [x.strip() for x in raw.split(",") if x.strip()]


def parse_match(patterns: list[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """``param=regex`` pairs (ClientMetricsConfigs.parseMatchingPatterns)."""
    out = []
    for pattern in patterns:
        pair = pattern.split("=")
        if len(pair) != 2 or pair[0].strip() not in MATCH_PARAMS:
            raise ApiError(ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}")
        try:
            out.append((pair[0].strip(), re.compile(pair[1].strip())))
        except re.error:
            raise ApiError(ErrorCode.INVALID_CONFIG,
                           f"Illegal client matching pattern: {pattern}") from None
    return tuple(out)


def validate(name: str, props: dict[str, str]) -> None:
    """ClientMetricsConfigs.validate: known keys, interval bounds, well-formed patterns."""
    if not name:
        raise ApiError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in props:
        if key not in DOCS:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"Unknown client metrics configuration: {key}")
    if PUSH_INTERVAL_MS in props:
        try:
            interval = int(props[PUSH_INTERVAL_MS])
        except ValueError:
            raise ApiError(ErrorCode.INVALID_CONFIG,
                           f"Invalid value {props[PUSH_INTERVAL_MS]} for configuration "
                           f"{PUSH_INTERVAL_MS}: Not a number of type INT") from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"Invalid value {interval} for {PUSH_INTERVAL_MS}, interval must be "
                           "between 100 and 3600000 (1 hour)")
    parse_match(_items(props.get(CLIENT_MATCH_PATTERN, "")))


def subscription(name: str, props: dict[str, str]) -> Subscription:
    return Subscription(
        name=name,
        metrics=frozenset(_items(props.get(SUBSCRIPTION_METRICS, ""))),
        interval_ms=int(props.get(PUSH_INTERVAL_MS, DEFAULT_INTERVAL_MS)),
        match=parse_match(_items(props.get(CLIENT_MATCH_PATTERN, ""))),
    )


def apply_ops(current: dict[str, str], ops: list[tuple[str, int, str | None]]) -> dict[str, str]:
    """IncrementalAlterConfigs on one subscription: SET, DELETE, and APPEND / SUBTRACT on
    the list keys."""
    out = dict(current)
    for key, op, value in ops:
        if key not in DOCS:
            raise ApiError(ErrorCode.INVALID_REQUEST,
                           f"Unknown client metrics configuration: {key}")
        if op == DELETE:
            out.pop(key, None)
        elif op == SET:
            if value is None:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for: {key}")
            out[key] = value
        elif op in (APPEND, SUBTRACT):
            if key not in LIST_KEYS:
                raise ApiError(ErrorCode.INVALID_CONFIG,
                               f"Config value append is not allowed for config key: {key}")
            items = _items(out.get(key, ""))
            new = _items(value or "")
            items = items + [x for x in new if x not in items] if op == APPEND else [
                x for x in items if x not in new]
            out[key] = ",".join(items)
        else:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
    return out


class ClientMetricsConfigStore:
    """Subscription name -> its configs, persisted. ``version`` moves with every change (the
    manager re-evaluates its client instances when it does)."""

    def __init__(self) -> None:
        self.configs: dict[str, dict[str, str]] = {}
        self.version = 0
        self.path: Path | None = None

    def attach(self, log_dir: str | Path) -> None:
        """Read the stored subscriptions once."""
        if self.path is not None:
            return
        self.path = Path(log_dir) / CLIENT_METRICS_CONFIGS_FILE
        try:
            stored = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.error("ignoring unreadable %s: %s", self.path, exc)
            return
        for name, props in stored.items():
            clean = {k: str(v) for k, v in props.items()} if isinstance(props, dict) else {}
            try:
                validate(name, clean)
            except ApiError as exc:
                log.error("ignoring client metrics subscription %r: %s", name, exc)
                continue
            self.configs[name] = clean
        self.version += 1

    def alter(self, name: str, ops: list[tuple[str, int, str | None]],
              validate_only: bool) -> bool:
        """Apply ``ops``; True when the stored subscriptions changed."""
        current = self.current(name)
        new = apply_ops(current, ops)
        validate(name, new)
        if validate_only or new == current:
            return False
        self._store(name, new)
        return True

    def current(self, name: str) -> dict[str, str]:
        return dict(self.configs.get(name, {}))

    def ensure_loaded(self, now_ms: int) -> None:
        """Read once at attach: nothing to retry (the ZooKeeper store retries)."""

    def _store(self, name: str, props: dict[str, str]) -> None:
        configs = dict(self.configs)
        if props:
            configs[name] = props
        else:
            configs.pop(name, None)  # every key deleted: no subscription
        self.configs = configs  # replaced whole: readers on other threads see one or the other
        self.version += 1
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        write_atomically(self.path, json.dumps(self.configs, indent=1, sort_keys=True).encode())

    def subscriptions(self) -> list[Subscription]:
        return [subscription(n, p) for n, p in sorted(self.configs.items())]

    def entries(self, name: str) -> list[ConfigValue]:
        """DescribeConfigs: all three keys, CLIENT_METRICS_CONFIG where set, else defaults."""
        if not name:
            raise ApiError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
        props = self.configs.get(name, {})
        defaults = {SUBSCRIPTION_METRICS: "", PUSH_INTERVAL_MS: str(DEFAULT_INTERVAL_MS),
                    CLIENT_MATCH_PATTERN: ""}
        return [ConfigValue(key, props.get(key, defaults[key]),
                            CLIENT_METRICS_CONFIG_SOURCE if key in props else DEFAULT_CONFIG_SOURCE,
                            LIST_TYPE if key in LIST_KEYS else INT_TYPE, DOCS[key])
                for key in sorted(DOCS)]
