"""LogConfig: Kafka's topic config names, defaults, validation and broker synonyms."""

from __future__ import annotations

import pytest

from tidelog.config.core import LONG_MAX, ConfigError
from tidelog.config.log_config import LOG_CONFIG_DEF, LogConfig, docs_markdown


def test_defaults_match_kafka() -> None:
    c = LogConfig.from_props({})
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.segment_jitter_ms == 0
    assert c.segment_index_bytes == 10485760
    assert c.index_interval_bytes == 4096
    assert c.flush_messages == LONG_MAX and c.flush_ms == LONG_MAX
    assert c.retention_ms == 604800000 and c.retention_bytes == -1
    assert c.cleanup_policy == ["delete"] and c.delete and not c.compact
    assert c.min_cleanable_dirty_ratio == 0.5
    assert c.min_compaction_lag_ms == 0 and c.max_compaction_lag_ms == LONG_MAX
    assert c.delete_retention_ms == 86400000
    assert c.file_delete_delay_ms == 60000
    assert c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime" and not c.log_append_time
    assert c.compression_type == "producer"
    assert (c.compression_gzip_level, c.compression_lz4_level, c.compression_zstd_level) == (
        -1, 9, 3)
    assert c.preallocate is False and c.initial_file_size == 0
    assert c == LogConfig()  # dataclass defaults agree with the declaration


def test_overrides_parse_strings_and_are_kept() -> None:
    c = LogConfig.from_props({"segment.bytes": "1024", "cleanup.policy": "compact,delete"})
    assert c.segment_bytes == 1024
    assert c.compact and c.delete
    assert c.overrides == {"segment.bytes": "1024", "cleanup.policy": "compact,delete"}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("segment.bytes", "13"),
        ("segment.ms", "0"),
        ("segment.index.bytes", "3"),
        ("flush.messages", "0"),
        ("retention.ms", "-2"),
        ("cleanup.policy", "compact,archive"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("max.compaction.lag.ms", "0"),
        ("message.timestamp.type", "BrokerTime"),
        ("compression.type", "brotli"),
        ("compression.gzip.level", "0"),
        ("compression.zstd.level", "23"),
        ("preallocate", "yes"),
        ("segment.bytes", "abc"),
    ],
)
def test_invalid_values_rejected(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
        LogConfig.from_props({name: value})


def test_min_compaction_lag_above_max_is_invalid() -> None:
    # LogConfigTest#testInvalidCompactionLagConfig
    with pytest.raises(ConfigError, match=r"min\.compaction\.lag\.ms"):
        LogConfig.from_props({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_unknown_topic_config_rejected() -> None:
    with pytest.raises(ConfigError, match="Unknown topic config"):
        LogConfig.from_props({"segment.bites": "1"})
    assert LogConfig.from_props({"nope": "1"}, strict=False).segment_bytes == 1073741824


def test_broker_synonyms_and_precedence() -> None:
    c = LogConfig.from_props({}, {"log.segment.bytes": "2048", "log.roll.hours": "1",
                                  "message.max.bytes": "500", "log.cleanup.policy": "compact"})
    assert c.segment_bytes == 2048
    assert c.segment_ms == 3_600_000
    assert c.max_message_bytes == 500
    assert c.compact and not c.delete
    # retention: ms > minutes > hours
    assert LogConfig.from_props({}, {"log.retention.hours": "2"}).retention_ms == 7_200_000
    assert LogConfig.from_props(
        {}, {"log.retention.hours": "2", "log.retention.minutes": "3"}).retention_ms == 180_000
    assert LogConfig.from_props({}, {
        "log.retention.hours": "2", "log.retention.minutes": "3", "log.retention.ms": "7"
    }).retention_ms == 7
    assert LogConfig.from_props({}, {"log.retention.hours": "-1"}).retention_ms == -1
    # log.roll.ms beats log.roll.hours; flush.ms falls back to the scheduler interval
    assert LogConfig.from_props({}, {"log.roll.hours": "1", "log.roll.ms": "5"}).segment_ms == 5
    assert LogConfig.from_props({}, {"log.flush.scheduler.interval.ms": "9"}).flush_ms == 9


def test_topic_override_beats_broker_and_topic_named_broker_default() -> None:
    c = LogConfig.from_props({"retention.ms": "100"}, {"log.retention.ms": "5"})
    assert c.retention_ms == 100
    # broker defaults already mapped to topic names (BrokerConfig.log_config_defaults())
    assert LogConfig.from_props({}, {"segment.bytes": 4096}).segment_bytes == 4096
    assert c.overrides == {"retention.ms": "100"}


def test_invalid_broker_synonym_value() -> None:
    with pytest.raises(ConfigError, match=r"log\.retention\.hours"):
        LogConfig.from_props({}, {"log.retention.hours": "x"})


def test_compacted_topic_rolls_at_max_compaction_lag() -> None:
    c = LogConfig.from_props({"cleanup.policy": "compact", "max.compaction.lag.ms": "1000"})
    assert c.max_segment_ms == 1000
    d = LogConfig.from_props({"max.compaction.lag.ms": "1000"})
    assert d.max_segment_ms == 604800000


def test_timestamp_bounds_fall_back_to_difference_max() -> None:
    c = LogConfig.from_props({"message.timestamp.difference.max.ms": "50"})
    assert c.timestamp_before_max_ms == 50 and c.timestamp_after_max_ms == 50
    d = LogConfig.from_props({"message.timestamp.difference.max.ms": "50",
                              "message.timestamp.after.max.ms": "7"})
    assert d.timestamp_after_max_ms == 7 and d.timestamp_before_max_ms == 50


def test_derived_values_are_plain_attributes_and_no_configs() -> None:
    """The derived values are set once per config (plain attributes read by every append,
    not descriptors), follow the configs of a copy, and are not configs themselves:
    ``to_props`` names Kafka's keys only, and equality ignores them."""
    c = LogConfig.from_props({"cleanup.policy": "compact,delete", "max.compaction.lag.ms": "9",
                              "compression.type": "gzip"})
    assert (c.compact, c.delete, c.plain_appends, c.max_segment_ms) == (True, True, False, 9)
    for name in ("compact", "delete", "log_append_time", "plain_appends", "max_segment_ms",
                 "timestamp_before_max_ms", "timestamp_after_max_ms"):
        assert name in vars(c) and not hasattr(type(c).__dict__.get(name), "__get__")
    assert set(c.to_props()) == set(LOG_CONFIG_DEF.keys)
    d = c.with_overrides(cleanup_policy="delete", compression_type="uncompressed")
    assert (d.compact, d.delete, d.plain_appends, d.max_segment_ms) == (False, True, True,
                                                                       604800000)
    e = LogConfig.from_props({"message.timestamp.type": "LogAppendTime"})
    assert e.log_append_time and not e.plain_appends and e == LogConfig.from_props(
        {"message.timestamp.type": "LogAppendTime"})


def test_with_overrides_and_preallocate() -> None:
    c = LogConfig.from_props({"segment.bytes": "1000"})
    d = c.with_overrides(preallocate=True, retention_bytes=10)
    assert d.segment_bytes == 1000 and d.preallocate and d.retention_bytes == 10
    assert d.initial_file_size == 1000
    assert d.overrides["preallocate"] == "True"
    with pytest.raises(ConfigError):
        c.with_overrides(segment_bytes=1)


def test_docs_table_lists_every_key() -> None:
    md = docs_markdown()
    for name in LOG_CONFIG_DEF.keys:
        assert f"`{name}`" in md
    assert "log.retention.hours" in md
