"""Validated topics (Confluent Server's broker-side schema validation): with
``confluent.value.schema.validation=true`` (or ``confluent.key.schema.validation``) on a
topic, every record's value (key) must carry Confluent's framing — magic byte 0 and a 4-byte
schema id — and that id must be registered under the subject the topic's naming strategy
gives (``confluent.value.subject.name.strategy``: TopicNameStrategy, RecordNameStrategy or
TopicRecordNameStrategy). A batch with any other record is refused whole with INVALID_RECORD
and a message naming each offending record, as Kafka's record validation answers.

The produce path calls ``SchemaIdValidator.validate`` with the topic's config overrides and
the batch bytes before appending; records are read, never rewritten."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tidelog.records import InvalidRecordError, iter_batches
from tidelog.storage.errors import RecordValidationError

from .registry import SchemaRegistry

TOPIC_NAME = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")


def _enabled(overrides: Mapping[str, Any], key: str) -> bool:
    return str(overrides.get(key, "false")).strip().lower() == "true"


def _strategy(overrides: Mapping[str, Any], part: str) -> str:
    name = str(overrides.get(f"confluent.{part}.subject.name.strategy") or TOPIC_NAME)
    short = name.rsplit(".", 1)[-1]
    return short if short in STRATEGIES else "TopicNameStrategy"


class SchemaIdValidator:
    def __init__(self, registry: SchemaRegistry) -> None:
        self.registry = registry

    @staticmethod
    def applies(overrides: Mapping[str, Any]) -> bool:
        return _enabled(overrides, "confluent.value.schema.validation") or _enabled(
            overrides, "confluent.key.schema.validation"
        )

    def validate(
        self, topic: str, overrides: Mapping[str, Any], records: bytes
    ) -> RecordValidationError | None:
        """None when every record passes (or the topic is not validated); otherwise the
        error the produce answers with (INVALID_RECORD)."""
        parts = [p for p in ("key", "value") if _enabled(overrides, f"confluent.{p}.schema.validation")]
        if not parts:
            return None
        errors: list[tuple[int, str]] = []
        index = 0
        for batch in iter_batches(records):
            if batch.is_control:
                continue
            for record in batch.iter_records():
                for part in parts:
                    data = record.key if part == "key" else record.value
                    problem = self._check(topic, part, _strategy(overrides, part), data)
                    if problem is not None:
                        errors.append((index, f"Record {index}: {problem}"))
                index += 1
        if not errors:
            return None
        first = errors[0][1]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        cause = InvalidRecordError(
            f"Log record for topic {topic} failed schema validation: {first}{more}"
        )
        return RecordValidationError(errors, cause)

    def _check(self, topic: str, part: str, strategy: str, data: bytes | None) -> str | None:
        if data is None:
            return None  # tombstones and keyless records carry no schema
        if len(data) < 5 or data[0] != 0:
            return f"the {part} does not start with the magic byte 0 and a schema id"
        schema_id = int.from_bytes(data[1:5], "big")
        state = self.registry.state
        value = state.by_id(schema_id)
        if value is None:
            return f"the {part}'s schema id {schema_id} is not registered"
        subject = self._subject(topic, part, strategy, value.schema_type, value.schema)
        if subject is None:
            return f"the {part}'s schema {schema_id} names no record for {strategy}"
        if subject not in state.subject_versions_of(schema_id):
            return f"the {part}'s schema id {schema_id} is not registered under subject {subject}"
        return None

    @staticmethod
    def _subject(
        topic: str, part: str, strategy: str, schema_type: str, text: str
    ) -> str | None:
        if strategy == "TopicNameStrategy":
            return f"{topic}-{part}"
        name = record_name(schema_type, text)
        if name is None:
            return None
        return name if strategy == "RecordNameStrategy" else f"{topic}-{name}"


def record_name(schema_type: str, text: str) -> str | None:
    """The fully qualified record name the record-name strategies use."""
    if schema_type == "PROTOBUF":
        package, message = "", None
        for line in text.splitlines():
            words = line.split()
            if words[:1] == ["package"] and len(words) > 1:
                package = words[1].rstrip(";")
            if words[:1] == ["message"] and len(words) > 1 and message is None:
                message = words[1]
        return None if message is None else (f"{package}.{message}" if package else message)
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    if schema_type == "JSON":
        title = obj.get("title")
        return title if isinstance(title, str) else None
    name, space = obj.get("name"), obj.get("namespace")
    if not isinstance(name, str):
        return None
    return name if "." in name or not space else f"{space}.{name}"
