"""A flush's rows as the table's Parquet data files, written here with pyarrow in the
flush's own thread: pyiceberg's writer, step for step (the file schema with field ids,
the table's ``write.parquet.*`` settings, the file name with the commit uuid, the column
metrics from the file's footer by ``data_file_statistics_from_parquet_metadata``), with one
difference: dictionary encoding only for the columns whose values repeat.

pyarrow dictionary-encodes every column by default; on a column of distinct values (the
offsets, raw values, ids, prices) it builds a dictionary until the dictionary page limit
and then falls back to plain encoding, which costs about as much as the rest of the write.
A column of a flush gets a dictionary when at most half of a sample of its values are
distinct (leaves inside lists and maps keep pyarrow's default: a dictionary). The codec is
the table's (``write.parquet.compression-codec``, Iceberg's default zstd).

pyiceberg splits a table by its partition values with a group-by and one filtered copy of
the rows per value; a flush's rows nearly always fall in one partition (the default spec is
the hour of the record's timestamp), so when every row has the same partition values the
rows are written as they are, with that one partition key.

The schemas a write derives from the table's (the rows' schema with field ids, the file
schema with sanitized names, its Parquet column paths) are worked out once per table schema
(table uuid and schema id: a table's schema of an id never changes), not once per flush. So
are the column metrics the write collects (``compute_statistics_plan``, by the table's
properties), and so is what pyiceberg's projection of the rows onto the file schema (``_to_requested_schema``)
does to them: a flush's rows are already in the table's Arrow types, and when the projection
only names their fields with the file schema's ids (its result's schema is theirs but for
field metadata) the rows of later flushes of that schema are cast to its result's schema,
which keeps their buffers, instead of walking the schema again (0.2-2.7 ms a flush against
0.02 ms)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import IO, Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO, OutputStream
from pyiceberg.io.pyarrow import (
    ParquetFormatModel,
    StatisticsCollector,
    _determine_partitions,
    _get_field_from_arrow_table,
    _get_parquet_writer_kwargs,
    _to_requested_schema,
    bin_pack_arrow_table,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
    pyarrow_to_schema,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionFieldValue, PartitionKey
from pyiceberg.schema import Schema, sanitize_column_names
from pyiceberg.table import TableProperties, WriteTask
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.typedef import Record
from pyiceberg.utils.properties import property_as_int

SAMPLE = 1024  # values of a column looked at to decide its dictionary encoding (a quarter
# of the cost of 4,096, the same choices on the benches' columns)


@dataclass
class _Derived:
    task_schema: Schema  # the rows' Arrow schema as an Iceberg schema (the table's ids)
    file_schema: Schema  # the table's schema with names Parquet takes
    column_ids: dict[str, int]  # Parquet column path -> field id
    relabel: pa.Schema | None = None  # the projection's result, when it only relabels
    # the column metrics to collect, by the table's properties (``compute_statistics_plan``)
    stats: dict[tuple[tuple[str, str], ...], dict[int, StatisticsCollector]] = dataclass_field(
        default_factory=dict)

    def statistics_plan(self, properties: dict[str, str]
                        ) -> dict[int, StatisticsCollector]:
        """``compute_statistics_plan`` of the file schema under ``properties``, worked out
        once per set of properties."""
        key = tuple(sorted(properties.items()))
        found = self.stats.get(key)
        if found is None:
            found = self.stats[key] = compute_statistics_plan(self.file_schema, properties)
        return found


_DERIVED: dict[tuple[str, int, int, pa.Schema], _Derived] = {}
_DERIVED_MAX = 256  # tables x schemas kept


def derived(metadata: TableMetadata, arrow: pa.Schema) -> _Derived:
    """The schemas a write of rows of ``arrow`` derives from the table's current one."""
    key = (str(metadata.table_uuid), metadata.current_schema_id, metadata.format_version,
           arrow)
    found = _DERIVED.get(key)
    if found is None:
        if len(_DERIVED) >= _DERIVED_MAX:
            _DERIVED.clear()
        file_schema = sanitize_column_names(metadata.schema())
        found = _DERIVED[key] = _Derived(
            pyarrow_to_schema(arrow, name_mapping=metadata.schema().name_mapping,
                              format_version=metadata.format_version),
            file_schema, parquet_path_to_id_mapping(file_schema))
    return found


def data_files(metadata: TableMetadata, data: pa.Table, io: FileIO,
               write_uuid: uuid.UUID) -> Iterator[DataFile]:
    """The files of ``data`` (rows in the table's arrow schema), written now."""
    size = property_as_int(metadata.properties, TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
                           TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT)
    assert size is not None
    task_schema = derived(metadata, data.schema).task_schema
    counter = itertools.count(0)
    for key, rows in _by_partition(metadata, data):
        for batches in bin_pack_arrow_table(rows, size):
            task = WriteTask(write_uuid=write_uuid, task_id=next(counter),
                             record_batches=batches, partition_key=key, schema=task_schema)
            yield write_data_file(metadata, io, task)


def _by_partition(metadata: TableMetadata, data: pa.Table
                  ) -> Iterable[tuple[PartitionKey | None, pa.Table]]:
    if metadata.spec().is_unpartitioned():
        return [(None, data)]
    key = single_partition(metadata, data)
    if key is not None:
        return [(key, data)]
    return ((p.partition_key, p.arrow_table_partition) for p in _determine_partitions(
        spec=metadata.spec(), schema=metadata.schema(), arrow_table=data))


def write_data_file(metadata: TableMetadata, io: FileIO, task: WriteTask) -> DataFile:
    """One Parquet data file of ``task``'s rows, as pyiceberg's ``write_file`` makes it."""
    assert task.schema is not None
    schemas = derived(metadata, task.record_batches[0].schema) if task.record_batches else None
    file_schema = schemas.file_schema if schemas else sanitize_column_names(metadata.schema())
    arrow = pa.Table.from_batches([requested(schemas, file_schema, task.schema, batch)
                                   for batch in task.record_batches])
    path = load_location_provider(metadata.location, metadata.properties).new_data_location(
        data_file_name=task.generate_data_file_filename("parquet"),
        partition_key=task.partition_key)
    output = io.new_output(path)
    metadata_footer = _write_parquet(output.create(overwrite=True), arrow, metadata)
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=metadata_footer,
        stats_columns=schemas.statistics_plan(metadata.properties) if schemas else (
            compute_statistics_plan(file_schema, metadata.properties)),
        parquet_column_mapping=schemas.column_ids if schemas else parquet_path_to_id_mapping(
            file_schema))
    return DataFile.from_args(
        content=DataFileContent.DATA, file_path=path, file_format=FileFormat.PARQUET,
        partition=task.partition_key.partition if task.partition_key else Record(),
        file_size_in_bytes=len(output), sort_order_id=None,
        spec_id=metadata.default_spec_id, equality_ids=None, key_metadata=None,
        **statistics.to_serialized_dict())


def requested(schemas: _Derived | None, file_schema: Schema, task_schema: Schema,
              batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` projected onto ``file_schema`` with field ids, as pyiceberg's
    ``_to_requested_schema`` gives it (``schemas``: the derived schemas of ``batch``'s)."""
    if schemas is not None and schemas.relabel is not None:
        return batch.cast(schemas.relabel)
    out: pa.RecordBatch = _to_requested_schema(
        requested_schema=file_schema, file_schema=task_schema, batch=batch,
        include_field_ids=True, format_model=ParquetFormatModel())
    if schemas is not None and out.schema.equals(batch.schema, check_metadata=False):
        schemas.relabel = out.schema  # its types are the rows': only names and ids moved
    return out


def _write_parquet(stream: OutputStream, arrow: pa.Table, metadata: TableMetadata
                   ) -> pq.FileMetaData:
    row_group = property_as_int(metadata.properties, TableProperties.PARQUET_ROW_GROUP_LIMIT,
                                TableProperties.PARQUET_ROW_GROUP_LIMIT_DEFAULT)
    with cast(IO[Any], stream) as out:
        writer = pq.ParquetWriter(out, schema=arrow.schema, store_decimal_as_integer=True,
                                  use_dictionary=dictionary_columns(arrow),
                                  **_get_parquet_writer_kwargs(metadata.properties))
        with writer:
            writer.write(arrow, row_group_size=row_group)
    footer: pq.FileMetaData = writer.writer.metadata
    return footer


def dictionary_columns(table: pa.Table) -> list[str]:
    """The Parquet column paths to dictionary-encode: leaves whose sampled values repeat
    (at most half distinct), and every leaf inside a list or map."""
    out: list[str] = []
    sample = table.slice(0, SAMPLE)
    for name, column in zip(sample.column_names, sample.columns, strict=True):
        _leaves(name, column.combine_chunks(), out)
    return out


def _leaves(path: str, array: pa.Array, out: list[str]) -> None:
    t = array.type
    if pa.types.is_struct(t):
        assert isinstance(array, pa.StructArray)
        for i in range(t.num_fields):
            _leaves(f"{path}.{t.field(i).name}", array.field(i), out)
    elif pa.types.is_map(t):
        out.extend(f"{path}.key_value.{p}" for p in _all_leaves("key", t.key_type)
                   + _all_leaves("value", t.item_type))
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        out.extend(f"{path}.list.{p}" for p in _all_leaves("element", t.value_type))
    elif len(array) == 0 or int(pc.count_distinct(array).as_py()) * 2 <= len(array):
        out.append(path)


def _all_leaves(path: str, t: pa.DataType) -> list[str]:
    if pa.types.is_struct(t):
        return [p for f in t for p in _all_leaves(f"{path}.{f.name}", f.type)]
    if pa.types.is_map(t):
        return [f"{path}.key_value.{p}" for p in _all_leaves("key", t.key_type)
                + _all_leaves("value", t.item_type)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [f"{path}.list.{p}" for p in _all_leaves("element", t.value_type)]
    return [path]


def single_partition(metadata: TableMetadata, data: pa.Table) -> PartitionKey | None:
    """The partition key of every row when all rows have the same one (None otherwise, or
    for an unpartitioned table)."""
    spec, schema = metadata.spec(), metadata.schema()
    if spec.is_unpartitioned() or data.num_rows == 0:
        return None
    values = []
    for field in spec.fields:
        source = schema.find_field(field.source_id)
        name = schema.find_column_name(field.source_id)
        if name is None:
            return None
        column = field.transform.pyarrow_transform(source.field_type)(
            _get_field_from_arrow_table(data, name))
        if column.null_count not in (0, len(column)):
            return None
        if column.null_count == 0:
            bounds = pc.min_max(column)
            if bounds["min"] != bounds["max"]:
                return None
        values.append(PartitionFieldValue(field=field, value=column[0].as_py()))
    return PartitionKey(field_values=values, partition_spec=spec, schema=schema)

