"""Group configs (KIP-848 and KIP-932 put them on the GROUP config resource, type 32):
per-group overrides of the broker's ``group.consumer.*`` / ``group.share.*`` settings,
altered with IncrementalAlterConfigs and described with DescribeConfigs, as Kafka's
GroupConfigManager, bounded by the broker's settings where Kafka bounds them. Kafka keeps
them in its cluster metadata: in a cluster they are kept in ZooKeeper
(``server/zk/group_configs.py``), on one broker in ``group-configs.json`` in the first log
dir. The mapping is replaced whole with every change (readers on other threads see one or
the other).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.group.config import GroupConfig
from tidelog.server.errors import ApiError
from tidelog.storage.checkpoints import write_atomically

log = logging.getLogger(__name__)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # IncrementalAlterConfigs' operations
GROUP_CONFIGS_FILE = "group-configs.json"
GROUP_CONFIG_SOURCE = 8  # DescribeConfigs' ConfigSource.GROUP_CONFIG
DEFAULT_CONFIG_SOURCE = 5
INT_TYPE, STRING_TYPE = 3, 2  # DescribeConfigs' ConfigType


@dataclass(frozen=True)
class GroupConfigValue:
    """One DescribeConfigs entry of a group."""

    name: str
    value: str
    source: int
    type: int
    doc: str


@dataclass(frozen=True)
class GroupConfigKey:
    default: Callable[[GroupConfig], int | str]
    doc: str
    choices: tuple[str, ...] = ()  # a string config's values; none: an int config
    limit: Callable[[GroupConfig], int] | None = None  # the broker's maximum
    floor: int = 1  # the least value

    @property
    def type(self) -> int:
        return STRING_TYPE if self.choices else INT_TYPE


KEYS: dict[str, GroupConfigKey] = {
    "consumer.session.timeout.ms": GroupConfigKey(
        lambda c: c.group_consumer_session_timeout_ms,
        "Session timeout of the group's consumer-protocol members.",
        limit=lambda c: max(c.group_consumer_session_timeout_ms, 60000)),
    "consumer.heartbeat.interval.ms": GroupConfigKey(
        lambda c: c.group_consumer_heartbeat_interval_ms,
        "Heartbeat interval of the group's consumer-protocol members.",
        limit=lambda c: max(c.group_consumer_heartbeat_interval_ms, 15000)),
    "share.session.timeout.ms": GroupConfigKey(
        lambda c: c.group_share_session_timeout_ms,
        "Session timeout of the share group's members.",
        limit=lambda c: max(c.group_share_session_timeout_ms, 60000)),
    "share.heartbeat.interval.ms": GroupConfigKey(
        lambda c: c.group_share_heartbeat_interval_ms,
        "Heartbeat interval of the share group's members.",
        limit=lambda c: max(c.group_share_heartbeat_interval_ms, 15000)),
    "share.record.lock.duration.ms": GroupConfigKey(
        lambda c: c.group_share_record_lock_duration_ms,
        "How long a member of the share group holds a record it acquired.",
        limit=lambda c: max(c.group_share_record_lock_duration_ms, 60000)),
    # Kafka's group.share.min/max.partition.max.record.locks default to 100 and 10000
    "share.partition.max.record.locks": GroupConfigKey(
        lambda c: c.group_share_partition_max_record_locks,
        "The most records of one share-partition acquired at once by the share group.",
        limit=lambda c: max(c.group_share_partition_max_record_locks, 10000), floor=100),
    "share.auto.offset.reset": GroupConfigKey(
        lambda c: "latest", "Where a new share-partition starts: latest or earliest.",
        choices=("latest", "earliest")),
    "share.isolation.level": GroupConfigKey(
        lambda c: "read_uncommitted",
        "read_committed: deliver up to the last stable offset and archive aborted records.",
        choices=("read_uncommitted", "read_committed")),
}


class GroupConfigStore:
    def __init__(self, config: GroupConfig) -> None:
        self.config = config
        self.overrides: dict[str, dict[str, str]] = {}
        self.path: Path | None = None

    @property
    def attached(self) -> bool:
        return self.path is not None

    def attach(self, log_dir: str | Path) -> None:
        """Read the stored overrides once (the handlers attach it on first use)."""
        if self.path is not None:
            return
        self.path = Path(log_dir) / GROUP_CONFIGS_FILE
        try:
            stored = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.error("ignoring unreadable %s: %s", self.path, exc)
            return
        self.overrides = {g: {k: str(v) for k, v in c.items() if k in KEYS}
                          for g, c in stored.items() if isinstance(c, dict)}

    def ensure_loaded(self, now_ms: int) -> None:
        """Read once at attach: nothing to retry (the ZooKeeper store retries)."""

    async def reread(self, group_id: str) -> None:
        """The group's configs as stored now (a cluster's store reads them again: a change
        made through another broker may not have been announced here yet)."""

    def get(self, group_id: str, name: str) -> int | str:
        key = KEYS[name]
        raw = self.overrides.get(group_id, {}).get(name)
        if raw is None:
            return key.default(self.config)
        return raw if key.choices else int(raw)

    def number(self, group_id: str, name: str) -> int:
        value = self.get(group_id, name)
        return value if isinstance(value, int) else int(value)

    def alter(self, group_id: str, ops: list[tuple[str, int, str | None]],
              validate_only: bool) -> None:
        """IncrementalAlterConfigs' SET and DELETE (these configs are no lists)."""
        if not group_id:
            raise ApiError(ErrorCode.INVALID_REQUEST, "The group id must not be empty.")
        new = dict(self.current(group_id))
        for name, op, value in ops:
            key = KEYS.get(name)
            if key is None:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
            if op == DELETE:
                new.pop(name, None)
            elif op == SET:
                new[name] = self._checked(name, key, value)
            elif op in (APPEND, SUBTRACT):
                raise ApiError(ErrorCode.INVALID_CONFIG,
                               f"Config value append is not allowed for config key: {name}")
            else:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
        if not validate_only:
            self._store(group_id, new)

    def current(self, group_id: str) -> dict[str, str]:
        """The group's stored overrides (a cluster's store reads them where they are kept)."""
        return dict(self.overrides.get(group_id, {}))

    def _store(self, group_id: str, new: dict[str, str]) -> None:
        overrides = dict(self.overrides)
        if new:
            overrides[group_id] = new
        else:
            overrides.pop(group_id, None)
        self.overrides = overrides
        self._save()

    def _checked(self, name: str, key: GroupConfigKey, value: str | None) -> str:
        if value is None:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for: {name}")
        if key.choices:
            if value.lower() not in key.choices:
                raise ApiError(ErrorCode.INVALID_CONFIG,
                               f"Invalid value {value} for configuration {name}: String must "
                               f"be one of: {', '.join(key.choices)}")
            return value.lower()
        try:
            n = int(value)
        except ValueError:
            raise ApiError(ErrorCode.INVALID_CONFIG,
                           f"Invalid value {value} for configuration {name}: Not a number "
                           "of type INT") from None
        top = key.limit(self.config) if key.limit is not None else n
        if not key.floor <= n <= top:
            raise ApiError(ErrorCode.INVALID_CONFIG,
                           f"Invalid value {value} for configuration {name}: Value must be "
                           f"between {key.floor} and {top}")
        return str(n)

    def _save(self) -> None:
        if self.path is None:
            return
        doc = json.dumps(self.overrides, indent=1, sort_keys=True).encode()
        write_atomically(self.path, doc)

    def entries(self, group_id: str) -> list[GroupConfigValue]:
        """DescribeConfigs: every group config, its source GROUP_CONFIG or DEFAULT_CONFIG."""
        mine = self.overrides.get(group_id, {})
        return [GroupConfigValue(name, str(self.get(group_id, name)),
                            GROUP_CONFIG_SOURCE if name in mine else DEFAULT_CONFIG_SOURCE,
                            key.type, key.doc)
                for name, key in sorted(KEYS.items())]
