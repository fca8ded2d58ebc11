"""Declarative config keys (Kafka's ConfigDef): each key is declared once with its type,
default, validator and doc; parsing, validation and the docs table all come from that.

Values arrive as strings (properties files, the wire, Spark options) or already typed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647


class ConfigError(ValueError):
    """An invalid config value (Kafka's ConfigException / INVALID_CONFIG)."""

    def __init__(self, name: str, value: object, reason: str) -> None:
        self.name = name
        self.value = value
        super().__init__(f"Invalid value {value!r} for configuration {name}: {reason}")


Validator = Callable[[str, Any], None]
# a key's default as declared, before its type's parser (a list's as "a,b" or a list)
DefaultValue = bool | int | float | str | list[str] | None


def at_least(lo: float) -> Validator:
    def check(name: str, v: Any) -> None:
        if v is not None and v < lo:
            raise ConfigError(name, v, f"Value must be at least {lo}")

    return check


def between(lo: float, hi: float) -> Validator:
    def check(name: str, v: Any) -> None:
        if v is not None and not lo <= v <= hi:
            raise ConfigError(name, v, f"Value must be in [{lo}, {hi}]")

    return check


def one_of(*choices: str, case_sensitive: bool = True) -> Validator:
    allowed = choices if case_sensitive else tuple(c.lower() for c in choices)

    def check(name: str, v: Any) -> None:
        key = v if case_sensitive else str(v).lower()
        if key not in allowed:
            raise ConfigError(name, v, f"String must be one of: {', '.join(choices)}")

    return check


def subset_of(*choices: str) -> Validator:
    def check(name: str, v: Any) -> None:
        for item in v or []:
            if item not in choices:
                raise ConfigError(name, v, f"Items must be in: {', '.join(choices)}")

    return check


def _parse_bool(name: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "false"):
        return s == "true"
    raise ConfigError(name, v, "Expected value to be either true or false")


def _parse_int(name: str, v: Any) -> int:
    if isinstance(v, bool):
        raise ConfigError(name, v, "Expected an integer")
    try:
        return int(str(v).strip()) if not isinstance(v, int) else v
    except ValueError:
        raise ConfigError(name, v, "Expected an integer") from None


def _parse_double(name: str, v: Any) -> float:
    try:
        return float(str(v).strip()) if not isinstance(v, float) else v
    except ValueError:
        raise ConfigError(name, v, "Expected a number") from None


def _parse_list(name: str, v: Any) -> list[str]:
    if isinstance(v, list | tuple):
        return [str(x) for x in v]
    s = str(v).strip()
    return [p.strip() for p in s.split(",") if p.strip()] if s else []


_PARSERS: dict[str, Callable[[str, Any], Any]] = {
    "int": _parse_int,
    "long": _parse_int,
    "short": _parse_int,
    "double": _parse_double,
    "boolean": _parse_bool,
    "string": lambda n, v: None if v is None else str(v).strip(),
    "password": lambda n, v: None if v is None else str(v),
    "list": _parse_list,
}


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str  # int | long | short | double | boolean | string | password | list
    default: DefaultValue
    doc: str
    validator: Validator | None = None
    synonyms: tuple[str, ...] = ()  # broker-level names, highest priority first

    def parse(self, value: Any) -> Any:
        parsed = None if value is None else _PARSERS[self.type](self.name, value)
        if self.validator is not None and parsed is not None:
            self.validator(self.name, parsed)
        return parsed


# Every ConfigDef, so start-up can tell a key no component knows from one it merely has not
# looked at yet (Kafka's AbstractConfig.logUnused); each subsystem declares its own table.
_ALL_DEFS: list[ConfigDef] = []


def known_config_names() -> set[str]:
    """Names and synonyms of every key declared by a ConfigDef created so far."""
    return {
        name
        for d in _ALL_DEFS
        for key in d.keys.values()
        for name in (key.name, *key.synonyms)
    }


@dataclass
class ConfigDef:
    keys: dict[str, ConfigKey] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _ALL_DEFS.append(self)

    def define(
        self,
        name: str,
        type: str,
        default: DefaultValue,
        doc: str,
        validator: Validator | None = None,
        synonyms: Iterable[str] = (),
    ) -> ConfigDef:
        if name in self.keys:
            raise ValueError(f"config {name} defined twice")
        self.keys[name] = ConfigKey(name, type, default, doc, validator, tuple(synonyms))
        return self

    def __contains__(self, name: object) -> bool:
        return name in self.keys

    def parse(self, props: Mapping[str, Any], *, strict: bool = False) -> dict[str, Any]:
        """Typed values for every key: props over defaults. ``strict`` rejects unknown names."""
        if strict:
            unknown = sorted(set(props) - set(self.keys))
            if unknown:
                raise ConfigError(unknown[0], props[unknown[0]], "Unknown configuration")
        out: dict[str, Any] = {}
        for name, key in self.keys.items():
            out[name] = key.parse(props[name]) if name in props else key.parse(key.default)
        return out

    def docs_markdown(self) -> str:
        rows = ["| name | type | default | synonyms | doc |", "|---|---|---|---|---|"]
        for k in sorted(self.keys.values(), key=lambda k: k.name):
            rows.append(
                f"| `{k.name}` | {k.type} | `{k.default}` | {', '.join(k.synonyms)} | {k.doc} |"
            )
        return "\n".join(rows) + "\n"
