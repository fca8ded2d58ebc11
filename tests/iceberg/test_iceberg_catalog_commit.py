"""The SQL catalog's commit from the table in hand (iceberg/catalog.py): it writes what
pyiceberg's own commit would (a reader's fresh load sees the same metadata, metadata log
included) without loading the table again; two writers racing from the same table are fenced
by the compare-and-swap of the metadata location (one lands, the other is refused with its
files deleted); a writer whose table moved on under it takes pyiceberg's path, which lands it
when its requirements still hold; a database failure at the swap leaves the commit's outcome
unknown: its files and marker stay until the table shows whether it landed."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyiceberg.types import LongType, NestedField, StringType
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from tidelog.iceberg.catalog import InHandSqlCatalog, open_catalog
from tidelog.iceberg.columns import table_schema
from tidelog.iceberg.rows import RecordSorter, batch_of, table_rows
from tidelog.iceberg.schemas import Codecs
from tidelog.iceberg.table_writer import TableWriter, TopicSettings
from tidelog.iceberg.tables import Tables, table_offsets
from tidelog.iceberg.value_codec import ValueCodec
from tidelog.records import Record

SPEC = "(hour(kafka.timestamp))"


class Counting(InHandSqlCatalog):
    """Counts loads and records each swap's answer; ``barrier``: every swap waits there."""

    barrier: threading.Barrier | None = None

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        self.loads = 0
        self.swaps: list[bool] = []

    def load_table(self, identifier: Any) -> Table:
        self.loads += 1
        return super().load_table(identifier)

    def _swap(self, table: Table, location: str) -> bool:
        if self.barrier is not None:
            self.barrier.wait(30)
        swapped = super()._swap(table, location)
        self.swaps.append(swapped)
        return swapped


def _catalog(tmp_path: Path, cls: type[SqlCatalog] = Counting) -> Any:
    return cls("tidelog", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/w")


def _rows(table: Table, start: int, n: int) -> pa.Table:
    records = [Record(start + i, 1_700_000_000_000 + i, b"k%d" % i, b"v%d" % (start + i), [])
               for i in range(n)]
    sorted_ = RecordSorter("t", "key_value", Codecs(None)).sort(  # type: ignore[arg-type]
        0, batch_of(records), start, start + n)
    return table_rows(sorted_, table.schema())


def _files(tmp_path: Path, pattern: str) -> set[str]:
    return {p.name for p in (tmp_path / "w").rglob(pattern)}


def test_open_catalog_commits_from_the_table_in_hand_on_wal(tmp_path: Path) -> None:
    values = {"iceberg.catalog.type": "sql", "iceberg.catalog.uri": "",
              "iceberg.warehouse": "", "iceberg.catalog.name": "tidelog"}
    catalog = open_catalog(values, tmp_path)
    assert isinstance(catalog, InHandSqlCatalog)
    with catalog.engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA synchronous")).scalar() == 2  # FULL


def test_a_commit_from_the_table_in_hand_is_what_a_reader_loads(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path)
    tables = Tables(catalog, "kafka", tmp_path / "pending")
    table = tables.create("t", table_schema(None), SPEC)
    for i in range(4):
        before = table.metadata_location
        loads = catalog.loads
        table = tables.commit(table, _rows(table, 10 * i, 10), {0: 10 * i}, {0: 10 * i + 10},
                              {0: 0})
        assert catalog.loads == loads  # not loaded again
        assert table.metadata.metadata_log[-1].metadata_file == before
    assert catalog.swaps == [True] * len(catalog.swaps) and len(catalog.swaps) >= 4
    fresh = _catalog(tmp_path, SqlCatalog).load_table("kafka.t")
    assert fresh.metadata_location == table.metadata_location
    assert fresh.metadata == table.metadata
    assert table_offsets(fresh.current_snapshot()).offsets == {0: 40}
    assert sorted(fresh.scan().to_arrow().column("kafka").combine_chunks().field(
        "offset").to_pylist()) == list(range(40))
    _only_referenced(tmp_path, fresh)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_two_writers_racing_are_fenced_by_the_swap(tmp_path: Path, seed: int) -> None:
    """Two brokers' translators (a deposed leader, epoch 0, and the new one, epoch 1) flush
    partition 0 from the same table, both past their own fencing check; both swaps run at
    once (a barrier holds each until the other is there): one lands, the other's swap finds
    the table moved and pyiceberg's path refuses it; its files are gone."""
    print(f"seed {seed}")
    first = _catalog(tmp_path)
    tables_a = Tables(first, "kafka", tmp_path / "pending-a")
    table = tables_a.create("t", table_schema(None), SPEC)
    table = tables_a.commit(table, _rows(table, 0, 10), {0: 0}, {0: 10}, {0: 0})
    catalog_a, catalog_b = _catalog(tmp_path), _catalog(tmp_path)
    barrier = threading.Barrier(2)
    catalog_a.barrier = catalog_b.barrier = barrier
    writers = {"a": (Tables(catalog_a, "kafka", tmp_path / "pending-a"), 0),
               "b": (Tables(catalog_b, "kafka", tmp_path / "pending-b"), 1)}
    loaded = {w: tables.load("t") for w, (tables, _) in writers.items()}
    outcome: dict[str, Any] = {}

    def flush(w: str) -> None:
        tables, epoch = writers[w]
        in_hand = loaded[w]
        assert in_hand is not None
        rows = _rows(in_hand, 10, 10 + seed)
        rows = rows.set_column(1, "value", pa.array([b"%s%d" % (w.encode(), i) for i in
                                                     range(rows.num_rows)], pa.large_binary()))
        try:
            outcome[w] = tables.commit(in_hand, rows, {0: 10}, {0: 20 + seed}, {0: epoch})
        except CommitFailedException as exc:
            outcome[w] = exc

    threads = [threading.Thread(target=flush, args=(w,)) for w in sorted(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    landed = [w for w, got in outcome.items() if isinstance(got, Table)]
    refused = [w for w, got in outcome.items() if isinstance(got, CommitFailedException)]
    assert len(landed) == 1 and len(refused) == 1, outcome
    swaps = {"a": catalog_a.swaps, "b": catalog_b.swaps}
    assert swaps[landed[0]] == [True] and swaps[refused[0]] == [False]
    table = _catalog(tmp_path, SqlCatalog).load_table("kafka.t")
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert table_offsets(snapshot).offsets == {0: 20 + seed}
    assert table_offsets(snapshot).epochs == {0: writers[landed[0]][1]}
    values = table.scan().to_arrow().column("value").to_pylist()
    assert len(values) == 10 + 10 + seed
    assert sum(v.startswith(landed[0].encode()) for v in values) == 10 + seed
    assert not any(v.startswith(refused[0].encode()) for v in values)
    # the refused commit's data files, manifests and metadata file are deleted: every file
    # left is one the table references
    _only_referenced(tmp_path, table)
    assert not list((tmp_path / f"pending-{refused[0]}").glob("*.json"))


def _only_referenced(tmp_path: Path, table: Table) -> None:
    snapshots = table.snapshots()
    lists = {Path(s.manifest_list).name for s in snapshots}
    manifests = {Path(m.manifest_path).name for s in snapshots for m in s.manifests(table.io)}
    data = {Path(f.file_path).name for task in table.scan().plan_files() for f in [task.file]}
    assert _files(tmp_path, "*.parquet") == data
    assert _files(tmp_path, "*.avro") == lists | manifests
    named = {Path(e.metadata_file).name for e in table.metadata.metadata_log}
    assert _files(tmp_path, "*.metadata.json") == named | {Path(table.metadata_location).name}


def test_a_writer_whose_table_moved_on_commits_through_the_catalogs_path(
        tmp_path: Path) -> None:
    """Another writer changed a property (not the branch): the swap from the stale table
    finds it, the new metadata file goes, and pyiceberg's path lands the append on the
    catalog's table, property kept."""
    catalog = _catalog(tmp_path)
    tables = Tables(catalog, "kafka", tmp_path / "pending")
    table = tables.create("t", table_schema(None), SPEC)
    table = tables.commit(table, _rows(table, 0, 10), {0: 0}, {0: 10}, {0: 0})
    other = _catalog(tmp_path, SqlCatalog).load_table("kafka.t")
    other.transaction().set_properties({"owner": "someone"}).commit_transaction()
    loads = catalog.loads
    table = tables.commit(table, _rows(table, 10, 10), {0: 10}, {0: 20}, {0: 0})
    assert catalog.swaps[-1] is False and catalog.loads == loads + 1  # the catalog's path
    fresh = _catalog(tmp_path, SqlCatalog).load_table("kafka.t")
    assert fresh.metadata_location == table.metadata_location
    assert fresh.properties["owner"] == "someone"
    assert table_offsets(fresh.current_snapshot()).offsets == {0: 20}
    assert len(fresh.scan().to_arrow()) == 20
    _only_referenced(tmp_path, fresh)


class FailingSwap(Counting):
    """The database fails at the swap: before the UPDATE (``landed`` False) or after its
    commit (True); either way the writer cannot tell whether the commit landed."""

    failing = False
    landed = False

    def _swap(self, table: Table, location: str) -> bool:
        if not self.failing:
            return super()._swap(table, location)
        if self.landed:
            assert super()._swap(table, location)
        raise OperationalError("UPDATE iceberg_tables", {}, Exception("disk I/O error"))


@pytest.mark.parametrize("landed", [False, True])
def test_a_swap_of_unknown_outcome_keeps_its_files_until_the_table_tells(
        tmp_path: Path, landed: bool) -> None:
    catalog = _catalog(tmp_path, FailingSwap)
    tables = Tables(catalog, "kafka", tmp_path / "pending")
    table = tables.create("t", table_schema(None), SPEC)
    table = tables.commit(table, _rows(table, 0, 10), {0: 0}, {0: 10}, {0: 0})
    catalog.failing, catalog.landed = True, landed
    with pytest.raises(OperationalError):
        tables.commit(table, _rows(table, 10, 10), {0: 10}, {0: 20}, {0: 0})
    assert len(list((tmp_path / "pending").glob("*.json"))) == 1  # the marker stays
    parquet = _files(tmp_path, "*.parquet")
    assert len(parquet) == 2  # and so do the data files
    tables.clean_pending()
    assert not list((tmp_path / "pending").glob("*.json"))
    fresh = _catalog(tmp_path, SqlCatalog).load_table("kafka.t")
    assert table_offsets(fresh.current_snapshot()).offsets == {0: 20 if landed else 10}
    assert len(fresh.scan().to_arrow()) == (20 if landed else 10)
    assert len(_files(tmp_path, "*.parquet")) == (2 if landed else 1)


class _Fields(ValueCodec):
    """A codec of given columns (the evolution looks at nothing else)."""

    def __init__(self, fields: list[NestedField]) -> None:
        self.fields = fields

    def decode(self, payload: bytes) -> dict[str, object]:
        raise NotImplementedError


def test_a_column_dropped_elsewhere_comes_back_with_the_next_flush_of_its_schema(
        tmp_path: Path) -> None:
    """The check that a codec's columns are in the table is kept per table schema: once the
    table's schema changes (here a user drops a column), the next flush of that codec
    compares again and adds the column back."""
    catalog = _catalog(tmp_path)
    tables = Tables(catalog, "kafka", tmp_path / "pending")
    settings = TopicSettings("t", "value_schema_id_prefix", SPEC, "dlq_table", 1000, "~dlq")
    writer = TableWriter(settings, tables, Codecs(None))
    codec = _Fields([NestedField(1, "a", LongType(), required=False),
                     NestedField(2, "b", StringType(), required=False)])
    table = tables.create("t", table_schema(codec.fields), SPEC)
    schema_id = table.metadata.current_schema_id
    assert writer._take(table, codec).metadata.current_schema_id == schema_id  # held
    with table.update_schema() as update:
        update.delete_column("b")
    assert "b" not in table.schema().column_names
    table = writer._take(table, codec)
    assert "b" in table.schema().column_names
    assert "b" in catalog.load_table("kafka.t").schema().column_names
