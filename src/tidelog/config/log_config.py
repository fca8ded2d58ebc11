"""Topic-level log configuration (Kafka's LogConfig): names, defaults, validation, synonyms.

Each topic config is declared once in ``LOG_CONFIG_DEF``; a topic's effective value is its
override, else the broker's value (given either under the topic name or under a broker
synonym such as ``log.segment.bytes``), else Kafka's default. Broker synonyms with units
(``log.roll.hours``, ``log.retention.minutes``) follow Kafka's precedence: the ``.ms`` name
wins over ``.minutes`` which wins over ``.hours``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from .core import (
    LONG_MAX,
    ConfigDef,
    ConfigError,
    DefaultValue,
    Validator,
    at_least,
    between,
    one_of,
    subset_of,
)
from .iceberg_config import DEFAULT_PARTITION_SPEC, DISABLED, DLQ_TABLE, canonical_topic_configs
from .iceberg_config import define_topic_keys as define_iceberg_topic_keys

COMPACT = "compact"
DELETE = "delete"
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

# Broker synonyms in priority order, each with the multiplier to the topic config's unit.
BROKER_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ),
    "retention.bytes": (("log.retention.bytes", 1),),
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "max.message.bytes": (("message.max.bytes", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "message.timestamp.difference.max.ms": (("log.message.timestamp.difference.max.ms", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "preallocate": (("log.preallocate", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
}


TOPIC_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.TopicNameStrategy"


def _gzip_level(name: str, v: Any) -> None:
    if v != -1 and not 1 <= v <= 9:
        raise ConfigError(name, v, "Value must be -1 or in [1, 9]")


def _d(
    cdef: ConfigDef, name: str, type_: str, default: DefaultValue, doc: str, v: Validator | None = None
) -> None:
    syn = tuple(s for s, _ in BROKER_SYNONYMS.get(name, ()))
    if name in ("compression.type", "min.insync.replicas", "unclean.leader.election.enable"):
        syn = (name,)
    if name.startswith("compression.") and name.endswith(".level"):
        syn = (name,)
    cdef.define(name, type_, default, doc, v, syn)


def _define_segment_keys(c: ConfigDef) -> None:
    """Kafka's segment, flush, retention and cleaner keys (TopicConfig)."""
    _d(c, "segment.bytes", "int", 1073741824, "Size of one log segment file.", at_least(14))
    _d(c, "segment.ms", "long", 604800000, "Roll a new segment after this time.", at_least(1))
    _d(c, "segment.jitter.ms", "long", 0, "Max random jitter subtracted from segment.ms.",
       at_least(0))
    _d(c, "segment.index.bytes", "int", 10485760, "Size of the offset and time index files.",
       at_least(4))
    _d(c, "index.interval.bytes", "int", 4096, "Bytes between offset index entries.",
       at_least(0))
    _d(c, "flush.messages", "long", LONG_MAX, "Force an fsync after this many messages. "
       "On the broker's produce path the fsync is a group commit: appends of one event-loop "
       "turn share one fsync per log, and the HW and acks wait for it (1 = durable mode).",
       at_least(1))
    _d(c, "flush.ms", "long", LONG_MAX, "Force an fsync after this much time.", at_least(0))
    _d(c, "retention.ms", "long", 604800000, "Delete segments older than this; -1 = forever.",
       at_least(-1))
    _d(c, "retention.bytes", "long", -1, "Delete old segments beyond this size; -1 = no limit.")
    _d(c, "local.retention.ms", "long", -2, "Local retention with tiered storage (-2 = "
       "retention.ms).", at_least(-2))
    _d(c, "local.retention.bytes", "long", -2, "Local size limit with tiered storage (-2 = "
       "retention.bytes).", at_least(-2))
    _d(c, "cleanup.policy", "list", DELETE, "delete and/or compact.", subset_of(COMPACT, DELETE))
    _d(c, "min.cleanable.dirty.ratio", "double", 0.5, "Dirty ratio that makes a log cleanable.",
       between(0, 1))
    _d(c, "min.compaction.lag.ms", "long", 0, "Minimum age before a record can be compacted.",
       at_least(0))
    _d(c, "max.compaction.lag.ms", "long", LONG_MAX, "Maximum age before a record is compacted.",
       at_least(1))
    _d(c, "delete.retention.ms", "long", 86400000, "How long tombstones are kept.", at_least(0))
    _d(c, "file.delete.delay.ms", "long", 60000, "Delay before deleting a .deleted file.",
       at_least(0))


def _define_record_keys(c: ConfigDef) -> None:
    """Kafka's record size, timestamp, compression and replication keys (TopicConfig)."""
    _d(c, "max.message.bytes", "int", 1048588, "Largest record batch size allowed.",
       at_least(0))
    _d(c, "message.timestamp.type", "string", CREATE_TIME, "CreateTime or LogAppendTime.",
       one_of(CREATE_TIME, LOG_APPEND_TIME))
    _d(c, "message.timestamp.difference.max.ms", "long", LONG_MAX,
       "Deprecated: max difference between record and broker time.", at_least(0))
    _d(c, "message.timestamp.before.max.ms", "long", LONG_MAX,
       "Max allowed age of a CreateTime timestamp.", at_least(0))
    _d(c, "message.timestamp.after.max.ms", "long", LONG_MAX,
       "Max allowed future skew of a CreateTime timestamp.", at_least(0))
    _d(c, "compression.type", "string", "producer", "Final compression of the topic's data.",
       one_of(*COMPRESSION_TYPES))
    _d(c, "compression.gzip.level", "int", -1, "gzip level.", _gzip_level)
    _d(c, "compression.lz4.level", "int", 9, "lz4 level.", between(1, 17))
    _d(c, "compression.zstd.level", "int", 3, "zstd level.", between(-131072, 22))
    _d(c, "preallocate", "boolean", False, "Preallocate new segment files.")
    _d(c, "min.insync.replicas", "int", 1, "Min in-sync replicas for acks=all.", at_least(1))
    _d(c, "unclean.leader.election.enable", "boolean", False, "Allow out-of-ISR leaders.")
    _d(c, "remote.storage.enable", "boolean", False, "Tiered storage (not supported).")
    _d(c, "leader.replication.throttled.replicas", "list", "", "Throttled leader replicas.")
    _d(c, "follower.replication.throttled.replicas", "list", "", "Throttled follower replicas.")


def _define_confluent_keys(c: ConfigDef) -> None:
    # validated topics (Confluent Server's names; checked by the schema registry's validator)
    _d(c, "confluent.key.schema.validation", "boolean", False,
       "Refuse records whose key lacks a schema id registered under its subject.")
    _d(c, "confluent.value.schema.validation", "boolean", False,
       "Refuse records whose value lacks a schema id registered under its subject.")
    _d(c, "confluent.key.subject.name.strategy", "string", TOPIC_NAME_STRATEGY,
       "Subject of a key's schema: TopicNameStrategy, RecordNameStrategy or "
       "TopicRecordNameStrategy.")
    _d(c, "confluent.value.subject.name.strategy", "string", TOPIC_NAME_STRATEGY,
       "Subject of a value's schema (as confluent.key.subject.name.strategy).")


def _build_def() -> ConfigDef:
    c = ConfigDef()
    _define_segment_keys(c)
    _define_record_keys(c)
    _define_confluent_keys(c)
    # Iceberg topics (config/iceberg_config.py)
    define_iceberg_topic_keys(lambda n, t, d, doc, v=None: _d(c, n, t, d, doc, v))
    return c


LOG_CONFIG_DEF: ConfigDef = _build_def()


def _attr(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True)
class LogConfig:
    """Effective topic config; attribute = Kafka name with dots as underscores."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 604800000
    retention_bytes: int = -1
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    cleanup_policy: list[str] = field(default_factory=lambda: [DELETE])
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86400000
    file_delete_delay_ms: int = 60000
    max_message_bytes: int = 1048588
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    preallocate: bool = False
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    remote_storage_enable: bool = False
    leader_replication_throttled_replicas: list[str] = field(default_factory=list)
    follower_replication_throttled_replicas: list[str] = field(default_factory=list)
    confluent_key_schema_validation: bool = False
    confluent_value_schema_validation: bool = False
    confluent_key_subject_name_strategy: str = TOPIC_NAME_STRATEGY
    confluent_value_subject_name_strategy: str = TOPIC_NAME_STRATEGY
    tidelog_iceberg_mode: str = DISABLED
    tidelog_iceberg_partition_spec: str = DEFAULT_PARTITION_SPEC
    tidelog_iceberg_target_lag_ms: int = -1
    tidelog_iceberg_invalid_record_action: str = DLQ_TABLE
    tidelog_iceberg_delete: bool = True
    # Topic-level overrides as given (Kafka names -> strings), for DescribeConfigs & co.
    overrides: dict[str, str] = field(default_factory=dict, compare=False)

    @classmethod
    def from_props(
        cls,
        overrides: Mapping[str, Any] | None = None,
        broker_defaults: Mapping[str, Any] | None = None,
        *,
        strict: bool = True,
    ) -> LogConfig:
        """Build from topic overrides over broker defaults over Kafka's defaults.

        ``broker_defaults`` may use topic names or broker synonyms (``log.retention.hours``);
        unknown broker names are ignored. ``strict`` rejects unknown topic override names
        (Kafka: "Unknown topic config name").
        """
        overrides = canonical_topic_configs(overrides or {})  # Redpanda's iceberg names too
        if strict:
            unknown = sorted(n for n in overrides if n not in LOG_CONFIG_DEF)
            if unknown:
                raise ConfigError(unknown[0], overrides[unknown[0]], "Unknown topic config name")
        merged = resolve_broker_defaults(broker_defaults or {})
        merged.update({k: v for k, v in overrides.items() if k in LOG_CONFIG_DEF})
        values = LOG_CONFIG_DEF.parse(merged)
        kwargs = {_attr(k): v for k, v in values.items()}
        kept = {k: str(v) for k, v in overrides.items()}
        cfg = cls(**kwargs, overrides=kept)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Cross-key checks (Kafka's LogConfig.validate)."""
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ConfigError(
                "min.compaction.lag.ms",
                self.min_compaction_lag_ms,
                f"conflict: min.compaction.lag.ms > max.compaction.lag.ms "
                f"({self.max_compaction_lag_ms})",
            )

    def with_overrides(self, **changes: Any) -> LogConfig:
        """A copy with attributes changed (snake_case names); validated again."""
        props = self.to_props()
        for attr, value in changes.items():
            name = attr.replace("_", ".")
            if name not in LOG_CONFIG_DEF:
                raise ConfigError(name, value, "Unknown topic config name")
            props[name] = value
        cfg = LogConfig.from_props(props)
        object.__setattr__(cfg, "overrides", {**self.overrides, **{
            k.replace("_", "."): str(v) for k, v in changes.items()}})
        return cfg

    def to_props(self) -> dict[str, Any]:
        """Every topic config by Kafka name with its typed value."""
        names = {f.name for f in fields(self) if f.init} - {"overrides"}
        return {n.replace("_", "."): getattr(self, n) for n in names}

    # -- derived values: fields computed once (a frozen config) in ``__post_init__``, plain
    # attributes where a cached_property's read is a generic lookup in 3.11 (every append
    # reads several). Not configs: ``to_props`` leaves them out.
    compact: bool = field(init=False, repr=False, compare=False)
    delete: bool = field(init=False, repr=False, compare=False)
    log_append_time: bool = field(init=False, repr=False, compare=False)
    # a client's uncompressed batch is kept as it comes (CreateTime, a codec that leaves it
    # uncompressed): the leader's plain append (storage/log_plain.py)
    plain_appends: bool = field(init=False, repr=False, compare=False)
    # compacted topics roll at min(segment.ms, max.compaction.lag.ms) (Kafka)
    max_segment_ms: int = field(init=False, repr=False, compare=False)
    # the effective timestamp bounds: the deprecated difference.max.ms applies at default
    timestamp_before_max_ms: int = field(init=False, repr=False, compare=False)
    timestamp_after_max_ms: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        derived = {
            "compact": COMPACT in self.cleanup_policy,
            "delete": DELETE in self.cleanup_policy,
            "log_append_time": self.message_timestamp_type == LOG_APPEND_TIME,
            "timestamp_before_max_ms": self.message_timestamp_difference_max_ms
            if self.message_timestamp_before_max_ms == LONG_MAX
            else self.message_timestamp_before_max_ms,
            "timestamp_after_max_ms": self.message_timestamp_difference_max_ms
            if self.message_timestamp_after_max_ms == LONG_MAX
            else self.message_timestamp_after_max_ms,
        }
        derived["plain_appends"] = not derived["log_append_time"] and (
            self.compression_type == "producer"
            or self.compression_type.strip().lower() in ("none", "uncompressed"))
        derived["max_segment_ms"] = min(self.max_compaction_lag_ms, self.segment_ms) \
            if derived["compact"] and self.max_compaction_lag_ms > 0 else self.segment_ms
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    @property
    def initial_file_size(self) -> int:
        return self.segment_bytes if self.preallocate else 0


def resolve_broker_defaults(broker: Mapping[str, Any]) -> dict[str, Any]:
    """Map broker-level values to topic names with Kafka's synonym precedence.

    A value given under the topic name itself wins; then the synonyms in priority order,
    scaled to the topic unit (``log.retention.hours=1`` -> ``retention.ms=3600000``).
    Negative ms values under a unit synonym stay -1 (unlimited), as in Kafka.
    """
    out: dict[str, Any] = {}
    for name in LOG_CONFIG_DEF.keys:
        if name in broker:
            out[name] = broker[name]
            continue
        for syn, unit in BROKER_SYNONYMS.get(name, ()):
            if syn in broker and broker[syn] is not None:
                raw = broker[syn]
                if unit != 1:
                    n = _to_int(syn, raw)
                    raw = -1 if n < 0 else n * unit
                out[name] = raw
                break
    return out


def _to_int(name: str, raw: Any) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ConfigError(name, raw, "Expected an integer") from None


def docs_markdown() -> str:
    """The topic config table for the docs, generated from LOG_CONFIG_DEF."""
    return LOG_CONFIG_DEF.docs_markdown()


if __name__ == "__main__":  # python -m tidelog.config.log_config > docs table
    print(docs_markdown(), end="")
