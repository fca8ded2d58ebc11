"""RecordBatch v2: the wire format and the disk format at once. Imports nothing of ours."""

from .batch import (
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    ControlRecordType,
    EndTransactionMarker,
    Record,
    RecordBatch,
    TimestampType,
    crc32c,
    iter_batches,
    parse_control_key,
    parse_end_txn_marker,
)
from .builder import RecordBatchBuilder, assemble_batch, build_batch, encode_record
from .compression import CompressionType, compress, decompress
from .errors import CorruptRecordError, InvalidRecordError, RecordError, UnsupportedCompressionError

__all__ = [
    "LOG_OVERHEAD",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "RECORD_BATCH_OVERHEAD",
    "CompressionType",
    "ControlRecordType",
    "CorruptRecordError",
    "EndTransactionMarker",
    "InvalidRecordError",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "RecordError",
    "TimestampType",
    "UnsupportedCompressionError",
    "assemble_batch",
    "build_batch",
    "compress",
    "crc32c",
    "decompress",
    "encode_record",
    "iter_batches",
    "parse_control_key",
    "parse_end_txn_marker",
]
