"""Storage-layer errors (Kafka's exception classes); ``kafka_error`` names the wire error code.

First written by the storage-segments session because it landed first; the storage-log
session owns this file and extends it.
"""

from __future__ import annotations

from tidelog.records.errors import CorruptRecordError as _RecordsCorruptRecordError
from tidelog.records.errors import InvalidRecordError as _RecordsInvalidRecordError

# Re-exports: the records layer raises these; storage callers catch them from here.
CorruptRecordError = _RecordsCorruptRecordError
InvalidRecordError = _RecordsInvalidRecordError
CorruptRecordError.kafka_error = "CORRUPT_MESSAGE"  # type: ignore[attr-defined]
InvalidRecordError.kafka_error = "INVALID_RECORD"  # type: ignore[attr-defined]


class StorageError(Exception):
    """Base class of storage errors."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class KafkaStorageError(StorageError):
    """An I/O failure on a log directory (the directory goes offline)."""

    kafka_error = "KAFKA_STORAGE_ERROR"


class OffsetOutOfRangeError(StorageError):
    kafka_error = "OFFSET_OUT_OF_RANGE"


class RecordTooLargeError(StorageError):
    kafka_error = "MESSAGE_TOO_LARGE"


class RecordBatchTooLargeError(StorageError):
    kafka_error = "RECORD_LIST_TOO_LARGE"


class InvalidTimestampError(StorageError):
    kafka_error = "INVALID_TIMESTAMP"


class RecordValidationError(StorageError):
    """Per-record validation failures: ``errors`` is a list of (record index, message)."""

    kafka_error = "INVALID_RECORD"

    def __init__(self, errors: list[tuple[int, str]], cause: Exception) -> None:
        self.errors = errors
        self.cause = cause
        if isinstance(cause, InvalidTimestampError):
            self.kafka_error = "INVALID_TIMESTAMP"
        super().__init__(str(cause))


class OutOfOrderSequenceError(StorageError):
    kafka_error = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(StorageError):
    kafka_error = "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(StorageError):
    kafka_error = "INVALID_TXN_STATE"


class LogSegmentOffsetOverflowError(StorageError):
    """An offset cannot be stored relative to a segment's base (Kafka's
    LogSegmentOffsetOverflowException); the caller splits the segment."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class InvalidOffsetError(StorageError):
    """An index append out of order (Kafka's InvalidOffsetException)."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class IndexOffsetOverflowError(StorageError):
    """An offset outside [base, base + 2^31 - 1] given to an index."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class CorruptIndexError(StorageError):
    """An index file fails its sanity check; it is deleted and rebuilt from the log."""

    kafka_error = "CORRUPT_MESSAGE"


class UnexpectedAppendOffsetError(StorageError):
    kafka_error = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        super().__init__(message)


class OffsetsOutOfOrderError(StorageError):
    kafka_error = "UNKNOWN_SERVER_ERROR"
