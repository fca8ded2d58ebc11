"""A flush's Iceberg transaction: pyiceberg's, with its metadata worked out once per change.

pyiceberg's ``Transaction.table_metadata`` applies the staged updates to the table's
metadata and deep-copies the result on every read; a fast append reads it about fifteen
times, which made those copies (they grow with the table's snapshots) a third of a flush's
commit. The metadata models are frozen, and the staged updates only ever grow, so here the
result is kept until another update is staged (and with none staged it is the table's own). Everything else (the snapshot, its summary,
the manifests, the catalog's commit and its checks) is pyiceberg's own."""

from __future__ import annotations

from pyiceberg.table import Table, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import update_table_metadata


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
            self._cached = (staged, update_table_metadata(self._table.metadata, self._updates))
        return self._cached[1]
