"""Option parsing and offset planning of the Spark source, without starting Spark
(pure Python modules; PathBackend over real partition dirs)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from kafka_layout import write_partition

from tidelog.spark.backend import BackendSpec, resolve_partitions
from tidelog.spark.options import OptionError, parse_read_options, parse_write_options
from tidelog.spark.planning import (
    check_ranges,
    from_json_offsets,
    rate_limit,
    resolve_end,
    resolve_start,
    split_ranges,
    to_json_offsets,
)
from tidelog.util.topic_partition import TopicPartition as TP

TS0 = 1_000_000


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    for p, n in ((0, 100), (1, 40)):
        write_partition(tmp_path / f"t-{p}",
                        [[(TS0 + i, None, b"x", [])] for i in range(n)], index_interval_bytes=200)
    write_partition(tmp_path / "u-0", [[(TS0, None, b"x", [])]])
    return tmp_path


def _opts(logs: Path, streaming: bool = False, **kw: str):  # type: ignore[no-untyped-def]
    return parse_read_options({"path": str(logs), **kw}, streaming=streaming)


def test_options_are_case_insensitive_and_typed(logs: Path) -> None:
    o = _opts(logs, True, SUBSCRIBE="t", maxoffsetspertrigger="7", includeHeaders="TRUE", maxTriggerDelay="2m")
    assert o.subscription.topics == ("t",) and o.max_offsets_per_trigger == 7
    assert o.include_headers and o.max_trigger_delay_ms == 120_000
    assert o.starting.kind == "latest"  # streaming default
    assert _opts(logs, subscribe="t").starting.kind == "earliest"  # batch default
    assert o.mode == "path" and o.paths == (str(logs),)
    with pytest.raises(OptionError, match="duration"):
        _opts(logs, True, subscribe="t", maxTriggerDelay="soon")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"subscribe": "t", "failOnDataLoss": "yes"}, "'true' or 'false'"),
        ({"subscribePattern": "("}, "not a valid regex"),
        ({"assign": '{"t": "0"}'}, "option assign must look like"),
        ({"subscribe": "t", "startingOffsets": '{"t": {"0": "x"}}'}, "startingOffsets must look like"),
        ({"subscribe": "t", "startingOffsets": '{"u": {"0": 1}}'}, "does not cover"),
        ({"assign": '{"t": [0]}', "startingOffsets": '{"t": {"1": 1}}'}, "assign does not list"),
        ({"subscribe": "t", "startingOffsetsByTimestampStrategy": "x"}, "'error' or 'latest'"),
    ],
)
def test_bad_read_options(logs: Path, kw: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        _opts(logs, **kw)


def test_commit_group_needs_a_broker(logs: Path) -> None:
    with pytest.raises(OptionError, match="no broker in path mode"):
        _opts(logs, True, subscribe="t", commitOffsetsToGroup="g")


def test_write_options_map_onto_librdkafka() -> None:
    """kafka.* producer settings reach librdkafka the way Spark hands them to the Java producer."""
    w = parse_write_options({"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.compression.type": "LZ4",
                             "kafka.linger.ms": "7", "kafka.batch.size": "65536",
                             "kafka.max.request.size": "2097152", "kafka.buffer.memory": "33554432"})
    assert w.topic == "t"
    p = w.producer
    assert (p["acks"], p["enable.idempotence"], p["compression.type"]) == ("all", True, "lz4")
    assert (p["linger.ms"], p["batch.size"], p["message.max.bytes"]) == ("7", "65536", 2097152)
    assert p["queue.buffering.max.kbytes"] == 32768 and p["partitioner"] == "murmur2_random"
    w = parse_write_options({"kafka.bootstrap.servers": "h:1", "kafka.acks": "1"})
    assert (w.producer["acks"], w.producer["enable.idempotence"]) == ("1", False)
    with pytest.raises(OptionError, match=r"requires kafka\.acks=all"):
        parse_write_options({"kafka.bootstrap.servers": "h:1", "kafka.acks": "1", "kafka.enable.idempotence": "true"})


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("partitioner.class", "x.Y", "default partitioner"),
        ("security.protocol", "SASL_KERBEROS", "must be one of"),
        ("ssl.keystore.type", "JKS", "not supported"),
        ("sasl.kerberos.service.name", "kafka", "not supported"),
        ("linger.ms", "soon", "must be an integer"),
        ("send.buffer.bytes", "1", "not supported for writes"),
        ("value.serializer", "y", "not supported"),
    ],
)
def test_unusable_producer_settings_are_rejected(name: str, value: str, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_write_options({"kafka.bootstrap.servers": "h:1", f"kafka.{name}": value})


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("isolation.level", "serializable", "read_uncommitted or read_committed"),
        ("security.protocol", "BOGUS", "must be one of"),
        ("ssl.truststore.password", "x", "not supported"),
        ("ssl.truststore.type", "PKCS12", "not supported"),
        ("max.poll.records", "5", "not supported for reads"),
        ("auto.offset.reset", "earliest", "startingOffsets"),
        ("max.partition.fetch.bytes", "big", "must be an integer"),
    ],
)
def test_unusable_consumer_settings_are_rejected(logs: Path, name: str, value: str, message: str) -> None:
    with pytest.raises(OptionError, match=message):
        _opts(logs, subscribe="t", **{f"kafka.{name}": value})


def test_lenient_where_spark_is_lenient(logs: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Spark ignores unknown options, only warns about stream options in a batch query and
    about kafka.group.id; tidelog does the same, with a warning in the log."""
    o = _opts(logs, subscribe="t", someTypo="1", maxOffsetsPerTrigger="5", minOffsetsPerTrigger="2",
              maxTriggerDelay="1s", **{"kafka.group.id": "g", "kafka.security.protocol": "plaintext"})
    assert o.max_offsets_per_trigger is None and o.min_offsets_per_trigger is None
    text = caplog.text
    assert "sometypo" in text and "maxOffsetsPerTrigger is ignored in batch" in text and "'g'" in text
    w = parse_write_options({"kafka.bootstrap.servers": "h:1", "subscribe": "t"})
    assert w.topic is None


def test_subscribe_pattern_is_found_in_the_name(logs: Path) -> None:
    backend = BackendSpec(paths=(str(logs),)).open()
    assert resolve_partitions(backend, _opts(logs, subscribePattern="^u").subscription) == [TP("u", 0)]
    assert resolve_partitions(backend, _opts(logs, subscribePattern="t").subscription) == [TP("t", 0), TP("t", 1)]


@pytest.mark.parametrize(
    ("value", "ms"),
    [("100us", 0), ("1500us", 1), ("250", 250), ("250ms", 250), ("30s", 30_000), ("5m", 300_000),
     ("5min", 300_000), (" 2H ", 7_200_000), ("1d", 86_400_000)],
)
def test_spark_duration_syntax(logs: Path, value: str, ms: int) -> None:
    assert _opts(logs, True, subscribe="t", maxTriggerDelay=value).max_trigger_delay_ms == ms


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"kafkaConsumer.pollTimeoutMs": "abc"}, "kafkaConsumer.pollTimeoutMs must be an integer"),
        ({"fetchOffset.numRetries": "x"}, "must be an integer"),
        ({"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, "higher than maxOffsetsPerTrigger"),
        ({"maxTriggerDelay": "5 parsecs"}, "duration"),
        ({"minPartitions": "0"}, "positive"),
    ],
)
def test_numeric_options_are_checked_like_spark(logs: Path, kw: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        _opts(logs, True, subscribe="t", **kw)


def test_resolve_offsets_over_log_dirs(logs: Path) -> None:
    backend = BackendSpec(paths=(str(logs),)).open()
    o = _opts(logs, subscribePattern="t|u")
    tps = resolve_partitions(backend, o.subscription)
    assert tps == [TP("t", 0), TP("t", 1), TP("u", 0)]
    assert resolve_start(backend, tps, o.starting) == dict.fromkeys(tps, 0)
    assert resolve_end(backend, tps, o.ending) == {TP("t", 0): 100, TP("t", 1): 40, TP("u", 0): 1}
    ts = _opts(logs, subscribe="t", startingTimestamp=str(TS0 + 30),
               endingOffsetsByTimestamp=f'{{"t": {{"0": {TS0 + 50}, "1": {TS0 + 999}}}}}')
    tps = [TP("t", 0), TP("t", 1)]
    assert resolve_start(backend, tps, ts.starting) == {TP("t", 0): 30, TP("t", 1): 30}
    assert resolve_end(backend, tps, ts.ending) == {TP("t", 0): 50, TP("t", 1): 40}


def test_check_ranges_and_data_loss() -> None:
    tp = TP("t", 0)
    assert check_ranges({tp: 5}, {tp: 9}, {tp: 0}, fail_on_data_loss=True) == {tp: (5, 9)}
    with pytest.raises(OptionError, match="no longer available"):
        check_ranges({tp: 5}, {tp: 9}, {tp: 7}, fail_on_data_loss=True)
    assert check_ranges({tp: 5}, {tp: 9}, {tp: 7}, fail_on_data_loss=False) == {tp: (7, 9)}
    assert check_ranges({tp: 5}, {tp: 9}, {tp: 12}, fail_on_data_loss=False) == {tp: (9, 9)}


def test_split_ranges_min_partitions_and_max_records() -> None:
    a, b = TP("t", 0), TP("t", 1)
    ranges = {a: (0, 900), b: (0, 100)}
    assert len(split_ranges(ranges)) == 2
    parts = split_ranges(ranges, min_partitions=10)
    assert len(parts) == 10
    assert sum(r.size for r in parts) == 1000
    for tp in (a, b):
        mine = [r for r in parts if r.partition == tp.partition]
        assert mine[0].start == ranges[tp][0] and mine[-1].end == ranges[tp][1]
        assert all(x.end == y.start for x, y in itertools.pairwise(mine))
    capped = split_ranges(ranges, max_records_per_partition=300)
    assert max(r.size for r in capped) <= 300 and len(capped) == 4
    assert split_ranges({a: (5, 5)}) == []


def test_rate_limit_in_proportion_to_lag() -> None:
    a, b, c = TP("t", 0), TP("t", 1), TP("t", 2)
    end = rate_limit({a: 0, b: 0, c: 10}, {a: 300, b: 100, c: 10}, 100)
    assert end == {a: 75, b: 25, c: 10}
    assert rate_limit({a: 0}, {a: 50}, 100) == {a: 50}
    tiny = rate_limit({a: 0, b: 0}, {a: 1000, b: 1}, 10)
    assert tiny[b] == 1  # a share below one record is rounded up, as Spark does


def test_json_offsets_round_trip() -> None:
    offsets = {TP("t", 0): 5, TP("t", 10): 7, TP("u", 1): 0}
    data = to_json_offsets(offsets)
    assert data == {"t": {"0": 5, "10": 7}, "u": {"1": 0}}
    assert from_json_offsets(data) == offsets


def test_auto_registration_module() -> None:
    """PySpark registers DefaultSource of every top-level ``pyspark_*`` module by its name."""
    import pyspark_tidelog
    from tidelog.spark import TidelogDataSource

    assert pyspark_tidelog.DefaultSource is TidelogDataSource
    assert TidelogDataSource.name() == "tidelog"
