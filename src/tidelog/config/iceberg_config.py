"""Iceberg topics' settings, declared once: the per-topic ``tidelog.iceberg.*`` keys (Redpanda's
``redpanda.iceberg.*`` topic properties under our prefix; Redpanda's names are accepted as
aliases) and the broker's ``iceberg.*`` keys (catalog, warehouse, namespace, lag).

The partition spec grammar is Redpanda's: ``(hour(kafka.timestamp), region, bucket(16, id))``
— a parenthesised, comma-separated list of fields, each a column path or a transform of one
(identity, year, month, day, hour, bucket(N, col), truncate(N, col)). It is parsed here, with
no Iceberg library, so that CreateTopics and AlterConfigs refuse a bad spec with
INVALID_CONFIG before any table exists."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .core import ConfigDef, ConfigError, at_least, between, one_of

DISABLED = "disabled"
KEY_VALUE = "key_value"
VALUE_SCHEMA_ID_PREFIX = "value_schema_id_prefix"
VALUE_SCHEMA_LATEST = "value_schema_latest"
MODES = (DISABLED, KEY_VALUE, VALUE_SCHEMA_ID_PREFIX, VALUE_SCHEMA_LATEST)
DLQ_TABLE = "dlq_table"
DROP = "drop"
DEFAULT_PARTITION_SPEC = "(hour(kafka.timestamp))"

MODE = "tidelog.iceberg.mode"
PARTITION_SPEC = "tidelog.iceberg.partition.spec"
TARGET_LAG_MS = "tidelog.iceberg.target.lag.ms"
INVALID_RECORD_ACTION = "tidelog.iceberg.invalid.record.action"
DELETE = "tidelog.iceberg.delete"

# Redpanda's topic property names -> ours, so a Redpanda user's topic configs port
TOPIC_ALIASES: dict[str, str] = {
    "redpanda.iceberg.mode": MODE,
    "redpanda.iceberg.partition.spec": PARTITION_SPEC,
    "redpanda.iceberg.target.lag.ms": TARGET_LAG_MS,
    "redpanda.iceberg.invalid.record.action": INVALID_RECORD_ACTION,
    "redpanda.iceberg.delete": DELETE,
}

TIME_TRANSFORMS = ("year", "month", "day", "hour")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_FIELD = re.compile(
    rf"^(?:(?P<fn>identity|year|month|day|hour|void)\(\s*(?P<col1>{_NAME})\s*\)"
    rf"|(?P<fn2>bucket|truncate)\(\s*(?P<n>\d+)\s*,\s*(?P<col2>{_NAME})\s*\)"
    rf"|(?P<col>{_NAME}))$"
)


@dataclass(frozen=True)
class SpecField:
    """One partition field: a transform (identity, hour, bucket, ...) of a column path."""

    transform: str
    column: str
    width: int | None = None  # bucket count or truncate width


def parse_partition_spec(text: str) -> list[SpecField]:
    """The fields of a partition spec (``()`` is unpartitioned); ValueError says why not."""
    s = text.strip()
    if not (s.startswith("(") and s.endswith(")")):
        raise ValueError("a partition spec is a parenthesised list, e.g. (hour(kafka.timestamp))")
    body = s[1:-1].strip()
    if not body:
        return []
    out: list[SpecField] = []
    for part in _split_top_level(body):
        m = _FIELD.match(part.strip())
        if m is None:
            raise ValueError(f"cannot parse partition field {part.strip()!r}")
        if m.group("col"):
            out.append(SpecField("identity", m.group("col")))
        elif m.group("fn"):
            out.append(SpecField(m.group("fn"), m.group("col1")))
        else:
            width = int(m.group("n"))
            if width < 1:
                raise ValueError(f"{m.group('fn2')} needs a positive width in {part.strip()!r}")
            out.append(SpecField(m.group("fn2"), m.group("col2"), width))
    return out


def _split_top_level(body: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced parentheses")
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    if depth != 0:
        raise ValueError("unbalanced parentheses")
    parts.append(body[start:])
    return parts


def _spec_validator(name: str, v: Any) -> None:
    try:
        parse_partition_spec(str(v))
    except ValueError as exc:
        raise ConfigError(name, v, str(exc)) from None


def define_topic_keys(define: Any) -> None:
    """Declare the per-topic keys with ``define(name, type, default, doc, validator)``."""
    define(MODE, "string", DISABLED,
           "Iceberg topic mode: disabled, key_value (key and value as binary columns), "
           "value_schema_id_prefix (values in Confluent's wire format, typed columns from the "
           "registry's schema for their id) or value_schema_latest (the subject's latest "
           "schema). Alias: redpanda.iceberg.mode.", one_of(*MODES))
    define(PARTITION_SPEC, "string", DEFAULT_PARTITION_SPEC,
           "The Iceberg table's partition spec, e.g. (hour(kafka.timestamp), bucket(16, id)).",
           _spec_validator)
    define(TARGET_LAG_MS, "long", -1,
           "How long a record may wait before it is committed to the table; -1: the broker's "
           "iceberg.target.lag.ms.", at_least(-1))
    define(INVALID_RECORD_ACTION, "string", DLQ_TABLE,
           "What becomes of a record that cannot be decoded: dlq_table (the <topic>~dlq table "
           "with its raw key, value, coordinates and reason) or drop.",
           one_of(DLQ_TABLE, DROP))
    define(DELETE, "boolean", True, "Drop the Iceberg table when the topic is deleted.")


def canonical_topic_configs(configs: Mapping[str, Any]) -> dict[str, Any]:
    """Topic configs with Redpanda's ``redpanda.iceberg.*`` names given as ours."""
    return {TOPIC_ALIASES.get(k, k): v for k, v in configs.items()}


def canonical_topic_config_name(name: str) -> str:
    return TOPIC_ALIASES.get(name, name)


# -- the broker's keys ----------------------------------------------------------------------
def _warehouse(name: str, v: Any) -> None:
    if v and not str(v).startswith(("file://", "s3://", "s3a://", "/")):
        raise ConfigError(name, v, "expected a file:// or s3:// location")


ICEBERG_CONFIG_DEF = (
    ConfigDef()
    .define("iceberg.enabled", "boolean", False,
            "Translate the records of topics whose tidelog.iceberg.mode is not disabled into "
            "Iceberg tables.")
    .define("iceberg.catalog.type", "string", "sql",
            "sql: an embedded SQLite catalog (pyiceberg's SqlCatalog); rest: an Iceberg REST "
            "catalog at iceberg.catalog.uri.", one_of("sql", "rest"))
    .define("iceberg.catalog.uri", "string", "",
            "The catalog: a SQLAlchemy URI for sql (default sqlite:///<first log dir>/.iceberg/"
            "catalog.db), the REST endpoint for rest.")
    .define("iceberg.catalog.name", "string", "tidelog", "The catalog's name.")
    .define("iceberg.warehouse", "string", "",
            "Where data files go: file://... or s3://... (default file://<first log dir>/"
            ".iceberg/warehouse).", _warehouse)
    .define("iceberg.namespace", "string", "kafka", "The namespace of the topics' tables.")
    .define("iceberg.target.lag.ms", "long", 60000,
            "How long a record may wait before it is committed to its table.", at_least(1))
    .define("iceberg.maintenance.interval.ms", "long", 600000,
            "How often each topic's tables have their snapshots expired (older than the "
            "table's history.expire.max-snapshot-age-ms, keeping its "
            "history.expire.min-snapshots-to-keep) and their orphan files removed; 0: "
            "never.", at_least(0))
    .define("iceberg.orphan.files.older.than.ms", "long", 259_200_000,
            "Files under a topic's table location that the table does not reference are "
            "deleted at each maintenance pass once older than this (Iceberg's "
            "remove-orphan-files older_than, 3 days): what failed or interrupted commits "
            "left. -1: never.", at_least(-1))
    .define("iceberg.translation.nice", "int", 10,
            "How much lower than the broker's the OS priority of the translation and "
            "maintenance threads (or of the translation worker process, with "
            "iceberg.translation.process) is (added to their nice value, at most 19; Linux, "
            "where a thread has its own): on a machine with no core to spare the produce path gets "
            "the CPU first, and translation uses the slack of its target lag. 0: the "
            "broker's priority.", between(0, 19))
    .define("iceberg.translation.process", "boolean", False,
            "Run the table side of translation (decoding, Arrow, Parquet, the catalog "
            "commits, maintenance) in a worker process of its own instead of the broker's "
            "translation threads: the broker's event loop then never waits for the "
            "interpreter lock a flush holds. The worker is started clean, its whole process "
            "niced by iceberg.translation.nice, ends with the broker, and is started again "
            "(translation paused meanwhile) if it dies.")
    .define("iceberg.dlq.table.suffix", "string", "~dlq",
            "Suffix of the table that holds a topic's undecodable records.")
    .define("iceberg.rest.credential", "password", None,
            "OAuth2 client credential (client_id:secret) for a REST catalog.")
    .define("iceberg.rest.token", "password", None, "Bearer token for a REST catalog.")
    .define("iceberg.rest.sigv4.enabled", "boolean", False,
            "Sign REST catalog requests with AWS SigV4.")
    .define("iceberg.rest.signing.region", "string", None, "SigV4 signing region.")
    .define("iceberg.rest.signing.name", "string", "execute-api", "SigV4 signing name.")
    .define("iceberg.s3.endpoint", "string", None, "S3 endpoint of an s3:// warehouse.")
    .define("iceberg.s3.access.key.id", "password", None, "S3 access key id.")
    .define("iceberg.s3.secret.access.key", "password", None, "S3 secret access key.")
    .define("iceberg.s3.region", "string", None, "S3 region.")
)
