"""Broker-level settings of the LogManager (Kafka's names and defaults, declared once).

Topic-level settings (``retention.ms`` & co.) live in ``LogConfig``; these are the knobs of
the manager itself. ``LogManagerConfig.from_props`` accepts a whole ``server.properties``
mapping and ignores keys that are not its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidelog.config.core import LONG_MAX, ConfigDef, at_least

MANAGER_CONFIG_DEF = (
    ConfigDef()
    .define(
        "log.retention.check.interval.ms",
        "long",
        300000,
        "How often the retention task deletes expired segments.",
        at_least(1),
    )
    .define(
        "log.initial.task.delay.ms",
        "long",
        30000,
        "Delay before the first run of the periodic log tasks.",
        at_least(0),
    )
    .define(
        "log.flush.scheduler.interval.ms",
        "long",
        None,
        "How often the flusher checks whether a log is due for flush.ms. Kafka's default is "
        "Long.MAX (never); unset here means every 1000 ms so that a topic's flush.ms works "
        f"(set {LONG_MAX} to disable the flusher).",
        at_least(1),
    )
    .define(
        "log.flush.offset.checkpoint.interval.ms",
        "long",
        60000,
        "How often recovery points are checkpointed.",
        at_least(0),
    )
    .define(
        "log.flush.start.offset.checkpoint.interval.ms",
        "long",
        60000,
        "How often log start offsets are checkpointed.",
        at_least(0),
    )
    .define(
        "num.recovery.threads.per.data.dir",
        "int",
        1,
        "Threads per log dir that load (and recover) logs at startup.",
        at_least(1),
    )
    .define(
        "producer.id.expiration.ms",
        "long",
        86400000,
        "Idle time after which a producer id's state is dropped.",
        at_least(1),
    )
    .define(
        "log.dir.min.free.bytes",
        "long",
        None,
        "Free space below which a log dir refuses produce requests (NOT_ENOUGH_REPLICAS, "
        "retriable) while reads, commits, retention and deletion go on; unset: the smaller of "
        "1 GiB and 5% of the dir's file system; 0: no floor (Kafka's behaviour). Not a Kafka "
        "setting: see tidelog.storage.free_space.",
        at_least(0),
    )
    .define(
        "producer.id.expiration.check.interval.ms",
        "long",
        600000,
        "How often expired producer ids are removed.",
        at_least(1),
    )
)

DEFAULT_FLUSH_CHECK_MS = 1000


@dataclass(frozen=True)
class LogManagerConfig:
    retention_check_interval_ms: int = 300000
    initial_task_delay_ms: int = 30000
    flush_check_ms: int = DEFAULT_FLUSH_CHECK_MS
    flush_recovery_offset_checkpoint_ms: int = 60000
    flush_start_offset_checkpoint_ms: int = 60000
    num_recovery_threads_per_data_dir: int = 1
    producer_id_expiration_ms: int = 86400000
    producer_id_expiration_check_interval_ms: int = 600000
    min_free_bytes: int | None = None  # None: the default floor of each dir's file system

    @classmethod
    def from_props(cls, props: Mapping[str, Any] | None = None) -> LogManagerConfig:
        given = {k: v for k, v in (props or {}).items() if k in MANAGER_CONFIG_DEF}
        v = MANAGER_CONFIG_DEF.parse(given)
        flush_check = v["log.flush.scheduler.interval.ms"]
        if flush_check is None:
            flush_check = DEFAULT_FLUSH_CHECK_MS
        return cls(
            retention_check_interval_ms=v["log.retention.check.interval.ms"],
            initial_task_delay_ms=v["log.initial.task.delay.ms"],
            flush_check_ms=flush_check,
            flush_recovery_offset_checkpoint_ms=v["log.flush.offset.checkpoint.interval.ms"],
            flush_start_offset_checkpoint_ms=v["log.flush.start.offset.checkpoint.interval.ms"],
            num_recovery_threads_per_data_dir=v["num.recovery.threads.per.data.dir"],
            producer_id_expiration_ms=v["producer.id.expiration.ms"],
            producer_id_expiration_check_interval_ms=v["producer.id.expiration.check.interval.ms"],
            min_free_bytes=v["log.dir.min.free.bytes"],
        )
