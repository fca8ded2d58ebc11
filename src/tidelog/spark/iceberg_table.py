"""``spark.read.format("tidelog").option("table", "kafka.orders")``: a topic's Iceberg table
read with no Iceberg jar. The driver plans the data files of one snapshot with pyiceberg (the
current one, or Iceberg's ``snapshot-id`` / ``as-of-timestamp`` options); each executor reads
its Parquet file with pyarrow, columns matched by name to the table's schema (a file written
before a column was added gives nulls there).

The catalog: the ``iceberg.*`` options (``iceberg.catalog.type``, ``iceberg.catalog.uri``,
``iceberg.catalog.name``, ``iceberg.warehouse``, ``iceberg.s3.*``), or ``path`` = a broker's
first log dir, whose embedded catalog is ``<path>/.iceberg/catalog.db``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .options import OptionError

if TYPE_CHECKING:
    from pyiceberg.table import Table

_S3 = {"iceberg.s3.endpoint": "s3.endpoint", "iceberg.s3.access.key.id": "s3.access-key-id",
       "iceberg.s3.secret.access.key": "s3.secret-access-key", "iceberg.s3.region": "s3.region"}


def wants_table(options: Mapping[str, Any]) -> bool:
    return any(str(k).lower() == "table" for k in options)


def _catalog_props(options: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    kind = options.get("iceberg.catalog.type", "sql")
    name = options.get("iceberg.catalog.name", "tidelog")
    uri, warehouse = options.get("iceberg.catalog.uri"), options.get("iceberg.warehouse")
    if "path" in options and kind == "sql":
        home = Path(options["path"]).resolve() / ".iceberg"
        uri = uri or f"sqlite:///{home / 'catalog.db'}"
        warehouse = warehouse or f"file://{home / 'warehouse'}"
    if not uri:
        raise OptionError("the table option needs iceberg.catalog.uri or path (a log dir)")
    props = {"type": kind, "uri": uri, **({"warehouse": warehouse} if warehouse else {})}
    props.update({v: options[k] for k, v in _S3.items() if k in options})
    return name, props


def load_table(options: Mapping[str, Any]) -> Table:
    from pyiceberg.catalog import load_catalog

    opts = {str(k).lower(): str(v) for k, v in options.items()}
    name, props = _catalog_props(opts)
    return load_catalog(name, **props).load_table(opts["table"])


def _arrow_schema(table: Table) -> pa.Schema:
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    return _plain(schema_to_pyarrow(table.schema(), include_field_ids=False))


def _plain(schema: pa.Schema) -> pa.Schema:
    """Spark's Arrow conversion wants string/binary/list, not their large forms."""
    return pa.schema([pa.field(f.name, _plain_type(f.type), f.nullable) for f in schema])


def _plain_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(_plain_type(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain_type(f.type), f.nullable) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_plain_type(t.key_type), _plain_type(t.item_type))
    return t


def spark_schema(options: Mapping[str, Any]) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    schema: StructType = from_arrow_schema(_arrow_schema(load_table(options)))
    return schema


SPLIT_BYTES = 128 << 20  # data files are packed into input partitions of about this size


@dataclass
class DataFilePartition(InputPartition):
    paths: list[str]
    schema_ipc: bytes  # the table schema's Arrow form (the executor has no catalog)


def pack(files: list[tuple[str, int]], limit: int = SPLIT_BYTES) -> list[list[str]]:
    """Data files (path, bytes) in groups of at most ``limit`` bytes (a bigger file alone):
    one Spark task per group, not per small file."""
    groups: list[list[str]] = []
    size = limit
    for path, n in files:
        if size + n > limit:
            groups.append([])
            size = 0
        groups[-1].append(path)
        size += n
    return groups


def _snapshot_id(table: Table, options: Mapping[str, str]) -> int | None:
    if "snapshot-id" in options:
        return int(options["snapshot-id"])
    if "as-of-timestamp" in options:
        snap = table.snapshot_as_of_timestamp(int(options["as-of-timestamp"]))
        if snap is None:
            raise OptionError(f"no snapshot at or before {options['as-of-timestamp']}")
        return int(snap.snapshot_id)
    current = table.current_snapshot()
    return None if current is None else int(current.snapshot_id)


class IcebergTableReader(DataSourceReader):
    def __init__(self, options: Mapping[str, Any]) -> None:
        self.options = {str(k).lower(): str(v) for k, v in options.items()}

    def partitions(self) -> list[InputPartition]:
        table = load_table(self.options)
        snapshot_id = _snapshot_id(table, self.options)
        if snapshot_id is None:
            return []
        # the current schema is the one Spark was given: older files are read into it
        ipc = _arrow_schema(table).serialize().to_pybytes()
        tasks = table.scan(snapshot_id=snapshot_id).plan_files()
        files = [(t.file.file_path, int(t.file.file_size_in_bytes)) for t in tasks]
        return [DataFilePartition(group, ipc) for group in pack(files)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, DataFilePartition):
            return iter(())
        return _read_file(partition)


def _read_file(part: DataFilePartition) -> Iterator[pa.RecordBatch]:
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    target = pa.ipc.read_schema(pa.py_buffer(part.schema_ipc))
    for uri in part.paths:
        fs, path = pafs.FileSystem.from_uri(uri)
        data = pq.read_table(path, filesystem=fs)
        columns = []
        for f in target:
            if f.name in data.column_names:
                columns.append(_conform(data.column(f.name), f.type))
            else:
                columns.append(pa.nulls(data.num_rows, f.type))
        yield from pa.Table.from_arrays(columns, schema=target).to_batches()


def _conform(col: pa.ChunkedArray, t: pa.DataType) -> pa.ChunkedArray:
    """A file's column as the table's type (fields a struct gained later become nulls)."""
    if col.type == t:
        return col
    if pa.types.is_struct(t) and pa.types.is_struct(col.type):
        chunks = []
        for chunk in col.chunks:
            children = [
                _conform(pa.chunked_array([chunk.field(f.name)]), f.type).combine_chunks()
                if chunk.type.get_field_index(f.name) >= 0 else pa.nulls(len(chunk), f.type)
                for f in t]
            chunks.append(pa.StructArray.from_arrays(children, fields=list(t),
                                                     mask=chunk.is_null()))
        return pa.chunked_array(chunks, t)
    return col.cast(t)
