"""Avro's schema-resolution compatibility (Apache Avro's Java ``SchemaCompatibility``, which
Confluent's registry runs): can a reader schema decode everything a writer schema writes?
Field defaults, numeric and string/bytes promotions, aliases, unions and enum defaults, each
incompatibility with its type, JSON-pointer location and message as Avro reports them (the
registry's 409 details quote them)."""

from __future__ import annotations

from dataclasses import dataclass

from avro.schema import (
    ArraySchema,
    EnumSchema,
    Field,
    FixedSchema,
    MapSchema,
    NamedSchema,
    RecordSchema,
    Schema,
    UnionSchema,
)

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
# reader type -> writer types it promotes from (Avro's resolution rules)
PROMOTIONS = {
    "long": {"int"},
    "float": {"int", "long"},
    "double": {"int", "long", "float"},
    "bytes": {"string"},
    "string": {"bytes"},
}


@dataclass(frozen=True, slots=True)
class Incompatibility:
    type: str  # Avro's SchemaIncompatibilityType name, e.g. READER_FIELD_MISSING_DEFAULT_VALUE
    location: str
    message: str


def _pointer(location: list[str]) -> str:
    return "/" + "/".join(c.replace("~", "~0").replace("/", "~1") for c in location)


def _type_name(schema: Schema) -> str:
    return str(schema.type).upper()


def _aliases(schema: NamedSchema) -> set[str]:
    space = schema.namespace
    found = set()
    aliases: list[str] = list(schema.props.get("aliases") or [])  # type: ignore[call-overload]
    for alias in aliases:
        found.add(alias if "." in alias or not space else f"{space}.{alias}")
    return found


class _Checker:
    def __init__(self) -> None:
        # (reader, writer) ids -> result; None while in progress (a recursive type: compatible)
        self.seen: dict[tuple[int, int], list[Incompatibility] | None] = {}

    def check(self, reader: Schema, writer: Schema, location: list[str]) -> list[Incompatibility]:
        pair = (id(reader), id(writer))
        if pair in self.seen:  # Avro memoizes the pair the same way
            return list(self.seen[pair] or [])
        self.seen[pair] = None
        found = self._calculate(reader, writer, location)
        self.seen[pair] = found
        return found

    def _calculate(self, reader: Schema, writer: Schema, loc: list[str]) -> list[Incompatibility]:
        if reader.type == writer.type:
            return self._same_type(reader, writer, loc)
        if isinstance(writer, UnionSchema):
            out: list[Incompatibility] = []
            for branch in writer.schemas:
                out += self.check(reader, branch, loc)
            return out
        if isinstance(reader, UnionSchema):
            for branch in reader.schemas:
                if not self.check(branch, writer, loc):
                    return []
            return [
                Incompatibility(
                    "MISSING_UNION_BRANCH",
                    _pointer(loc),
                    f"reader union lacking writer type: {_type_name(writer)}",
                )
            ]
        if writer.type in PROMOTIONS.get(reader.type, ()):
            return []
        message = (
            f"reader type: {_type_name(reader)} not compatible with writer type: "
            f"{_type_name(writer)}"
        )
        return [Incompatibility("TYPE_MISMATCH", _pointer(loc), message)]

    def _same_type(self, reader: Schema, writer: Schema, loc: list[str]) -> list[Incompatibility]:
        if reader.type in PRIMITIVES:
            return []
        if isinstance(reader, ArraySchema) and isinstance(writer, ArraySchema):
            return self.check(reader.items, writer.items, [*loc, "items"])
        if isinstance(reader, MapSchema) and isinstance(writer, MapSchema):
            return self.check(reader.values, writer.values, [*loc, "values"])
        if isinstance(reader, FixedSchema) and isinstance(writer, FixedSchema):
            out = self._names(reader, writer, loc)
            if reader.size != writer.size:
                message = f"expected: {writer.size}, found: {reader.size}"
                out.append(Incompatibility("FIXED_SIZE_MISMATCH", _pointer([*loc, "size"]), message))
            return out
        if isinstance(reader, EnumSchema) and isinstance(writer, EnumSchema):
            return self._names(reader, writer, loc) + self._enum(reader, writer, loc)
        if isinstance(reader, RecordSchema) and isinstance(writer, RecordSchema):
            return self._names(reader, writer, loc) + self._fields(reader, writer, loc)
        if isinstance(reader, UnionSchema) and isinstance(writer, UnionSchema):
            out = []
            for i, branch in enumerate(writer.schemas):
                if self.check(reader, branch, [*loc, str(i)]):
                    out.append(
                        Incompatibility(
                            "MISSING_UNION_BRANCH",
                            _pointer([*loc, str(i)]),
                            f"reader union lacking writer type: {_type_name(branch)}",
                        )
                    )
            return out
        raise ValueError(f"unknown Avro type {reader.type}")

    @staticmethod
    def _names(reader: NamedSchema, writer: NamedSchema, loc: list[str]) -> list[Incompatibility]:
        if reader.name == writer.name or writer.fullname in _aliases(reader):
            return []
        return [
            Incompatibility(
                "NAME_MISMATCH", _pointer([*loc, "name"]), f"expected: {writer.fullname}"
            )
        ]

    @staticmethod
    def _enum(reader: EnumSchema, writer: EnumSchema, loc: list[str]) -> list[Incompatibility]:
        missing = sorted(set(writer.symbols) - set(reader.symbols))
        default = reader.props.get("default")
        if not missing or (default is not None and default in reader.symbols):
            return []
        return [
            Incompatibility(
                "MISSING_ENUM_SYMBOLS", _pointer([*loc, "symbols"]), f"[{', '.join(missing)}]"
            )
        ]

    def _fields(
        self, reader: RecordSchema, writer: RecordSchema, loc: list[str]
    ) -> list[Incompatibility]:
        out: list[Incompatibility] = []
        for i, field in enumerate(reader.fields):
            at = [*loc, "fields", str(i)]
            writer_field = _writer_field(writer, field)
            if writer_field is not None:
                out += self.check(field.type, writer_field.type, [*at, "type"])
            elif field.has_default:
                continue
            elif isinstance(field.type, EnumSchema) and field.type.props.get("default"):
                out += self.check(field.type, writer, [*at, "type"])
            else:
                out.append(
                    Incompatibility("READER_FIELD_MISSING_DEFAULT_VALUE", _pointer(at), field.name)
                )
        return out


def _writer_field(writer: RecordSchema, field: Field) -> Field | None:
    fields: dict[str, Field] = writer.fields_dict
    aliases: list[str] = list(field.props.get("aliases") or [])  # type: ignore[call-overload]
    for name in [field.name, *aliases]:
        if name in fields:
            return fields[name]
    return None


def reader_writer_incompatibilities(reader: Schema, writer: Schema) -> list[Incompatibility]:
    """Every reason ``reader`` cannot decode data written with ``writer`` ([] = compatible)."""
    return _Checker().check(reader, writer, [])


DESCRIPTIONS = {
    "FIXED_SIZE_MISMATCH": "The size of FIXED type field at path '{path}' in the {reader} "
    "schema does not match with the {writer} schema",
    "TYPE_MISMATCH": "The type (path '{path}') of a field in the {reader} schema does not "
    "match with the {writer} schema",
    "NAME_MISMATCH": "The name of the schema has changed (path '{path}')",
    "MISSING_ENUM_SYMBOLS": "The {reader} schema is missing enum symbols '{message}' at path "
    "'{path}' in the {writer} schema",
    "MISSING_UNION_BRANCH": "The {reader} schema is missing a type inside a union field at "
    "path '{path}' in the {writer} schema",
    "READER_FIELD_MISSING_DEFAULT_VALUE": "The field '{message}' at path '{path}' in the "
    "{reader} schema has no default value and is missing in the {writer} schema",
}


def describe(found: Incompatibility, reader: str, writer: str) -> str:
    """Confluent's ``Difference`` wording, ``reader``/``writer`` being "new" or "old"."""
    description = DESCRIPTIONS.get(found.type, "").format(
        path=found.location, message=found.message, reader=reader, writer=writer
    )
    return (
        f"{{errorType:'{found.type}', description:'{description}', "
        f"additionalInfo:'{found.message}'}}"
    )
