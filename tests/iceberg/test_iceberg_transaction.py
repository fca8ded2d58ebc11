"""A flush's transaction (iceberg/transaction.py) works out the metadata pyiceberg's own
``update_table_metadata`` gives for the same staged updates (its reference), only without
copying it: property changes, schema changes and appends on a table with snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import update_table_metadata

from tidelog.iceberg.columns import table_schema
from tidelog.iceberg.data_files import data_files
from tidelog.iceberg.rows import RecordSorter, batch_of, table_rows
from tidelog.iceberg.schemas import Codecs
from tidelog.iceberg.tables import Tables
from tidelog.iceberg.transaction import FlushTransaction
from tidelog.records import Record


def _rows(table: Any, start: int, n: int) -> pa.Table:
    records = [Record(start + i, 1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i,
                      [("h", b"x")] if i % 2 else []) for i in range(n)]
    sorted_ = RecordSorter("t", "key_value", Codecs(None)).sort(  # type: ignore[arg-type]
        0, batch_of(records), start, start + n)
    return table_rows(sorted_, table.schema())


def _dump(m: TableMetadata) -> dict[str, Any]:
    out: dict[str, Any] = m.model_dump(by_alias=True)
    out.pop("last-updated-ms")  # a clock reading of each side
    return out


def test_flush_transaction_metadata_is_pyicebergs(tmp_path: Path) -> None:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    tables = Tables(catalog, "kafka", tmp_path / "pending")
    table = tables.create("t", table_schema(None), "(hour(kafka.timestamp))")
    for i in range(3):  # a table with snapshots
        table = tables.commit(table, _rows(table, 10 * i, 10), {0: 10 * i}, {0: 10 * i + 10},
                              {0: 0})
    txn = FlushTransaction(table)
    assert txn.table_metadata is table.metadata  # nothing staged: the table's own
    txn.set_properties({"some.property": "1"})
    with txn.update_schema() as update:
        update.union_by_name(table_schema([]).select("kafka"))  # nothing new: no change
    snapshot = txn.update_snapshot(snapshot_properties={"tidelog.offsets": '{"0": 40}'})
    with snapshot.fast_append() as append:
        for f in data_files(txn.table_metadata, _rows(table, 30, 10), table.io,
                            append.commit_uuid):
            append.append_data_file(f)
    got, want = txn.table_metadata, update_table_metadata(table.metadata, txn._updates)
    assert got is txn.table_metadata  # worked out once for these updates
    assert _dump(got) == _dump(want)
    assert got.properties["some.property"] == "1" and len(got.snapshots) == 4
    committed = txn.commit_transaction()
    assert len(committed.scan().to_arrow()) == 40
