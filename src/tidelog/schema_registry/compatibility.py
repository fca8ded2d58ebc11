"""The seven compatibility levels (Confluent's CompatibilityChecker and
SchemaValidatorBuilder): BACKWARD reads the old data with the new schema, FORWARD the new data
with the old schema, FULL both; plain levels check the latest version, _TRANSITIVE ones every
version, stopping at the first that fails. Messages as Confluent words them."""

from __future__ import annotations

from .schema_types import ParsedSchema

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
MAX_SCHEMA_IN_MESSAGE = 10 * 1024


def _with_old(messages: list[str], old: ParsedSchema, old_version: int | None) -> list[str]:
    if not messages:
        return messages
    if old_version is not None:
        messages.append(f"{{oldSchemaVersion: {old_version}}}")
    text = old.canonical()
    if len(text) <= MAX_SCHEMA_IN_MESSAGE:
        messages.append(f"{{oldSchema: '{text}'}}")
    else:
        messages.append(f"{{oldSchema: <truncated> '{text[:MAX_SCHEMA_IN_MESSAGE]}...'}}")
    return messages


def _strategy(
    level: str, new: ParsedSchema, old: ParsedSchema, old_version: int | None
) -> list[str]:
    if type(new) is not type(old):
        return ["Incompatible because of different schema type"]
    if level.startswith("BACKWARD"):
        return _with_old(new.backward_errors(old, "new", "old"), old, old_version)
    if level.startswith("FORWARD"):
        return _with_old(old.backward_errors(new, "old", "new"), old, old_version)
    found = old.backward_errors(new, "old", "new")
    return found + _with_old(new.backward_errors(old, "new", "old"), old, old_version)


def check(
    level: str, new: ParsedSchema, previous: list[tuple[ParsedSchema, int | None]]
) -> list[str]:
    """Why ``new`` may not follow ``previous`` (oldest first) under ``level`` ([]: it may)."""
    if level == "NONE" or not previous:
        return []
    latest_first = list(reversed(previous))
    if not level.endswith("_TRANSITIVE"):
        latest_first = latest_first[:1]
    for old, version in latest_first:
        messages = _strategy(level, new, old, version)
        if messages:
            return messages
    return []
