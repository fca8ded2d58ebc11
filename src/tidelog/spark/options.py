"""Options of the "tidelog" data source, parsed and checked at planning time.

Names and meanings follow Spark's own Kafka connector (structured-streaming-kafka-integration):
subscribe / subscribePattern / assign, startingOffsets / endingOffsets, *ByTimestamp,
startingTimestamp / endingTimestamp, failOnDataLoss, minPartitions, maxOffsetsPerTrigger,
minOffsetsPerTrigger, maxTriggerDelay, includeHeaders, kafka.* passthrough. tidelog adds
``path`` (read log dirs directly, no broker) and ``commitOffsetsToGroup``.
Pure Python (no pyspark import) so it can be checked anywhere.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .kafka_params import OptionError as OptionError  # raised by the checks below
from .kafka_params import check_read_params, producer_config
from .remote_options import REMOTE_OPTIONS, RemoteConfigs, is_remote_path, remote_configs

log = logging.getLogger("tidelog.spark")

EARLIEST = -2
LATEST = -1

READ_OPTIONS = {
    "path", "paths", "subscribe", "subscribepattern", "assign",
    "startingoffsets", "endingoffsets", "startingoffsetsbytimestamp", "endingoffsetsbytimestamp",
    "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestampstrategy",
    "failondataloss", "minpartitions", "maxoffsetspertrigger", "minoffsetspertrigger",
    "maxtriggerdelay", "includeheaders", "groupidprefix", "commitoffsetstogroup",
    "kafkaconsumer.polltimeoutms", "fetchoffset.numretries", "fetchoffset.retryintervalms",
    "maxrecordsperpartition",  # Spark 4.x alias of the per-partition split size
    # typed values (avro_values.py)
    "valueformat", "schema.registry.url", "schemaregistryurl", "valuesubject",
    "valueschemaversion", "mode", "keyformat", "keysubject", "keyschemaversion",
} | REMOTE_OPTIONS  # path mode on a bucket (remote_options.py)
WRITE_OPTIONS = {"topic", "includeheaders", "path", "checkpointlocation",
                 # typed values (avro_write.py)
                 "valueformat", "schema.registry.url", "schemaregistryurl", "valuesubject",
                 "valueschema", "valueschemaid"}
STREAM_ONLY = ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "commitOffsetsToGroup")
# Spark's JavaUtils.timeStringAsMs: an integer and an optional unit (default ms); sub-millisecond
# units truncate, as Java's TimeUnit conversion does.
_DURATION = re.compile(r"^(-?[0-9]+)([a-z]+)?$")
_DURATION_US = {"us": 1, "ms": 1000, "s": 1_000_000, "m": 60_000_000, "min": 60_000_000,
                "h": 3_600_000_000, "d": 86_400_000_000}


@dataclass(frozen=True)
class OffsetSpec:
    """``kind``: "earliest", "latest", "offsets" (per-partition JSON), "timestamps" (per-partition
    JSON), or "timestamp" (one timestamp for every partition)."""

    kind: str
    offsets: dict[str, dict[int, int]] = field(default_factory=dict)
    timestamp: int = 0


@dataclass(frozen=True)
class Subscription:
    kind: str  # subscribe | subscribePattern | assign
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribePattern":  # Spark: topicRegex.findFirstIn(name)
            return re.search(self.pattern, topic) is not None
        if self.kind == "subscribe":
            return topic in self.topics
        return topic in self.assigned


@dataclass(frozen=True)
class ReadOptions:
    bootstrap_servers: str | None
    paths: tuple[str, ...]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    starting_by_timestamp_strategy: str = "error"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    include_headers: bool = False
    commit_group: str | None = None
    kafka: dict[str, str] = field(default_factory=dict)
    # path = s3://bucket/prefix: the RemoteStorageManager configs (remote_options.py)
    remote: RemoteConfigs = ()
    remote_log_metadata: bool = False

    @property
    def mode(self) -> str:
        if self.remote:
            return "bucket"
        return "broker" if self.bootstrap_servers else "path"

    @property
    def read_committed(self) -> bool:
        return self.kafka.get("isolation.level", "").strip().lower() == "read_committed"


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    if value is None:
        value = options.get(name)
    return None if value is None else str(value)


def _lower_keys(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def parse_bool(name: str, value: str | None, default: bool) -> bool:
    if value is None:
        return default
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise OptionError(f"option {name} must be 'true' or 'false', got {value!r}")


def parse_positive_int(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        raise OptionError(f"option {name} must be a positive integer, got {value!r}") from None
    if n <= 0:
        raise OptionError(f"option {name} must be a positive integer, got {value!r}")
    return n


def parse_long(name: str, value: str | None) -> int | None:
    """Spark parses numeric options with ``toLong``/``toInt``: anything else is an error."""
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {value!r}") from None


def parse_duration_ms(name: str, value: str) -> int:
    """Spark's duration syntax (``100us``, ``250ms``, ``30s``, ``5m``/``5min``, ``2h``, ``1d``;
    a bare number is milliseconds)."""
    m = _DURATION.match(value.strip().lower())
    if not m or (m.group(2) and m.group(2) not in _DURATION_US):
        raise OptionError(
            f"option {name} must be a duration such as '100us', '500ms', '30s', '15m', '2h' or '1d', got {value!r}"
        )
    micros = int(m.group(1)) * _DURATION_US[m.group(2) or "ms"]
    return int(micros / 1000)  # truncates toward zero, like TimeUnit.convert


def _json(name: str, value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name} is not valid JSON ({e.msg}): {value!r}") from None


def parse_partition_json(name: str, value: str) -> dict[str, dict[int, int]]:
    """``{"topic": {"0": 23, "1": -2}}`` -> {topic: {0: 23, 1: -2}}."""
    data = _json(name, value)
    err = f'option {name} must look like {{"topicA":{{"0":23,"1":-1}}}}, got {value!r}'
    if not isinstance(data, dict) or not data:
        raise OptionError(err)
    out: dict[str, dict[int, int]] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise OptionError(err)
        try:
            out[topic] = {int(p): int(o) for p, o in parts.items()}
        except (TypeError, ValueError):
            raise OptionError(err) from None
        if any(isinstance(o, bool) or not isinstance(o, int) for o in parts.values()):
            raise OptionError(err)
    return out


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = {k: _get(options, k) for k in ("subscribe", "subscribePattern", "assign")}
    present = [k for k, v in given.items() if v is not None]
    if len(present) != 1:
        what = "none was given" if not present else f"got {', '.join(present)}"
        raise OptionError(f"exactly one of the options subscribe, subscribePattern, assign is required; {what}")
    kind = present[0]
    value = given[kind] or ""
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise OptionError(f"option subscribe names no topic: {value!r}")
        return Subscription(kind, topics=topics)
    if kind == "subscribePattern":
        if not value.strip():
            raise OptionError("option subscribePattern is empty")
        try:
            re.compile(value)
        except re.error as e:
            raise OptionError(f"option subscribePattern is not a valid regex ({e}): {value!r}") from None
        return Subscription(kind, pattern=value)
    data = _json("assign", value)
    if (
        not isinstance(data, dict)
        or not data
        or not all(isinstance(v, list) and all(isinstance(p, int) and p >= 0 for p in v) for v in data.values())
    ):
        raise OptionError(f'option assign must look like {{"topicA":[0,1],"topicB":[2,4]}}, got {value!r}')
    return Subscription(kind, assigned={t: tuple(sorted(set(ps))) for t, ps in data.items()})


def _offset_spec(options: Mapping[str, str], side: str, streaming: bool) -> OffsetSpec:
    """startingX / endingX with Spark's precedence: Timestamp > OffsetsByTimestamp > Offsets."""
    ts = _get(options, f"{side}Timestamp")
    by_ts = _get(options, f"{side}OffsetsByTimestamp")
    offsets = _get(options, f"{side}Offsets")
    if ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(ts.strip()))
        except ValueError:
            raise OptionError(f"option {side}Timestamp must be milliseconds since the epoch, got {ts!r}") from None
    if by_ts is not None:
        return OffsetSpec("timestamps", offsets=parse_partition_json(f"{side}OffsetsByTimestamp", by_ts))
    default = "latest" if (side == "ending" or streaming) else "earliest"
    raw = (offsets or default).strip()
    if raw.lower() in ("earliest", "latest"):
        return OffsetSpec(raw.lower())
    return OffsetSpec("offsets", offsets=parse_partition_json(f"{side}Offsets", raw))


def _check_batch_offsets(starting: OffsetSpec, ending: OffsetSpec) -> None:
    if starting.kind == "latest":
        raise OptionError("startingOffsets='latest' is not allowed in batch queries (use 'earliest' or JSON)")
    if ending.kind == "earliest":
        raise OptionError("endingOffsets='earliest' is not allowed in batch queries (use 'latest' or JSON)")
    for tp_offsets in starting.offsets.values() if starting.kind == "offsets" else ():
        if LATEST in tp_offsets.values():
            raise OptionError("startingOffsets may not use -1 (latest) in batch queries")
    for tp_offsets in ending.offsets.values() if ending.kind == "offsets" else ():
        if EARLIEST in tp_offsets.values():
            raise OptionError("endingOffsets may not use -2 (earliest)")


def _check_known(options: Mapping[str, str], known: set[str]) -> dict[str, str]:
    """The ``kafka.*`` options (prefix stripped). Unknown source options are ignored with a
    warning, as Spark's connector ignores them (a typo should still be visible in the log)."""
    kafka: dict[str, str] = {}
    unknown = []
    for key, value in options.items():
        k = key.lower()
        if k.startswith("kafka."):
            kafka[k[len("kafka."):]] = str(value)
        elif k not in known:
            unknown.append(key)
    if unknown:
        log.warning("ignoring unknown option(s) %s of the tidelog source; known: %s and kafka.*",
                    ", ".join(sorted(unknown)), ", ".join(sorted(known)))
    return kafka


def _locations(options: Mapping[str, str], kafka: dict[str, str]) -> tuple[str | None, tuple[str, ...]]:
    bootstrap = kafka.get("bootstrap.servers")
    path = _get(options, "path") or _get(options, "paths")
    if bootstrap and path and not is_remote_path(path):
        raise OptionError("options kafka.bootstrap.servers and path contradict each other: give exactly one")
    if not bootstrap and not path:
        raise OptionError("either kafka.bootstrap.servers (read a broker) or path (read log dirs) is required")
    paths: tuple[str, ...] = ()
    if path:
        paths = tuple(_split_paths(path))
    return bootstrap, paths


def _split_paths(path: str) -> list[str]:
    if path.startswith("["):  # load([a, b]) passes a JSON list
        try:
            return [str(p) for p in json.loads(path)]
        except json.JSONDecodeError:
            pass
    return [p.strip() for p in path.split(",") if p.strip()]


def parse_read_options(raw: Mapping[str, Any], *, streaming: bool) -> ReadOptions:
    """Validate everything a read needs; raises OptionError with a clear message."""
    options = _lower_keys(raw)
    kafka = check_read_params(_check_known(options, READ_OPTIONS))
    bootstrap, paths = _locations(options, kafka)
    remote = remote_configs(paths, options) if any(is_remote_path(p) for p in paths) else ()
    use_metadata = parse_bool("remoteLogMetadata", _get(options, "remoteLogMetadata"), False)
    if use_metadata and not (remote and bootstrap):
        raise OptionError("option remoteLogMetadata=true reads __remote_log_metadata from a broker: "
                          "it needs path=s3://bucket/prefix and kafka.bootstrap.servers")
    subscription = parse_subscription(options)
    starting = _offset_spec(options, "starting", streaming)
    ending = _ending_offsets(options, starting, streaming)
    _check_subscription_offsets(subscription, starting, ending)
    _check_numbers(options)
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"option startingOffsetsByTimestampStrategy must be 'error' or 'latest', got {strategy!r}")
    commit_group = _get(options, "commitOffsetsToGroup") if streaming else None
    if commit_group is not None and not bootstrap:
        raise OptionError("option commitOffsetsToGroup needs kafka.bootstrap.servers (there is no broker in path mode)")
    return ReadOptions(
        bootstrap_servers=bootstrap,
        paths=paths,
        subscription=subscription,
        starting=starting,
        ending=ending,
        starting_by_timestamp_strategy=strategy,
        fail_on_data_loss=parse_bool("failOnDataLoss", _get(options, "failOnDataLoss"), True),
        min_partitions=parse_positive_int("minPartitions", _get(options, "minPartitions")),
        max_records_per_partition=parse_positive_int(
            "maxRecordsPerPartition", _get(options, "maxRecordsPerPartition")
        ),
        max_offsets_per_trigger=parse_positive_int("maxOffsetsPerTrigger", _get(options, "maxOffsetsPerTrigger"))
        if streaming else None,
        min_offsets_per_trigger=parse_positive_int("minOffsetsPerTrigger", _get(options, "minOffsetsPerTrigger"))
        if streaming else None,
        max_trigger_delay_ms=parse_duration_ms("maxTriggerDelay", _get(options, "maxTriggerDelay") or "15m"),
        include_headers=parse_bool("includeHeaders", _get(options, "includeHeaders"), False),
        commit_group=commit_group.strip() if commit_group else None,
        kafka=kafka,
        remote=remote,
        remote_log_metadata=use_metadata,
    )


def _ending_offsets(options: Mapping[str, str], starting: OffsetSpec, streaming: bool) -> OffsetSpec:
    """A batch query's ending offsets, checked against its starting ones; a stream runs to
    the latest and takes no ending option (Spark's validateStreamOptions/validateBatchOptions)."""
    if streaming:
        for side in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if _get(options, side) is not None:
                raise OptionError(f"option {side} is for batch queries only, not for streaming")
        return OffsetSpec("latest")
    ending = _offset_spec(options, "ending", streaming)
    _check_batch_offsets(starting, ending)
    for name in STREAM_ONLY:  # Spark logs "option ignored in batch queries"
        if _get(options, name) is not None:
            log.warning("option %s is ignored in batch queries", name)
    return ending


def _check_numbers(options: Mapping[str, str]) -> None:
    """Spark's validateGeneralOptions: numeric options must parse, and a minimum per trigger
    above the maximum is a contradiction."""
    for name in ("kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries", "fetchOffset.retryIntervalMs"):
        parse_long(name, _get(options, name))
    low = parse_long("minOffsetsPerTrigger", _get(options, "minOffsetsPerTrigger"))
    high = parse_long("maxOffsetsPerTrigger", _get(options, "maxOffsetsPerTrigger"))
    if low is not None and high is not None and low > high:
        raise OptionError(
            f"the value of minOffsetsPerTrigger ({low}) is higher than maxOffsetsPerTrigger ({high})"
        )


def _check_subscription_offsets(sub: Subscription, starting: OffsetSpec, ending: OffsetSpec) -> None:
    """Per-partition JSON may only name topics the query reads."""
    for name, spec in (("starting", starting), ("ending", ending)):
        for topic in spec.offsets:
            if not sub.matches(topic):
                raise OptionError(f"{name} offsets name topic {topic!r}, which the subscription does not cover")
            if sub.kind == "assign":
                extra = set(spec.offsets[topic]) - set(sub.assigned[topic])
                if extra:
                    raise OptionError(
                        f"{name} offsets name partitions {sorted(extra)} of {topic!r} that assign does not list"
                    )


@dataclass(frozen=True)
class WriteOptions:
    bootstrap_servers: str
    topic: str | None
    kafka: dict[str, str]
    producer: dict[str, str | int | bool]  # librdkafka configuration (kafka_params.producer_config)


def parse_write_options(raw: Mapping[str, Any]) -> WriteOptions:
    options = _lower_keys(raw)
    kafka = _check_known(options, WRITE_OPTIONS)
    if _get(options, "path"):
        raise OptionError("writes go through a broker: set kafka.bootstrap.servers, not path")
    bootstrap = kafka.get("bootstrap.servers")
    if not bootstrap:
        raise OptionError("option kafka.bootstrap.servers is required for writes")
    topic = _get(options, "topic")
    return WriteOptions(bootstrap, topic.strip() if topic else None, kafka, producer_config(kafka))
