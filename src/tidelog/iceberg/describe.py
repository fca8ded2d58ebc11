"""A topic's table as ``tidelog topics --describe`` shows it: read from the catalog the
broker writes through (its ``iceberg.*`` settings and ``log.dirs``, from the broker's own
properties file), with no broker involved: the table's name, its current snapshot, and the
next offset it holds for each partition (``tidelog.offsets`` in the snapshot summary)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

from tidelog.config.iceberg_config import ICEBERG_CONFIG_DEF

from .catalog import catalog_properties
from .tables import table_offsets


@dataclass(frozen=True)
class TableDescription:
    table: str
    snapshot_id: int | None  # None: the table does not exist yet (or holds no snapshot)
    snapshot_ms: int | None  # the current snapshot's commit time
    committed: dict[int, int]  # partition -> next offset the table holds


def describe_table(props: Mapping[str, str], topic: str) -> TableDescription:
    """The table of ``topic`` in the catalog the broker properties ``props`` name."""
    values = ICEBERG_CONFIG_DEF.parse({k: v for k, v in props.items()
                                       if k in ICEBERG_CONFIG_DEF})
    dirs = props.get("log.dirs") or props.get("log.dir") or "/tmp/kafka-logs"
    catalog_props = catalog_properties(values, Path(dirs.split(",")[0].strip()))
    name = f"{values['iceberg.namespace']}.{topic}"
    uri = catalog_props["uri"]
    if catalog_props["type"] == "sql" and uri.startswith("sqlite:///") and not Path(
            uri[len("sqlite:///"):]).exists():
        return TableDescription(name, None, None, {})  # no table written yet
    catalog = load_catalog(str(values["iceberg.catalog.name"]), **catalog_props)
    try:
        table = catalog.load_table(name)
    except (NoSuchTableError, NoSuchNamespaceError):
        return TableDescription(name, None, None, {})
    snapshot = table.current_snapshot()
    if snapshot is None:
        return TableDescription(name, None, None, {})
    return TableDescription(name, snapshot.snapshot_id, snapshot.timestamp_ms,
                            table_offsets(snapshot).offsets)
