"""Avro schemas (parsed by the ``avro`` library, referenced named types defined first, as
Confluent's AvroSchema does) and their canonical string: Avro Java's ``Schema.toString()``
form — attributes in its order, namespaces written only where they change, named types
written once and then by name, referenced types by name."""

from __future__ import annotations

import json
from typing import Any

import avro.errors
import avro.schema

from .avro_compat import describe, reader_writer_incompatibilities
from .records import Reference
from .schema_types import PARSERS, InvalidSchema, ParsedSchema, Resolver

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
NAMED = {"record", "error", "enum", "fixed"}
_NAMED_KEYS = {"type", "name", "namespace", "doc", "fields", "symbols", "size", "aliases", "default"}
_FIELD_KEYS = {"name", "type", "doc", "default", "order", "aliases"}


def _full_name(name: str, space: str | None) -> tuple[str, str | None]:
    if "." in name:
        own = name.rsplit(".", 1)[0]
        return name, own or None
    return (f"{space}.{name}" if space else name), space


def _name_ref(full: str, space: str | None) -> str:
    own, _, short = full.rpartition(".")
    return short if (own or None) == space else full


class _Canonical:
    def __init__(self, known: set[str]) -> None:
        self.known = known

    def write(self, node: Any, space: str | None) -> Any:
        if isinstance(node, str):
            if node in PRIMITIVES:
                return node
            return _name_ref(_full_name(node, space)[0], space)
        if isinstance(node, list):
            return [self.write(n, space) for n in node]
        if not isinstance(node, dict):
            raise InvalidSchema(f"not an Avro schema: {node!r}")
        kind = node.get("type")
        if kind in NAMED:
            return self._named(node, str(kind), space)
        props = {k: v for k, v in node.items() if k not in ("type", "items", "values")}
        if kind == "array":
            return {"type": "array", "items": self.write(node["items"], space), **props}
        if kind == "map":
            return {"type": "map", "values": self.write(node["values"], space), **props}
        if kind in PRIMITIVES:
            return {"type": kind, **props} if props else kind
        return self.write(kind, space)  # {"type": {...}} or {"type": "a.Named"}

    def _named(self, node: dict[str, Any], kind: str, space: str | None) -> Any:
        ns = node.get("namespace") or None
        full, own = _full_name(str(node["name"]), ns if ns is not None else space)
        if "." not in str(node["name"]) and "namespace" in node:
            own = ns
        if full in self.known:
            return _name_ref(full, space)
        self.known.add(full)
        out: dict[str, Any] = {"type": kind, "name": full.rpartition(".")[2]}
        if own != space:
            out["namespace"] = own or ""
        if "doc" in node:
            out["doc"] = node["doc"]
        if kind in ("record", "error"):
            out["fields"] = [self._field(f, own) for f in node.get("fields", [])]
        elif kind == "enum":
            out["symbols"] = node["symbols"]
            if "default" in node:
                out["default"] = node["default"]
        else:
            out["size"] = node["size"]
        out.update({k: v for k, v in node.items() if k not in _NAMED_KEYS})
        if node.get("aliases"):
            out["aliases"] = node["aliases"]
        return out

    def _field(self, field: dict[str, Any], space: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {"name": field["name"], "type": self.write(field["type"], space)}
        if "doc" in field:
            out["doc"] = field["doc"]
        if "default" in field:
            out["default"] = field["default"]
        if field.get("order", "ascending") != "ascending":
            out["order"] = field["order"]
        if field.get("aliases"):
            out["aliases"] = field["aliases"]
        out.update({k: v for k, v in field.items() if k not in _FIELD_KEYS})
        return out


class AvroSchema(ParsedSchema):
    schema_type = "AVRO"

    def __init__(
        self, text: str, references: list[Reference], resolve: Resolver
    ) -> None:
        super().__init__(references)
        names = avro.schema.Names()
        self.referenced_names: set[str] = set()
        try:
            self._define(references, resolve, names, set())
            self.json = json.loads(text)
            self.schema = avro.schema.make_avsc_object(self.json, names)
            self._canonical = json.dumps(
                _Canonical(set(self.referenced_names)).write(self.json, None),
                separators=(",", ":"),
                ensure_ascii=False,
            )
        except (avro.errors.AvroException, ValueError, KeyError, TypeError) as exc:
            raise InvalidSchema(f"Invalid schema: {exc}") from exc

    def _define(
        self,
        references: list[Reference],
        resolve: Resolver,
        names: avro.schema.Names,
        seen: set[tuple[str, int]],
    ) -> None:
        """Define referenced named types first, depth first, each version once."""
        for ref in references:
            value = resolve(ref)
            if (value.subject, value.version) in seen:
                continue
            seen.add((value.subject, value.version))
            self._define(value.references, resolve, names, seen)
            before = set(names.names)
            avro.schema.make_avsc_object(json.loads(value.schema), names)
            self.referenced_names |= set(names.names) - before

    def canonical(self) -> str:
        return self._canonical

    def backward_errors(self, previous: ParsedSchema, reader: str, writer: str) -> list[str]:
        if not isinstance(previous, AvroSchema):
            return ["Incompatible because of different schema type"]
        found = reader_writer_incompatibilities(self.schema, previous.schema)
        return [describe(f, reader, writer) for f in found]


def parse_avro(text: str, references: list[Reference], resolve: Resolver) -> ParsedSchema:
    return AvroSchema(text, references, resolve)


PARSERS["AVRO"] = parse_avro
