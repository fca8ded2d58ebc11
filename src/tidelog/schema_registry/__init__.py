"""A Confluent-compatible Schema Registry served beside the broker: Confluent's REST API v1,
Avro, JSON Schema and Protobuf with their compatibility rules, state kept in the compacted
``_schemas`` topic in Confluent's own record format.

Its libraries (avro, jsonschema, protobuf, confluent-kafka) are the optional
``tidelog[schema-registry]`` extra: this module loads the registry only when a broker is
configured to serve it, so a broker without ``schema.registry.listeners`` never needs them."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from tidelog.config.core import ConfigError

if TYPE_CHECKING:
    from tidelog.server.broker import Broker

    from .listener import SchemaRegistryListener


async def start_schema_registry(broker: Broker) -> SchemaRegistryListener | None:
    """Start the registry when ``schema.registry.listeners`` is set (None otherwise)."""
    urls = [u for u in broker.config.values.get("schema.registry.listeners") or [] if u.strip()]
    if not urls:
        return None
    try:
        listener = importlib.import_module("tidelog.schema_registry.listener")
    except ImportError as exc:
        raise ConfigError(
            "schema.registry.listeners", ",".join(urls),
            f"needs the schema-registry extra (pip install 'tidelog[schema-registry]'): {exc}",
        ) from exc
    started: SchemaRegistryListener | None = await listener.start_schema_registry(broker)
    return started


__all__ = ["start_schema_registry"]
