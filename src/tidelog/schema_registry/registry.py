"""The registry's rules over its state (Confluent's KafkaSchemaRegistry): registering with
ids global and stable, lookups, soft and hard deletes, references, modes and the
compatibility check. Writes go through the store one at a time (Confluent's write lock);
reads answer from the state the store keeps current."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from . import avro_type, errors, json_type, protobuf_type  # noqa: F401 (schema type parsers)
from .compatibility import LEVELS, check
from .records import (
    Reference,
    SchemaValue,
    StoreKey,
    config_value,
    delete_subject,
    mode_value,
    schema_key,
)
from .schema_types import InvalidSchema, ParsedSchema, parse_schema
from .state import RegistryState, schema_hash
from .store import KafkaStore

MAX_VERSION = 2**31 - 1
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")


def parse_version(text: str) -> int | None:
    """A version path segment: an int in [1, 2^31-1], or None for ``latest``/``-1``."""
    if text in ("latest", "-1"):
        return None
    try:
        version = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if not 1 <= version <= MAX_VERSION:
        raise errors.invalid_version(text)
    return version


class SchemaRegistry:
    def __init__(self, store: KafkaStore, state: RegistryState, default_level: str) -> None:
        self.store = store
        self.state = state
        self.default_level = default_level.upper()
        self.write_lock = asyncio.Lock()
        self._parsed: OrderedDict[str, ParsedSchema] = OrderedDict()

    # -- parsing ------------------------------------------------------------------------------
    def resolve(self, ref: Reference) -> SchemaValue:
        value = self.state.get(ref.subject, ref.version)
        if value is None:
            raise InvalidSchema(
                f'Invalid schema: no schema reference found for subject "{ref.subject}" '
                f"and version {ref.version}"
            )
        return value

    def parse(self, schema_type: str, text: str, references: list[Reference]) -> ParsedSchema:
        key = schema_hash(schema_type, text, references)
        parsed = self._parsed.get(key)
        if parsed is None:
            try:
                parsed = parse_schema(schema_type, text, references, self.resolve)
            except InvalidSchema as exc:
                raise errors.invalid_schema(str(exc)) from None
            self._parsed[key] = parsed
            if len(self._parsed) > 1000:
                self._parsed.popitem(last=False)
        return parsed

    def parse_value(self, value: SchemaValue) -> ParsedSchema:
        return self.parse(value.schema_type, value.schema, value.references)

    def parse_request(self, body: Any, normalize: bool) -> tuple[ParsedSchema, dict[str, Any]]:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise errors.invalid_schema("Empty schema")
        schema_type = str(body.get("schemaType") or "AVRO").upper()
        try:
            refs = [Reference.from_json(r) for r in body.get("references") or []]
        except ValueError as exc:
            raise errors.invalid_schema(f"Invalid schema: {exc}") from None
        parsed = self.parse(schema_type, body["schema"], refs)
        return (parsed.normalized() if normalize else parsed), body

    # -- config and mode ----------------------------------------------------------------------
    def level(self, subject: str | None) -> str:
        for scope in (subject, None):
            config = self.state.configs.get(scope)
            if config and config.get("compatibilityLevel"):
                return str(config["compatibilityLevel"]).upper()
        return self.default_level

    def normalize_default(self, subject: str | None) -> bool:
        for scope in (subject, None):
            config = self.state.configs.get(scope)
            if config and config.get("normalize") is not None:
                return bool(config["normalize"])
        return False

    def mode(self, subject: str | None) -> str:
        for scope in (subject, None):
            if scope in self.state.modes:
                return self.state.modes[scope]
        return "READWRITE"

    def check_writable(self, subject: str) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.not_permitted(f"Subject {subject} is in read-only mode")

    # -- lookups ------------------------------------------------------------------------------
    def subject_versions(self, subject: str, deleted: bool) -> list[int]:
        versions = self.state.versions(subject, deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        return versions

    def get_version(self, subject: str, version_text: str, deleted: bool) -> SchemaValue:
        version = parse_version(version_text)
        if version is None:
            latest = self.state.latest(subject, deleted)
            if latest is None:
                raise errors.subject_not_found(subject)
            return latest
        value = self.state.get(subject, version)
        if value is None or (value.deleted and not deleted):
            if not self.state.versions(subject, deleted):
                raise errors.subject_not_found(subject)
            raise errors.version_not_found(version)
        return value

    def lookup(self, subject: str, body: Any, normalize: bool, deleted: bool) -> SchemaValue:
        """``POST /subjects/{subject}``: the version of ``subject`` holding this schema."""
        parsed, _ = self.parse_request(body, normalize or self.normalize_default(subject))
        if not self.state.versions(subject, True):
            raise errors.subject_not_found(subject)
        canonical = parsed.canonical()
        for version in reversed(self.state.versions(subject, deleted)):
            value = self.state.get(subject, version)
            assert value is not None
            same_kind = value.schema_type == parsed.schema_type
            if same_kind and value.references == parsed.references and (
                value.schema == canonical or self.parse_value(value).canonical() == canonical
            ):
                return value
        raise errors.schema_not_found()

    def by_id(self, schema_id: int) -> SchemaValue:
        value = self.state.by_id(schema_id)
        if value is None:
            raise errors.schema_not_found(schema_id)
        return value

    def referenced_by(self, subject: str, version_text: str) -> list[int]:
        value = self.get_version(subject, version_text, False)
        return sorted({u.id for u in self.state.users_of(subject, value.version)})

    # -- compatibility ------------------------------------------------------------------------
    def previous(self, subject: str) -> list[tuple[ParsedSchema, int | None]]:
        return [
            (self.parse_value(v), v.version)
            for v in (self.state.get(subject, n) for n in self.state.versions(subject))
            if v is not None
        ]

    def test_compatibility(
        self, subject: str, version_text: str | None, body: Any, normalize: bool
    ) -> list[str]:
        parsed, _ = self.parse_request(body, normalize or self.normalize_default(subject))
        level = self.level(subject)
        if version_text is None or parse_version(version_text) is None:
            previous = self.previous(subject)
        else:
            value = self.get_version(subject, version_text, False)
            previous = [(self.parse_value(value), value.version)]
        found = check(level, parsed, previous)
        if found:
            found.append(f"{{validateFields: 'false', compatibility: '{level}'}}")
        return found

    # -- writes -------------------------------------------------------------------------------
    async def register(self, subject: str, body: Any, normalize: bool) -> SchemaValue:
        async with self.write_lock:
            return await self._register(subject, body, normalize)

    async def _register(self, subject: str, body: Any, normalize: bool) -> SchemaValue:
        mode = self.mode(subject)
        self.check_writable(subject)
        parsed, request = self.parse_request(body, normalize or self.normalize_default(subject))
        wanted_id = int(request.get("id") or -1)
        wanted_version = int(request.get("version") or 0)
        if wanted_id >= 0 and mode != "IMPORT":
            raise errors.not_permitted(f"Subject {subject} is not in import mode")
        canonical = parsed.canonical()
        all_versions = self.state.versions(subject, True)
        new_version = max(all_versions, default=0) + 1
        existing = self.state.id_of(parsed.schema_type, canonical, parsed.references)
        if existing is not None and wanted_id < 0:
            wanted = self.state.subject_versions_of(existing).get(subject)
            live = self.state.get(subject, wanted) if wanted is not None else None
            if live is not None and not live.deleted and wanted_version == 0:
                return live
        for version in reversed(self.state.versions(subject)):
            value = self.state.get(subject, version)
            if (
                value is not None
                and self._same(value, parsed)
                and wanted_version == 0
                and wanted_id in (-1, value.id)
            ):
                return value
        if mode != "IMPORT":
            found = check(self.level(subject), parsed, self.previous(subject))
            if found:
                found.append(
                    f"{{validateFields: 'false', compatibility: '{self.level(subject)}'}}"
                )
                raise errors.incompatible(subject, found)
        schema_id = self._choose_id(wanted_id, existing, canonical, parsed)
        if wanted_version > 0:
            if wanted_version != new_version and mode != "IMPORT":
                raise errors.invalid_schema("Version is not one more than previous version")
            new_version = wanted_version
        value = SchemaValue(
            subject, new_version, schema_id, canonical, parsed.schema_type, parsed.references
        )
        await self._drop_deleted_copies(subject, schema_id, new_version)
        await self.store.put(schema_key(subject, new_version), value.to_bytes())
        return value

    async def _drop_deleted_copies(self, subject: str, schema_id: int, new_version: int) -> None:
        """Soft-deleted earlier versions of the same schema are tombstoned when it is
        registered again (Confluent does so), unless a schema still references them."""
        for version in self.state.versions(subject, True):
            old = self.state.get(subject, version)
            if (old is not None and old.deleted and old.id == schema_id
                    and version < new_version
                    and not self.state.users_of(subject, version, True)):
                await self.store.put(schema_key(subject, version), None)

    def _same(self, value: SchemaValue, parsed: ParsedSchema) -> bool:
        if value.schema_type != parsed.schema_type or value.references != parsed.references:
            return False
        return self.parse_value(value).canonical() == parsed.canonical()

    def _choose_id(
        self, wanted: int, existing: int | None, canonical: str, parsed: ParsedSchema
    ) -> int:
        if wanted >= 0:
            holder = self.state.by_id(wanted)
            if holder is not None and holder.schema != canonical:
                raise errors.id_does_not_match(
                    f"Schema already registered with id {wanted} instead of input id"
                )
            return wanted
        if existing is not None:
            return existing
        return self.state.max_id + 1

    async def delete_version(self, subject: str, version_text: str, permanent: bool) -> int:
        async with self.write_lock:
            value = self._version_to_delete(subject, version_text, permanent)
            self.check_writable(subject)
            if self.state.users_of(subject, value.version, permanent):
                raise errors.reference_exists(f"{{subject={subject},version={value.version}}}")
            if permanent:
                await self.store.put(schema_key(subject, value.version), None)
                if not self.state.versions(subject, True):
                    await self._drop_subject_settings(subject)
            else:
                gone = SchemaValue(
                    subject, value.version, value.id, value.schema, value.schema_type,
                    value.references, deleted=True,
                )
                await self.store.put(schema_key(subject, value.version), gone.to_bytes())
            return value.version

    def _version_to_delete(self, subject: str, version_text: str, permanent: bool) -> SchemaValue:
        version = parse_version(version_text)
        if version is None:
            latest = self.state.latest(subject, False)
            if latest is None:
                raise errors.subject_not_found(subject)
            return latest
        value = self.state.get(subject, version)
        if value is None:
            if not self.state.versions(subject, True):
                raise errors.subject_not_found(subject)
            raise errors.version_not_found(version)
        if value.deleted and not permanent:
            raise errors.version_soft_deleted(subject, version)
        if permanent and not value.deleted:
            raise errors.version_not_soft_deleted(subject, version)
        return value

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        async with self.write_lock:
            self.check_writable(subject)
            versions = self.state.versions(subject, permanent)
            if not versions:
                if self.state.versions(subject, True):
                    raise errors.subject_soft_deleted(subject)
                raise errors.subject_not_found(subject)
            for version in versions:
                users = [u for u in self.state.users_of(subject, version, permanent)
                         if u.subject != subject]
                if users:
                    raise errors.reference_exists(f"{{subject={subject},version={version}}}")
                value = self.state.get(subject, version)
                if permanent and value is not None and not value.deleted:
                    raise errors.subject_not_soft_deleted(subject)
            if permanent:
                for version in reversed(versions):
                    await self.store.put(schema_key(subject, version), None)
                await self._drop_subject_settings(subject)
            else:
                key, value_bytes = delete_subject(subject, versions[-1])
                await self.store.put(key, value_bytes)
            return versions

    # -- config and mode writes ---------------------------------------------------------------
    async def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.invalid_compatibility()
        level = body.get("compatibility", body.get("compatibilityLevel"))
        config = dict(self.state.configs.get(subject) or {})
        if level is not None:
            if not isinstance(level, str) or level.upper() not in LEVELS:
                raise errors.invalid_compatibility()
            config["compatibilityLevel"] = level.upper()
        if body.get("normalize") is not None:
            config["normalize"] = bool(body["normalize"])
        async with self.write_lock:
            await self.store.put(StoreKey("CONFIG", subject), config_value(subject, config))
        answer: dict[str, Any] = {"compatibility": config.get("compatibilityLevel")}
        if "normalize" in config:
            answer["normalize"] = config["normalize"]
        return answer

    async def delete_config(self, subject: str | None) -> dict[str, Any]:
        config = self.state.configs.get(subject)
        if subject is not None and config is None:
            raise errors.subject_config_not_configured(subject)
        async with self.write_lock:
            await self.store.put(StoreKey("CONFIG", subject), None)
        level = (config or {}).get("compatibilityLevel") or self.default_level
        return {"compatibilityLevel": level}

    async def set_mode(self, subject: str | None, body: Any, force: bool) -> dict[str, str]:
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode()
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            has_schemas = self.state.versions(subject) if subject else self.state.subjects()
            if has_schemas:
                raise errors.not_permitted("Cannot import since found existing subjects")
        async with self.write_lock:
            await self.store.put(StoreKey("MODE", subject), mode_value(subject, mode))
        return {"mode": mode}

    async def delete_mode(self, subject: str) -> dict[str, str]:
        if subject not in self.state.modes:
            raise errors.subject_mode_not_configured(subject)
        previous = self.state.modes[subject]
        async with self.write_lock:
            await self.store.put(StoreKey("MODE", subject), None)
        return {"mode": previous}

    async def _drop_subject_settings(self, subject: str) -> None:
        if subject in self.state.modes:
            await self.store.put(StoreKey("MODE", subject), None)
        if subject in self.state.configs:
            await self.store.put(StoreKey("CONFIG", subject), None)
