"""A flush's data file (iceberg/data_files.py) dictionary-encodes the columns whose sampled
values repeat and no others, and keeps every row."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tidelog.iceberg.data_files import dictionary_columns


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
