"""A flush's Iceberg transaction: pyiceberg's, with its metadata worked out once per change.

pyiceberg's ``Transaction.table_metadata`` applies the staged updates to the table's
metadata and deep-copies the result on every read; a fast append reads it about fifteen
times, which made those copies (they grow with the table's snapshots) a third of a flush's
commit. The metadata models are frozen, and the staged updates only ever grow, so here the
result is kept until another update is staged (and with none staged it is the table's own),
and it is not deep-copied at all: the closing step of ``update_table_metadata`` copies the
whole metadata (every snapshot) to hand its caller a private one, which frozen models that
nothing here changes in place do not need. Everything else (the snapshot, its summary, the
manifests, the catalog's commit and its checks, the catalog's own staging of the new
metadata) is pyiceberg's own."""

from __future__ import annotations

from datetime import datetime

from pyiceberg.table import Table, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import (
    TableUpdate,
    _apply_table_update,
    _TableMetadataUpdateContext,
    _update_table_metadata_log,
)
from pyiceberg.utils.datetime import datetime_to_millis


class FlushTransaction(Transaction):
    def __init__(self, table: Table) -> None:
        super().__init__(table)
        self._cached: tuple[int, TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        staged = len(self._updates)
        if not staged:
            return self._table.metadata  # frozen: nothing to apply, nothing to copy
        if self._cached is None or self._cached[0] != staged:
            self._cached = (staged, applied(self._table.metadata, self._updates))
        return self._cached[1]


def applied(base: TableMetadata, updates: tuple[TableUpdate, ...]) -> TableMetadata:
    """``update_table_metadata(base, updates)`` without its closing deep copy: the updates
    applied in turn, the update time set when they changed something and did not set it,
    the partition spec and sort order checked against the schema."""
    return apply_updates(base, updates)[0]


def apply_updates(base: TableMetadata, updates: tuple[TableUpdate, ...],
                  metadata_location: str | None = None) -> tuple[TableMetadata, bool]:
    """``applied``, and whether the updates changed anything; with ``metadata_location``
    (the file ``base`` was read from) a change also enters it in the metadata log, as
    ``update_table_metadata`` does for a catalog's commit."""
    context = _TableMetadataUpdateContext()
    metadata = base
    for update in updates:
        metadata = _apply_table_update(update, metadata, context)
    changed = context.has_changes()
    if changed and metadata_location:
        metadata = _update_table_metadata_log(metadata, metadata_location,
                                              base.last_updated_ms)
    if changed and base.last_updated_ms == metadata.last_updated_ms:
        metadata = metadata.model_copy(
            update={"last_updated_ms": datetime_to_millis(datetime.now().astimezone())})
    metadata.spec().check_compatible(metadata.schema())
    metadata.sort_order().check_compatible(metadata.schema())
    return metadata, changed
