"""The ``_schemas`` topic's records, byte for byte as Confluent Schema Registry writes them: a
JSON key naming what changed (``keytype`` SCHEMA, CONFIG, MODE, DELETE_SUBJECT,
CLEAR_SUBJECT, NOOP; Jackson's property order) and a JSON value, or a tombstone. A topic copied
from a Confluent registry loads as is; unknown key types are skipped, as Confluent does."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}

    @classmethod
    def from_json(cls, obj: Any) -> Reference:
        if not isinstance(obj, dict):
            raise ValueError("a reference is an object with name, subject and version")
        name, subject, version = obj.get("name"), obj.get("subject"), obj.get("version")
        if not isinstance(name, str) or not isinstance(subject, str):
            raise ValueError("a reference needs a name and a subject")
        if isinstance(version, bool) or not isinstance(version, int):
            raise ValueError("a reference needs an integer version")
        return cls(name, subject, version)


@dataclass(slots=True)
class SchemaValue:
    """One version of a subject (Confluent's SchemaValue; ``schemaType`` absent for AVRO)."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: list[Reference] = field(default_factory=list)
    deleted: bool = False

    def to_bytes(self) -> bytes:
        obj: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":
            obj["schemaType"] = self.schema_type
        if self.references:
            obj["references"] = [r.to_json() for r in self.references]
        obj["schema"] = self.schema
        obj["deleted"] = self.deleted
        return _dumps(obj)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> SchemaValue:
        return cls(
            subject=str(obj["subject"]),
            version=int(obj["version"]),
            id=int(obj["id"]),
            schema=str(obj["schema"]),
            schema_type=str(obj.get("schemaType") or "AVRO"),
            references=[Reference.from_json(r) for r in obj.get("references") or []],
            deleted=bool(obj.get("deleted", False)),
        )


@dataclass(frozen=True, slots=True)
class StoreKey:
    """A ``_schemas`` key: ``keytype`` plus the subject (None: global) and version."""

    keytype: str
    subject: str | None = None
    version: int | None = None

    def to_bytes(self) -> bytes:
        if self.keytype == "SCHEMA":
            return _dumps(
                {"keytype": "SCHEMA", "subject": self.subject, "version": self.version,
                 "magic": 1}
            )
        if self.keytype == "NOOP":
            return _dumps({"keytype": "NOOP", "magic": 0})
        return _dumps({"keytype": self.keytype, "subject": self.subject, "magic": 0})

    @classmethod
    def parse(cls, data: bytes) -> StoreKey | None:
        """None for a key this registry does not know (newer key types are skipped)."""
        obj = json.loads(data)
        if not isinstance(obj, dict):
            return None
        keytype = obj.get("keytype")
        if keytype == "SCHEMA":
            return cls("SCHEMA", str(obj["subject"]), int(obj["version"]))
        if keytype in ("CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT"):
            subject = obj.get("subject")
            return cls(str(keytype), None if subject is None else str(subject))
        if keytype == "NOOP":
            return cls("NOOP")
        return None


def schema_key(subject: str, version: int) -> StoreKey:
    return StoreKey("SCHEMA", subject, version)


def config_key(subject: str | None) -> StoreKey:
    return StoreKey("CONFIG", subject)


def mode_key(subject: str | None) -> StoreKey:
    return StoreKey("MODE", subject)


def config_value(subject: str | None, config: dict[str, Any]) -> bytes:
    obj: dict[str, Any] = {}
    if subject is not None:
        obj["subject"] = subject
    obj.update(config)
    return _dumps(obj)


def mode_value(subject: str | None, mode: str) -> bytes:
    obj: dict[str, Any] = {} if subject is None else {"subject": subject}
    obj["mode"] = mode
    return _dumps(obj)


def delete_subject(subject: str, version: int) -> tuple[StoreKey, bytes]:
    return StoreKey("DELETE_SUBJECT", subject), _dumps({"subject": subject, "version": version})
