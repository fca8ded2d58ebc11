"""The catalog translation writes through: pyiceberg's SqlCatalog on SQLite by default
(``iceberg.catalog.uri`` = ``sqlite:///<first log dir>/.iceberg/catalog.db``, warehouse
``file://<first log dir>/.iceberg/warehouse``), or an Iceberg REST catalog with its
credentials and SigV4 options.

The embedded catalog's directory is ``.iceberg``: the log manager refuses, at start-up, any
directory of a log dir that is not a partition's — except hidden ones, which it skips.

The SQL catalog is pyiceberg's with one change, its commit (:class:`InHandSqlCatalog`).
pyiceberg's ``SqlCatalog.commit_table`` loads the table again (a select, the metadata file
read and parsed), applies the updates to it and deep-copies the result, before it writes the
new metadata file and swaps the table's metadata location with a compare-and-swap UPDATE
(``WHERE metadata_location`` = the one it loaded). A flush already holds the table its last
commit (or load) left: here the updates are applied to that table's metadata, checked
against it, and the UPDATE swaps from that table's own location. If that location is still
the catalog's, the metadata checked is the current one, as in pyiceberg's path; if another
writer moved the table on, the UPDATE matches no row, the new metadata file (which nothing
names) is deleted, and the commit takes pyiceberg's own path (load, check, swap), which
refuses it when its requirements no longer hold. The REST catalog's commit is its own.

Several brokers share one catalog, and each opens it as it starts: pyiceberg creates the
catalog's tables and the namespace by checking first and then creating, so two brokers
opening a new catalog at once both create, and the second's CREATE TABLE or INSERT fails
("already exists", a UNIQUE constraint). Here what another opener made in between counts as
made: the tables' creation is tried again (it skips the tables that exist now) and a
namespace that exists when the insert fails is reported as existing."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyiceberg.catalog import PY_CATALOG_IMPL, Catalog, load_catalog
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import CommitFailedException, NamespaceAlreadyExistsError
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import AssertCreate, TableRequirement, TableUpdate
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties
from sqlalchemy import update
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.orm import Session

from .transaction import apply_updates

log = logging.getLogger(__name__)

ICEBERG_DIR = ".iceberg"  # in the first log dir: the embedded catalog, warehouse, markers
CREATE_ATTEMPTS = 5  # catalog tables made by several openers at once: tries before giving up


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
    """The catalog translation commits through (readers take ``catalog_properties``)."""
    props = catalog_properties(values, log_dir)
    if props["type"] == "sql" and props["uri"].startswith("sqlite:///"):
        Path(props["uri"][len("sqlite:///"):]).parent.mkdir(parents=True, exist_ok=True)
    if props["warehouse"].startswith("file://"):
        Path(props["warehouse"][len("file://"):]).mkdir(parents=True, exist_ok=True)
    if props["type"] == "sql":
        del props["type"]
        props[PY_CATALOG_IMPL] = f"{__name__}.{InHandSqlCatalog.__name__}"
    return load_catalog(str(values["iceberg.catalog.name"]), **props)


class InHandSqlCatalog(SqlCatalog):
    """pyiceberg's SqlCatalog whose commit starts from the table in hand (see the module's
    docstring); pyiceberg's own commit when it cannot.

    A SQLite database is put in write-ahead-log mode: a commit is then one append to the
    log and one fsync of it (``synchronous`` stays SQLite's FULL) instead of a rollback
    journal created, synced and deleted around each one, which cost more than the rest of
    the commit on a busy disk."""

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        if self.engine.dialect.name == "sqlite":
            try:
                with self.engine.connect() as connection:
                    connection.exec_driver_sql("PRAGMA journal_mode=WAL")
            except OperationalError as exc:  # another process holds it: its mode stays
                log.warning("catalog database not in write-ahead-log mode (%s)", exc)

    def create_tables(self) -> None:
        """pyiceberg's (create what is missing), tried again when another opener created a
        table between its check and its CREATE TABLE (see the module's docstring)."""
        for attempt in range(CREATE_ATTEMPTS):
            try:
                super().create_tables()
                return
            except (OperationalError, ProgrammingError):
                if attempt == CREATE_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))

    def create_namespace(self, namespace: str | Identifier,
                         properties: Properties = EMPTY_DICT) -> None:
        """pyiceberg's; an insert refused because another opener created the namespace
        since the check is NamespaceAlreadyExistsError, as if the check had seen it."""
        try:
            super().create_namespace(namespace, properties)
        except IntegrityError:
            if not self.namespace_exists(namespace):
                raise
            raise NamespaceAlreadyExistsError(f"Namespace {namespace} already exists") from None

    def commit_table(self, table: Table, requirements: tuple[TableRequirement, ...],
                     updates: tuple[TableUpdate, ...]) -> CommitTableResponse:
        staged = self._staged(table, requirements, updates)
        if staged is None:
            return super().commit_table(table, requirements, updates)
        metadata, location = staged
        io = self._load_file_io(properties=metadata.properties, location=location)
        self._write_metadata(metadata=metadata, io=io, metadata_path=location)
        if self._swap(table, location):
            return CommitTableResponse(  # (pyiceberg's SqlCatalog names the field so too)
                metadata=metadata, metadata_location=location)  # type: ignore[call-arg]
        try:  # the swap found another writer's table: nothing names the new file
            io.delete(location)
        except OSError as exc:  # left to orphan-file removal
            log.warning("metadata file %s not deleted (%s)", location, exc)
        log.debug("%s moved on since it was loaded here; committing from the catalog's",
                  ".".join(table.name()))
        return super().commit_table(table, requirements, updates)

    def _staged(self, table: Table, requirements: tuple[TableRequirement, ...],
                updates: tuple[TableUpdate, ...]) -> tuple[TableMetadata, str] | None:
        """The new metadata and its location, from the table in hand; None when the commit
        is pyiceberg's to make (a create, a database that cannot count updated rows,
        requirements the table in hand fails, no change)."""
        if (not table.metadata_location or not self.engine.dialect.supports_sane_rowcount
                or any(isinstance(r, AssertCreate) for r in requirements)):
            return None
        base = table.metadata
        try:
            for requirement in requirements:
                requirement.validate(base)
        except CommitFailedException:  # the table in hand may be behind: the catalog's
            return None  # metadata decides
        metadata, changed = apply_updates(base, updates, table.metadata_location)
        if not changed:
            return None
        version = self._parse_metadata_version(table.metadata_location) + 1
        location = load_location_provider(metadata.location, metadata.properties
                                          ).new_table_metadata_file_location(version)
        return metadata, location

    def _swap(self, table: Table, location: str) -> bool:
        """Point the catalog's row of ``table`` at ``location`` if it still points at the
        table's own metadata location (pyiceberg's compare-and-swap); whether it did. An
        error of the database propagates: the commit's outcome is then unknown."""
        namespace = Catalog.namespace_to_string(Catalog.namespace_from(table.name()))
        stmt = update(IcebergTables).where(
            IcebergTables.catalog_name == self.name,
            IcebergTables.table_namespace == namespace,
            IcebergTables.table_name == Catalog.table_name_from(table.name()),
            IcebergTables.metadata_location == table.metadata_location,
        ).values(metadata_location=location,
                 previous_metadata_location=table.metadata_location)
        with Session(self.engine) as session:
            if session.execute(stmt).rowcount < 1:  # type: ignore[attr-defined]
                return False
            session.commit()
        return True
