"""The registry's state as read from ``_schemas`` (Confluent's InMemoryCache and
KafkaStoreMessageHandler): subjects and versions, global ids, the schema-hash to id map (kept
after hard deletes, so a schema registered again gets its old id), references, configs and
modes. Only ``apply`` changes it, one record at a time in topic order."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from .records import Reference, SchemaValue, StoreKey

log = logging.getLogger(__name__)


def schema_hash(schema_type: str, schema: str, references: list[Reference]) -> str:
    """What makes two registrations the same schema (and so the same id)."""
    refs = [r.to_json() for r in references]
    text = json.dumps([schema_type, schema, refs], separators=(",", ":"), sort_keys=True)
    return hashlib.md5(text.encode()).hexdigest()


class RegistryState:
    def __init__(self) -> None:
        self.schemas: dict[str, dict[int, SchemaValue]] = {}
        self.id_versions: dict[int, dict[str, int]] = {}
        self.hash_to_id: dict[str, int] = {}
        # (subject, version) -> the (subject, version)s whose schemas reference it
        self.referenced_by: dict[tuple[str, int], set[tuple[str, int]]] = {}
        self.configs: dict[str | None, dict[str, Any]] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self.offset = -1  # last applied offset of the topic

    # -- applying records ---------------------------------------------------------------------
    def apply(self, key_bytes: bytes | None, value_bytes: bytes | None, offset: int) -> None:
        self.offset = max(self.offset, offset)
        if key_bytes is None:
            return
        try:
            key = StoreKey.parse(key_bytes)
            value = json.loads(value_bytes) if value_bytes is not None else None
        except (ValueError, KeyError, TypeError):
            log.warning("skipping an unreadable _schemas record at offset %d", offset)
            return
        if key is None:
            return
        if key.keytype == "SCHEMA":
            assert key.subject is not None and key.version is not None
            if value is None:
                self._tombstone(key.subject, key.version)
            else:
                self._put_schema(SchemaValue.from_json(value))
        elif key.keytype == "CONFIG":
            self._put_or_drop(self.configs, key.subject, value)
        elif key.keytype == "MODE":
            mode = value.get("mode") if isinstance(value, dict) else None
            self._put_or_drop(self.modes, key.subject, mode)
        elif value is None:
            return
        elif key.keytype == "DELETE_SUBJECT":
            self._delete_subject(str(value["subject"]), int(value["version"]))
        elif key.keytype == "CLEAR_SUBJECT":
            self._clear_subject(str(value["subject"]))

    @staticmethod
    def _put_or_drop(table: dict[str | None, Any], subject: str | None, value: Any) -> None:
        if value is None:
            table.pop(subject, None)
        else:
            table[subject] = value

    def _put_schema(self, value: SchemaValue) -> None:
        self.max_id = max(self.max_id, value.id)
        old = self.schemas.get(value.subject, {}).get(value.version)
        if old is not None:
            self._drop_references(old)
        self.schemas.setdefault(value.subject, {})[value.version] = value
        self.id_versions.setdefault(value.id, {})[value.subject] = value.version
        self.hash_to_id[schema_hash(value.schema_type, value.schema, value.references)] = value.id
        for ref in value.references:
            users = self.referenced_by.setdefault((ref.subject, ref.version), set())
            users.add((value.subject, value.version))

    def _drop_references(self, old: SchemaValue) -> None:
        for ref in old.references:
            users = self.referenced_by.get((ref.subject, ref.version))
            if users is not None:
                users.discard((old.subject, old.version))
                if not users:
                    del self.referenced_by[(ref.subject, ref.version)]

    def _tombstone(self, subject: str, version: int) -> None:
        versions = self.schemas.get(subject)
        old = versions.pop(version, None) if versions is not None else None
        if versions is not None and not versions:
            del self.schemas[subject]
        if old is None:
            return
        ids = self.id_versions.get(old.id)
        if ids is not None and ids.get(subject) == version:
            del ids[subject]
            if not ids:
                del self.id_versions[old.id]
        self._drop_references(old)

    def _delete_subject(self, subject: str, up_to: int) -> None:
        for version, value in self.schemas.get(subject, {}).items():
            if version <= up_to:
                value.deleted = True

    def _clear_subject(self, subject: str) -> None:
        for version in list(self.schemas.get(subject, {})):
            self._tombstone(subject, version)

    # -- reading ------------------------------------------------------------------------------
    def versions(self, subject: str, include_deleted: bool = False) -> list[int]:
        found = self.schemas.get(subject, {})
        return sorted(v for v, s in found.items() if include_deleted or not s.deleted)

    def get(self, subject: str, version: int) -> SchemaValue | None:
        return self.schemas.get(subject, {}).get(version)

    def latest(self, subject: str, include_deleted: bool = False) -> SchemaValue | None:
        versions = self.versions(subject, include_deleted)
        return self.schemas[subject][versions[-1]] if versions else None

    def subjects(self, include_deleted: bool = False) -> list[str]:
        return sorted(s for s in self.schemas if self.versions(s, include_deleted))

    def by_id(self, schema_id: int) -> SchemaValue | None:
        for subject, version in self.id_versions.get(schema_id, {}).items():
            return self.schemas[subject][version]
        return None

    def subject_versions_of(self, schema_id: int) -> dict[str, int]:
        return dict(self.id_versions.get(schema_id, {}))

    def id_of(self, schema_type: str, schema: str, references: list[Reference]) -> int | None:
        return self.hash_to_id.get(schema_hash(schema_type, schema, references))

    def users_of(
        self, subject: str, version: int, include_deleted: bool = False
    ) -> list[SchemaValue]:
        """The schemas referencing (subject, version), soft-deleted ones when asked."""
        found = [self.schemas[s][v] for s, v in self.referenced_by.get((subject, version), ())]
        return sorted(
            (u for u in found if include_deleted or not u.deleted), key=lambda u: u.id
        )
