"""What every schema type gives the registry (Confluent's ``ParsedSchema`` and
``SchemaProvider``): parse with its references resolved, the canonical string stored and
compared, and the backward check the seven compatibility levels are built from."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from .records import Reference, SchemaValue

# resolves a reference to the version it names (raises RegistryError when there is none)
Resolver = Callable[[Reference], SchemaValue]


class InvalidSchema(ValueError):
    """The text does not parse as a schema of its type (the registry answers 42201)."""


class ParsedSchema(ABC):
    schema_type: str

    def __init__(self, references: list[Reference]) -> None:
        self.references = references

    @abstractmethod
    def canonical(self) -> str:
        """The form the registry stores, returns and compares (identical ones share an id)."""

    def normalized(self) -> ParsedSchema:
        """``normalize=true``: a form in which equivalent schemas are equal."""
        return self

    @abstractmethod
    def backward_errors(self, previous: ParsedSchema, reader: str, writer: str) -> list[str]:
        """Why data written with ``previous`` cannot be read with this schema ([]: it can).
        ``reader``/``writer`` label the two schemas in the messages ("new", "old")."""

    def formatted(self, fmt: str) -> str:
        """The schema in an output ``format`` (Protobuf's ``serialized``); canonical otherwise."""
        return self.canonical()


Parser = Callable[[str, list[Reference], Resolver], ParsedSchema]
PARSERS: dict[str, Parser] = {}


def schema_types() -> list[str]:
    return sorted(PARSERS)


def parse_schema(
    schema_type: str, text: str, references: list[Reference], resolve: Resolver
) -> ParsedSchema:
    parser = PARSERS.get(schema_type)
    if parser is None:
        raise InvalidSchema(f"Invalid schema type {schema_type}")
    return parser(text, references, resolve)
