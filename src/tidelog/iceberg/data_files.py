"""A flush's rows as the table's data files (pyiceberg's writer). pyiceberg splits a table
by its partition values with a group-by and one filtered copy of the rows per value; a
flush's rows nearly always fall in one partition (the default spec is the hour of the
record's timestamp), so when every row has the same partition values the rows are written
as they are, with that one partition key: the same files, without the copy. Rows of several
partitions take pyiceberg's own path."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import (
    _dataframe_to_data_files,
    _get_field_from_arrow_table,
    bin_pack_arrow_table,
    pyarrow_to_schema,
    write_file,
)
from pyiceberg.manifest import DataFile
from pyiceberg.partitioning import PartitionFieldValue, PartitionKey
from pyiceberg.table import TableProperties, WriteTask
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.utils.properties import property_as_int


def data_files(metadata: TableMetadata, data: pa.Table, io: FileIO,
               write_uuid: uuid.UUID) -> Iterable[DataFile]:
    key = single_partition(metadata, data)
    if key is None:
        return _dataframe_to_data_files(table_metadata=metadata, df=data, io=io,
                                        write_uuid=write_uuid)
    size = property_as_int(metadata.properties, TableProperties.WRITE_TARGET_FILE_SIZE_BYTES,
                           TableProperties.WRITE_TARGET_FILE_SIZE_BYTES_DEFAULT)
    assert size is not None
    schema = pyarrow_to_schema(data.schema, name_mapping=metadata.schema().name_mapping,
                               format_version=metadata.format_version)
    counter = itertools.count(0)
    return write_file(io=io, table_metadata=metadata, tasks=(
        WriteTask(write_uuid=write_uuid, task_id=next(counter), record_batches=batches,
                  partition_key=key, schema=schema)
        for batches in bin_pack_arrow_table(data, size)))


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
