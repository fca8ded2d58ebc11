"""Where translation finds value schemas: the broker's own Schema Registry (its in-memory
state, read from ``_schemas``), and the codec of each schema, built once and cached.

Confluent's wire format: magic byte 0, a 4-byte big-endian schema id, then (Protobuf only)
the message indexes, then the encoded value."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Protocol

from tidelog.schema_registry.avro_type import AvroSchema
from tidelog.schema_registry.json_type import JsonSchema
from tidelog.schema_registry.protobuf_type import MAIN_FILE, ProtobufSchema
from tidelog.schema_registry.records import SchemaValue
from tidelog.schema_registry.schema_types import ParsedSchema

from .avro_values import AvroCodec, self_contained
from .json_values import JsonCodec
from .protobuf_values import ProtobufCodec, build_pool, message_descriptor, read_message_indexes
from .value_codec import UnsupportedSchema, ValueCodec

MAGIC = 0
_ID = struct.Struct(">bI")


class UndecodableRecord(ValueError):
    """Why a record's value has no row (it goes to the DLQ table or is dropped)."""


class SchemaNotYetKnown(UndecodableRecord):
    """An id above every id this broker's registry has read, in a cluster: the registry may
    not have read ``_schemas`` that far yet (translation waits a while before the DLQ)."""


class SchemaSource(Protocol):
    def by_id(self, schema_id: int) -> SchemaValue | None: ...

    def may_lag(self, schema_id: int) -> bool:
        """Whether ``schema_id`` may exist without this source having read it yet."""
        ...

    def latest(self, subject: str) -> SchemaValue | None: ...

    def version(self, subject: str, version: int) -> SchemaValue | None:
        """One version of a subject (what a schema's references name)."""
        ...

    def parse(self, value: SchemaValue) -> ParsedSchema: ...


class RegistrySchemas:
    """The broker's Schema Registry as a SchemaSource (reads only its state)."""

    def __init__(self, registry: object, *, replicated: bool = False) -> None:
        """``replicated``: the registry is one of a cluster's, reading ``_schemas`` behind
        its leader."""
        from tidelog.schema_registry.registry import SchemaRegistry

        assert isinstance(registry, SchemaRegistry)
        self._registry = registry
        self._replicated = replicated

    def may_lag(self, schema_id: int) -> bool:
        return self._replicated and schema_id > self._registry.state.max_id

    def by_id(self, schema_id: int) -> SchemaValue | None:
        return self._registry.state.by_id(schema_id)

    def latest(self, subject: str) -> SchemaValue | None:
        return self._registry.state.latest(subject)

    def version(self, subject: str, version: int) -> SchemaValue | None:
        return self._registry.state.get(subject, version)

    def parse(self, value: SchemaValue) -> ParsedSchema:
        return self._registry.parse_value(value)


def codec_of(parsed: ParsedSchema, indexes: list[int] | None = None) -> ValueCodec:
    if isinstance(parsed, AvroSchema):
        return AvroCodec(self_contained(parsed.schema))
    if isinstance(parsed, JsonSchema):
        return JsonCodec(parsed.json)
    if isinstance(parsed, ProtobufSchema):
        pool = build_pool(parsed.file, parsed.dependencies)
        return ProtobufCodec(message_descriptor(pool, MAIN_FILE, indexes or []))
    raise UnsupportedSchema(f"schema type {parsed.schema_type} has no Iceberg mapping")


class Codecs:
    """Codecs by (schema id, protobuf message indexes), built on first use."""

    def __init__(self, source: SchemaSource | None) -> None:
        self.source = source
        self._by_key: dict[tuple[int, tuple[int, ...]], ValueCodec | UnsupportedSchema] = {}
        # ids whose schema is not Protobuf -> their codec: one dict lookup per record (a
        # registered id's schema never changes)
        self._plain: dict[int, ValueCodec] = {}

    def split(self, value: bytes) -> tuple[int, ValueCodec, bytes]:
        """(schema id, codec, payload) of a value in Confluent's wire format."""
        if len(value) < 5 or value[0] != MAGIC:
            raise UndecodableRecord("value is not in Confluent's wire format (magic byte 0 "
                                    "and a 4-byte schema id)")
        _, schema_id = _ID.unpack_from(value, 0)
        payload = value[5:]
        plain = self._plain.get(schema_id)
        if plain is not None:
            return schema_id, plain, payload
        schema = self._schema(schema_id)
        indexes: list[int] = []
        if schema.schema_type == "PROTOBUF":
            try:
                indexes, pos = read_message_indexes(payload)
            except ValueError as exc:
                raise UndecodableRecord(f"bad protobuf message indexes: {exc}") from None
            payload = payload[pos:]
        codec = self._codec(schema_id, schema, indexes)
        if schema.schema_type != "PROTOBUF":
            self._plain[schema_id] = codec
        return schema_id, codec, payload

    def plain(self, schema_id: int) -> ValueCodec | None:
        """The codec of every value framed with ``schema_id`` (None for a Protobuf schema:
        its values carry message indexes, split value by value)."""
        plain = self._plain.get(schema_id)
        if plain is not None:
            return plain
        schema = self._schema(schema_id)
        if schema.schema_type == "PROTOBUF":
            return None
        codec = self._plain[schema_id] = self._codec(schema_id, schema, [])
        return codec

    def message(self, schema_id: int) -> ValueCodec:
        """The codec of a Protobuf schema's values framed with the message indexes []."""
        return self._codec(schema_id, self._schema(schema_id), [])

    def latest(self, subject: str) -> tuple[int, ValueCodec]:
        if self.source is None:
            raise UndecodableRecord("no schema registry")
        schema = self.source.latest(subject)
        if schema is None:
            raise UndecodableRecord(f"subject {subject} has no schema")
        return schema.id, self._codec(schema.id, schema, [])

    def _schema(self, schema_id: int) -> SchemaValue:
        schema = self.source.by_id(schema_id) if self.source is not None else None
        if schema is None:
            if self.source is not None and self.source.may_lag(schema_id):
                raise SchemaNotYetKnown(f"unknown schema id {schema_id}")
            raise UndecodableRecord(f"unknown schema id {schema_id}")
        return schema

    def _codec(self, schema_id: int, schema: SchemaValue, indexes: list[int]) -> ValueCodec:
        key = (schema_id, tuple(indexes))
        found = self._by_key.get(key)
        if found is None:
            try:
                assert self.source is not None
                found = codec_of(self.source.parse(schema), indexes)
            except UnsupportedSchema as exc:
                found = exc
            except Exception as exc:  # a schema the registry holds but we cannot build
                found = UnsupportedSchema(f"schema {schema_id}: {exc}")
            self._by_key[key] = found
        if isinstance(found, UnsupportedSchema):
            raise UndecodableRecord(f"schema {schema_id} has no Iceberg mapping: {found}")
        return found

    def cached(self) -> Mapping[tuple[int, tuple[int, ...]], object]:
        return dict(self._by_key)
