"""Iceberg topics: every record of a topic whose ``tidelog.iceberg.mode`` is not ``disabled``,
with its schema's columns and its Kafka coordinates, in an Apache Iceberg table (Redpanda's
Iceberg Topics, Confluent's Tableflow). A package above ``server`` and ``schema_registry``:
the broker never imports it; ``tidelog serve`` starts it beside the broker.

Its libraries (pyiceberg, pyarrow, fastavro) are the optional ``tidelog[iceberg]`` extra:
they are imported only when ``iceberg.enabled=true``."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from tidelog.config.core import ConfigError
from tidelog.config.iceberg_config import ICEBERG_CONFIG_DEF

if TYPE_CHECKING:
    from tidelog.server.broker import Broker

    from .service import IcebergService


async def start_iceberg(broker: Broker, registry: object | None) -> IcebergService | None:
    """Start translation when ``iceberg.enabled`` (None otherwise). ``registry``: the
    broker's Schema Registry listener, whose schemas decode the values (None: key_value
    mode only)."""
    enabled = ICEBERG_CONFIG_DEF.keys["iceberg.enabled"].parse(
        broker.config.originals.get("iceberg.enabled", False))
    if not enabled:
        return None
    try:
        service_mod = importlib.import_module("tidelog.iceberg.service")
        schemas_mod = importlib.import_module("tidelog.iceberg.schemas")
    except ImportError as exc:
        raise ConfigError("iceberg.enabled", "true",
                          f"needs the iceberg extra (pip install 'tidelog[iceberg]'): {exc}"
                          ) from exc
    inner = getattr(registry, "registry", None)
    replicated = getattr(registry, "elector", None) is not None  # one of a cluster's
    schemas = schemas_mod.RegistrySchemas(inner, replicated=replicated) if inner else None
    service: IcebergService = service_mod.IcebergService(broker, schemas)
    await service.start()
    return service


__all__ = ["start_iceberg"]
