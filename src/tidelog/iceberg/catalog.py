"""The catalog translation writes through: pyiceberg's SqlCatalog on SQLite by default
(``iceberg.catalog.uri`` = ``sqlite:///<first log dir>/.iceberg/catalog.db``, warehouse
``file://<first log dir>/.iceberg/warehouse``), or an Iceberg REST catalog with its
credentials and SigV4 options.

The embedded catalog's directory is ``.iceberg``: the log manager refuses, at start-up, any
directory of a log dir that is not a partition's — except hidden ones, which it skips."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyiceberg.catalog import Catalog, load_catalog

ICEBERG_DIR = ".iceberg"  # in the first log dir: the embedded catalog, warehouse, markers


def catalog_properties(values: Mapping[str, Any], log_dir: Path) -> dict[str, str]:
    """pyiceberg's properties for the broker's ``iceberg.*`` settings."""
    kind = str(values["iceberg.catalog.type"])
    home = log_dir.resolve() / ICEBERG_DIR
    warehouse = str(values["iceberg.warehouse"] or "") or f"file://{home / 'warehouse'}"
    props: dict[str, str] = {"type": kind, "warehouse": warehouse}
    if kind == "sql":
        props["uri"] = str(values["iceberg.catalog.uri"] or "") or (
            f"sqlite:///{home / 'catalog.db'}")
    else:
        props["uri"] = str(values["iceberg.catalog.uri"])
        optional = {"credential": "iceberg.rest.credential", "token": "iceberg.rest.token",
                    "rest.signing-region": "iceberg.rest.signing.region",
                    "rest.signing-name": "iceberg.rest.signing.name"}
        props.update({k: str(values[v]) for k, v in optional.items() if values.get(v)})
        if "credential" in props:  # the REST spec's token endpoint (pyiceberg's guess is
            # deprecated)
            props["oauth2-server-uri"] = props["uri"].rstrip("/") + "/v1/oauth/tokens"
        if values.get("iceberg.rest.sigv4.enabled"):
            props["rest.sigv4-enabled"] = "true"
    s3 = {"s3.endpoint": "iceberg.s3.endpoint", "s3.access-key-id": "iceberg.s3.access.key.id",
          "s3.secret-access-key": "iceberg.s3.secret.access.key",
          "s3.region": "iceberg.s3.region"}
    props.update({k: str(values[v]) for k, v in s3.items() if values.get(v)})
    return props


def open_catalog(values: Mapping[str, Any], log_dir: Path) -> Catalog:
    props = catalog_properties(values, log_dir)
    if props["type"] == "sql" and props["uri"].startswith("sqlite:///"):
        Path(props["uri"][len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    if props["warehouse"].startswith("file://"):
        Path(props["warehouse"][len("file://"):]).mkdir(parents=True, exist_ok=True)
    return load_catalog(str(values["iceberg.catalog.name"]), **props)
