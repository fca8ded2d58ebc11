"""A flush's data file (iceberg/data_files.py) dictionary-encodes the columns whose sampled
values repeat and no others, and keeps every row; its rows' projection onto the file schema
is pyiceberg's, also when taken from the cache."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import ParquetFormatModel, _to_requested_schema
from pyiceberg.schema import Schema, sanitize_column_names
from pyiceberg.types import LongType, NestedField

from tidelog.iceberg.columns import table_schema
from tidelog.iceberg.data_files import _Derived, derived, dictionary_columns, requested
from tidelog.iceberg.rows import RecordSorter, batch_of, table_rows
from tidelog.iceberg.schemas import Codecs
from tidelog.iceberg.tables import Tables
from tidelog.records import Record


def test_dictionary_only_for_columns_whose_values_repeat(tmp_path: Path) -> None:
    n = 5000
    table = pa.table({
        "id": pa.array(range(n), pa.int64()),  # distinct
        "customer": pa.array([f"c{i % 7}" for i in range(n)]),  # 7 values
        "payload": pa.array([b"p%d" % i for i in range(n)]),  # distinct
        "half": pa.array([i // 2 for i in range(n)], pa.int64()),  # half distinct: repeats
        "tags": pa.array([["a", "b"][: i % 3] for i in range(n)]),  # in a list: always
    })
    chosen = dictionary_columns(table)
    assert chosen == ["customer", "half", "tags.list.element"]
    pq.write_table(table, tmp_path / "f.parquet", use_dictionary=chosen)
    meta = pq.ParquetFile(tmp_path / "f.parquet").metadata.row_group(0)
    encoded = {meta.column(i).path_in_schema: meta.column(i).has_dictionary_page
               for i in range(meta.num_columns)}
    assert encoded == {"id": False, "customer": True, "payload": False, "half": True,
                       "tags.list.element": True}
    assert pq.read_table(tmp_path / "f.parquet").equals(table)


def _projected(file_schema: Any, task_schema: Any, batch: pa.RecordBatch) -> pa.RecordBatch:
    return _to_requested_schema(requested_schema=file_schema, file_schema=task_schema,
                                batch=batch, include_field_ids=True,
                                format_model=ParquetFormatModel())


def test_the_rows_projection_is_pyicebergs_when_cached(tmp_path: Path) -> None:
    """A flush's rows (the kafka struct, its list of header structs, the value) are cast to
    the schema pyiceberg's projection gave the first batch of their schema: the same schema,
    field ids included, and the same rows; a schema whose names the file schema changes is
    projected by pyiceberg every time."""
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}")
    table = Tables(catalog, "kafka", tmp_path / "pending").create(
        "t", table_schema(None), "(hour(kafka.timestamp))")
    for start in (0, 10):
        records = [Record(start + i, 1_700_000_000_000 + i, b"k%d" % i if i % 3 else None,
                          b"v%d" % i, [("h", b"x")] if i % 2 else []) for i in range(10)]
        rows = table_rows(RecordSorter("t", "key_value", Codecs(None)).sort(  # type: ignore[arg-type]
            0, batch_of(records), start, start + 10), table.schema())
        batch = rows.to_batches()[0]
        schemas = derived(table.metadata, batch.schema)
        was = schemas.relabel
        got = requested(schemas, schemas.file_schema, schemas.task_schema, batch)
        want = _projected(schemas.file_schema, schemas.task_schema, batch)
        assert got.schema.equals(want.schema, check_metadata=True)
        assert got.equals(want)
        assert (was is not None) == (start == 10)  # the second batch took the cast
    weird = Schema(NestedField(1, "a.b", LongType(), required=False))
    batch = pa.record_batch([pa.array([1, None], pa.int64())], names=["a.b"])
    file_schema = sanitize_column_names(weird)
    for _ in range(2):
        schemas = _Derived(weird, file_schema, {})
        got = requested(schemas, file_schema, weird, batch)
        assert schemas.relabel is None and got.schema.names == ["a_x2Eb"]
        assert got.equals(_projected(file_schema, weird, batch))
