"""JSON Schema (validated against its draft's meta-schema by ``jsonschema``)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from .json_compat import json_differences
from .records import Reference
from .schema_types import PARSERS, InvalidSchema, ParsedSchema, Resolver


class JsonSchema(ParsedSchema):
    schema_type = "JSON"

    def __init__(self, text: str, references: list[Reference], resolve: Resolver) -> None:
        super().__init__(references)
        try:
            self.json: Any = json.loads(text)
            for ref in references:
                resolve(ref)
            if not isinstance(self.json, (dict, bool)):
                raise InvalidSchema("Invalid schema: a JSON Schema is an object or a boolean")
            jsonschema.validators.validator_for(self.json).check_schema(self.json)
        except (ValueError, jsonschema.exceptions.SchemaError) as exc:
            raise InvalidSchema(f"Invalid schema: {exc}") from exc
        self._canonical = json.dumps(self.json, separators=(",", ":"), ensure_ascii=False)

    def canonical(self) -> str:
        return self._canonical

    def backward_errors(self, previous: ParsedSchema, reader: str, writer: str) -> list[str]:
        if not isinstance(previous, JsonSchema):
            return ["Incompatible because of different schema type"]
        return json_differences(previous.json, self.json, reader, writer)


def parse_json(text: str, references: list[Reference], resolve: Resolver) -> ParsedSchema:
    return JsonSchema(text, references, resolve)


PARSERS["JSON"] = parse_json
