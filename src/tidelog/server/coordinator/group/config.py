"""Group coordinator settings: Kafka's broker config names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidelog.config.core import INT_MAX, ConfigDef, at_least, between, one_of

GROUP_CONFIG_DEF = (
    ConfigDef()
    .define(
        "group.min.session.timeout.ms",
        "int",
        6000,
        "Minimum session timeout a member may ask for.",
        at_least(0),
    )
    .define(
        "group.max.session.timeout.ms",
        "int",
        1800000,
        "Maximum session timeout a member may ask for.",
        at_least(0),
    )
    .define(
        "group.initial.rebalance.delay.ms",
        "int",
        3000,
        "How long the first rebalance of an empty group waits for more members.",
        at_least(0),
    )
    .define(
        "group.max.size", "int", INT_MAX, "Maximum number of members in one group.", at_least(1)
    )
    .define(
        "group.consumer.session.timeout.ms",
        "int",
        45000,
        "Session timeout of consumer-protocol (KIP-848) members.",
        at_least(1),
    )
    .define(
        "group.consumer.heartbeat.interval.ms",
        "int",
        5000,
        "Heartbeat interval given to consumer-protocol members.",
        at_least(1),
    )
    .define(
        "group.consumer.max.size",
        "int",
        INT_MAX,
        "Maximum number of members of one consumer-protocol group.",
        at_least(1),
    )
    .define(
        "group.consumer.assignors",
        "list",
        "uniform,range",
        "Server-side assignors (uniform, range, or Kafka's class names); the first is the default.",
    )
    .define(
        "group.consumer.migration.policy",
        "string",
        "bidirectional",
        "Online migration between classic and consumer groups: bidirectional, upgrade "
        "(classic to consumer when a consumer-protocol member joins), downgrade (consumer to "
        "classic when the last consumer-protocol member leaves) or disabled.",
        one_of("bidirectional", "upgrade", "downgrade", "disabled", case_sensitive=False),
    )
    .define(
        "group.share.session.timeout.ms",
        "int",
        45000,
        "Session timeout of share group (KIP-932) members.",
        at_least(1),
    )
    .define(
        "group.share.heartbeat.interval.ms",
        "int",
        5000,
        "Heartbeat interval given to share group members.",
        at_least(1),
    )
    .define(
        "group.share.record.lock.duration.ms",
        "int",
        30000,
        "How long a share group member holds a record it acquired.",
        at_least(1),
    )
    .define(
        "group.share.delivery.count.limit",
        "int",
        5,
        "Deliveries of a record before it is archived instead of offered again.",
        between(2, 10),
    )
    .define(
        "group.share.partition.max.record.locks",
        "int",
        2000,
        "Records of one share-partition acquired at once.",
        at_least(100),
    )
    .define(
        "share.coordinator.state.topic.num.partitions",
        "int",
        50,
        "Partitions of __share_group_state (do not change after deployment).",
        at_least(1),
    )
    .define(
        "share.coordinator.state.topic.replication.factor",
        "short",
        3,
        "Replication of __share_group_state.",
        at_least(1),
    )
    .define(
        "share.coordinator.state.topic.min.isr",
        "short",
        2,
        "min.insync.replicas of __share_group_state.",
        at_least(1),
    )
    .define(
        "offsets.topic.num.partitions",
        "int",
        50,
        "Partitions of __consumer_offsets (do not change after deployment).",
        at_least(1),
    )
    .define(
        "offsets.topic.segment.bytes",
        "int",
        104857600,
        "Segment size of __consumer_offsets.",
        at_least(1),
    )
    .define(
        "offsets.topic.compression.codec",
        "int",
        0,
        "Compression of __consumer_offsets batches (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).",
        between(0, 4),
    )
    .define(
        "offsets.retention.minutes",
        "int",
        10080,
        "How long committed offsets of an empty group are kept.",
        at_least(1),
    )
    .define(
        "offsets.retention.check.interval.ms",
        "long",
        600000,
        "How often expired offsets are looked for.",
        at_least(1),
    )
    .define(
        "offset.metadata.max.bytes",
        "int",
        4096,
        "Maximum size of the metadata string of a commit.",
        at_least(0),
    )
    .define(
        "offsets.load.buffer.size",
        "int",
        5242880,
        "Read size used when loading __consumer_offsets.",
        at_least(1),
    )
)

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class GroupConfig:
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1800000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = INT_MAX
    group_consumer_session_timeout_ms: int = 45000
    group_consumer_heartbeat_interval_ms: int = 5000
    group_consumer_max_size: int = INT_MAX
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")
    group_consumer_migration_policy: str = "bidirectional"
    group_share_session_timeout_ms: int = 45000
    group_share_heartbeat_interval_ms: int = 5000
    group_share_record_lock_duration_ms: int = 30000
    group_share_delivery_count_limit: int = 5
    group_share_partition_max_record_locks: int = 2000
    share_coordinator_state_topic_num_partitions: int = 50
    share_coordinator_state_topic_replication_factor: int = 3
    share_coordinator_state_topic_min_isr: int = 2
    offsets_topic_num_partitions: int = 50
    offsets_topic_segment_bytes: int = 104857600
    offsets_topic_compression_codec: int = 0
    offsets_retention_minutes: int = 10080
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    offsets_load_buffer_size: int = 5242880
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> GroupConfig:
        """Typed settings from broker properties (unknown keys are ignored)."""
        known = {k: v for k, v in props.items() if k in GROUP_CONFIG_DEF}
        parsed = GROUP_CONFIG_DEF.parse(known)
        parsed["group.consumer.assignors"] = tuple(
            _assignor_name(a) for a in parsed["group.consumer.assignors"])
        return cls(**{k.replace(".", "_"): v for k, v in parsed.items()})

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60 * 1000


def _assignor_name(name: str) -> str:
    """Kafka names its assignors by class (org.apache...UniformAssignor); ours by ``name``."""
    short = name.strip().rsplit(".", 1)[-1]
    return short[: -len("Assignor")].lower() if short.endswith("Assignor") else short.lower()
