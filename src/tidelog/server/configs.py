"""Config views for DescribeConfigs / AlterConfigs / IncrementalAlterConfigs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.config.broker_config import BROKER_CONFIG_DEF
from tidelog.config.iceberg_config import canonical_topic_config_name
from tidelog.config.log_config import BROKER_SYNONYMS, LOG_CONFIG_DEF
from tidelog.protocol.errors import ErrorCode
from tidelog.storage.cleaner.config import CLEANER_CONFIG_DEF

from .errors import ApiError, to_error

if TYPE_CHECKING:
    from .context import RequestContext

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
# Kafka's ConfigSource
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
# Kafka's ConfigType (DescribeConfigs v3+)
_TYPES = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "password": 9,
}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: int
    type: int
    doc: str
    sensitive: bool = False
    read_only: bool = False
    synonyms: tuple[tuple[str, str | None, int], ...] = ()


def fmt(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list | tuple):
        return ",".join(str(x) for x in v)
    return str(v)


Layer = tuple[Mapping[str, Any], int]  # a layer of broker configs and its ConfigSource


def topic_entries(
    overrides: Mapping[str, str], broker_layers: Sequence[Layer], effective: Mapping[str, Any]
) -> list[ConfigEntry]:
    """Each topic config as Kafka's ConfigHelper.createTopicConfigEntry describes it: the
    topic's override, then its broker synonyms (``broker_layers``: the dynamic per-broker,
    dynamic cluster-default and static configs, in that order); the source is the first
    synonym's, else DEFAULT_CONFIG."""
    out, keys = [], broker_keys()
    for name, key in sorted(LOG_CONFIG_DEF.keys.items()):
        synonyms = _broker_synonyms(topic_synonym_names(name, keys), broker_layers, keys)
        if name in overrides:
            synonyms.insert(0, (name, overrides[name], DYNAMIC_TOPIC_CONFIG))
        out.append(
            ConfigEntry(
                name,
                fmt(effective.get(name, key.default)),
                synonyms[0][2] if synonyms else DEFAULT_CONFIG,
                _TYPES.get(key.type, 0),
                key.doc,
                key.type == "password",
                False,
                tuple(synonyms),
            )
        )
    return out


def topic_synonym_names(name: str, keys: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The broker configs a topic config falls back to, in Kafka's order
    (ServerTopicConfigSynonyms, then DynamicBrokerConfig.brokerConfigSynonyms); a topic
    config whose broker config has its own name (compression.type) has that one; none for
    a topic config with no broker default. ``keys``: the broker keys, when the caller has
    them."""
    found = BROKER_SYNONYMS.get(name)
    if found:
        return tuple(syn for syn, _unit in found)
    return (name,) if name in (broker_keys() if keys is None else keys) else ()


def _broker_synonyms(names: tuple[str, ...], layers: Sequence[Layer], keys: Mapping[str, Any]
                     ) -> list[tuple[str, str | None, int]]:
    """Kafka's ConfigHelper.configSynonyms: each layer's values of ``names`` (layer by
    layer, each in the names' order), then their defaults that are not null, less every
    entry before the first one of ``names[0]`` itself (Kafka's ``dropWhile``: with only
    ``log.retention.hours`` set, ``retention.ms`` lists no synonym)."""
    if not names:
        return []
    found = [(n, fmt(layer[n]), source) for layer, source in layers for n in names
             if n in layer]
    found += [(n, fmt(keys[n].default), DEFAULT_CONFIG) for n in names
              if n in keys and keys[n].default is not None]
    first = next((i for i, (n, _v, _s) in enumerate(found) if n == names[0]), len(found))
    return found[first:]


def broker_keys() -> dict[str, Any]:
    """Every broker key: the broker's, and the log cleaner's (declared beside the cleaner,
    storage/cleaner/config.py)."""
    return {**CLEANER_CONFIG_DEF.keys, **BROKER_CONFIG_DEF.keys}


def broker_entries(
    values: Mapping[str, Any],
    originals: Mapping[str, Any],
    dynamic_default: Mapping[str, str] | None = None,
    dynamic_broker: Mapping[str, str] | None = None,
) -> list[ConfigEntry]:
    """Each broker key with its source and synonyms in Kafka's precedence: per-broker
    dynamic, cluster-default dynamic, static (server.properties / --override), default.
    Read-only unless it can be altered dynamically."""
    from .dynamic_config import DYNAMIC_KEYS

    layers = (
        (dynamic_broker or {}, DYNAMIC_BROKER_CONFIG),
        (dynamic_default or {}, DYNAMIC_DEFAULT_BROKER_CONFIG),
        (originals, STATIC_BROKER_CONFIG),
    )
    effective = {**originals, **(dynamic_default or {}), **(dynamic_broker or {})}
    values = {**CLEANER_CONFIG_DEF.parse(
        {k: v for k, v in effective.items() if k in CLEANER_CONFIG_DEF.keys}), **values}
    out = []
    for name, key in sorted(broker_keys().items()):
        synonyms = [(name, fmt(layer[name]), src) for layer, src in layers if name in layer]
        synonyms.append((name, fmt(key.default), DEFAULT_CONFIG))
        source = synonyms[0][2]
        out.append(
            ConfigEntry(
                name,
                fmt(values.get(name)),
                source,
                _TYPES.get(key.type, 0),
                key.doc,
                key.type == "password",
                name not in DYNAMIC_KEYS,
                tuple(synonyms),
            )
        )
    return out


def apply_to_broker(
    current: Mapping[str, str], ops: list[tuple[str, int, str | None]], effective: Mapping[str, Any]
) -> dict[str, str]:
    """IncrementalAlterConfigs semantics over a broker entity's dynamic configs. As Kafka's
    prepareIncrementalConfigs, SET and DELETE take any name (one no broker config of ours is
    stored and applies to nothing, as AlterConfigs stores it: dynamic_config); APPEND and
    SUBTRACT need a known list config."""
    out = dict(current)
    for name, op, value in ops:
        if op == SET:
            if value is None:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for: {name}")
            out[name] = value
        elif op == DELETE:
            out.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            out[name] = _append_or_subtract(name, op, value, out, effective)
        else:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
    return out


def _append_or_subtract(name: str, op: int, value: str | None, current: Mapping[str, str],
                        effective: Mapping[str, Any]) -> str:
    key = broker_keys().get(name)
    if key is None:
        raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown broker config name: {name}")
    if key.type != "list":
        raise _not_a_list(name, op)
    # the entity's dynamic value, else the one in force under it: the static one, else the
    # default (Kafka's prepareIncrementalConfigs falls back to the key's default)
    old = current[name] if name in current else fmt(effective.get(name, key.default))
    items = [x for x in (old or "").split(",") if x]
    new = [x.strip() for x in (value or "").split(",") if x.strip()]
    items = items + [x for x in new if x not in items] if op == APPEND else [
        x for x in items if x not in new]
    return ",".join(items)


def _not_a_list(name: str, op: int) -> ApiError:
    """Kafka's prepareIncrementalConfigs: APPEND or SUBTRACT on a key that is not a list is
    an InvalidRequestException (INVALID_REQUEST), named after the operation."""
    verb = "append" if op == APPEND else "subtract"
    return ApiError(ErrorCode.INVALID_REQUEST,
                    f"Config value {verb} is not allowed for config key: {name}")


def apply_incremental(
    current: Mapping[str, str], ops: list[tuple[str, int, str | None]], effective: Mapping[str, Any]
) -> dict[str, str]:
    """Kafka's IncrementalAlterConfigs semantics over a topic's overrides."""
    out = dict(current)
    for alias, op, value in ops:
        name = canonical_topic_config_name(alias)  # redpanda.iceberg.* names as ours
        if name not in LOG_CONFIG_DEF:
            raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
        if op == SET:
            if value is None:
                raise ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for: {name}")
            out[name] = value
        elif op == DELETE:
            out.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            if LOG_CONFIG_DEF.keys[name].type != "list":
                raise _not_a_list(name, op)
            items = [x for x in (fmt(effective.get(name)) or "").split(",") if x]
            if name in out:
                items = [x for x in out[name].split(",") if x]
            new = [x.strip() for x in (value or "").split(",") if x.strip()]
            if op == APPEND:
                items += [x for x in new if x not in items]
            else:
                items = [x for x in items if x not in new]
            out[name] = ",".join(items)
        else:
            raise ApiError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}")
    return out


def alter_configs_response(
    ctx: RequestContext,
    request: Any,
    api_key: int,
    alter: Callable[[RequestContext, Any, bool], None],
) -> Any:
    """The per-resource response both AlterConfigs and IncrementalAlterConfigs send."""
    from tidelog.protocol.codec import response_class
    from tidelog.protocol.kio_util import make, nested

    cls = response_class(api_key, ctx.api_version)
    rcls = nested(cls, "responses")
    out = []
    for res in request.resources:
        code, msg = ErrorCode.NONE, None
        try:
            from .security import AclOperation
            from .security.config_auth import config_denied

            denied = config_denied(ctx, AclOperation.ALTER_CONFIGS, int(res.resource_type),
                                   res.resource_name)
            if denied is not None:
                raise ApiError(denied)
            alter(ctx, res, bool(request.validate_only))
        except Exception as exc:
            code, msg = to_error(exc)
        out.append(make(rcls, error_code=code, error_message=msg,
                        resource_type=res.resource_type, resource_name=res.resource_name))
    return make(cls, throttle_time=0, responses=tuple(out))
