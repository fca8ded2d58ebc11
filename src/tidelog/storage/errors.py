"""Storage-layer errors (Kafka's ApiException family as the log layer raises them).

Every error carries ``kafka_error``: the name of the Kafka error code a broker puts on the
wire for it (e.g. ``"OFFSET_OUT_OF_RANGE"``), so the server maps errors to codes without a
table of its own. ``CorruptRecordError`` is the records codec's class re-exported unchanged
and so is ``InvalidRecordError`` (so one ``except`` catches them wherever they were raised);
both get a ``kafka_error`` class attribute here. ``kafka_error_of(exc)`` resolves the code
name for any exception.
"""

from __future__ import annotations

from tidelog.records.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordError,
    UnsupportedCompressionError,
)

# The records layer raises these; storage callers catch them from here.
CorruptRecordError.kafka_error = "CORRUPT_MESSAGE"  # type: ignore[attr-defined]
InvalidRecordError.kafka_error = "INVALID_RECORD"  # type: ignore[attr-defined]

__all__ = [
    "CorruptIndexError",
    "CorruptRecordError",
    "CorruptSnapshotError",
    "IndexOffsetOverflowError",
    "InvalidOffsetError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "InvalidTxnStateError",
    "KafkaStorageError",
    "LogSegmentOffsetOverflowError",
    "OffsetOutOfRangeError",
    "OffsetsOutOfOrderError",
    "OutOfOrderSequenceError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "RecordValidationError",
    "StorageError",
    "TransactionCoordinatorFencedError",
    "UnexpectedAppendOffsetError",
    "UnsupportedCompressionTypeError",
    "kafka_error_of",
]


class StorageError(Exception):
    """Base of the storage errors; ``kafka_error`` names the wire error code."""

    kafka_error: str = "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(StorageError):
    kafka_error = "OFFSET_OUT_OF_RANGE"


class RecordTooLargeError(StorageError):
    """A single batch is larger than ``max.message.bytes`` (MESSAGE_TOO_LARGE on the wire)."""

    kafka_error = "MESSAGE_TOO_LARGE"


class RecordBatchTooLargeError(StorageError):
    """The record set cannot fit in one segment (RECORD_LIST_TOO_LARGE on the wire)."""

    kafka_error = "RECORD_LIST_TOO_LARGE"


class InvalidTimestampError(StorageError):
    kafka_error = "INVALID_TIMESTAMP"


class RecordValidationError(StorageError):
    """Kafka's RecordValidationException: per-record errors plus the underlying cause.

    ``errors`` lists ``(batch_index, message)`` for every offending record; ``cause`` is an
    InvalidRecordError or InvalidTimestampError and decides the wire code.
    """

    def __init__(
        self,
        errors: list[tuple[int, str]],
        cause: InvalidRecordError | InvalidTimestampError,
    ) -> None:
        self.errors = list(errors)
        self.cause = cause
        super().__init__(f"{cause} (record errors: {self.errors})")
        self.__cause__ = cause

    @property
    def kafka_error(self) -> str:  # type: ignore[override]
        return kafka_error_of(self.cause)

    @property
    def error_message(self) -> str:
        return str(self.cause)


class OutOfOrderSequenceError(StorageError):
    kafka_error = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(StorageError):
    kafka_error = "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(StorageError):
    kafka_error = "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(StorageError):
    kafka_error = "TRANSACTION_COORDINATOR_FENCED"


class KafkaStorageError(StorageError):
    """An I/O failure in a log dir (the dir goes offline; the client may retry elsewhere)."""

    kafka_error = "KAFKA_STORAGE_ERROR"


class LogSegmentOffsetOverflowError(StorageError):
    """An offset cannot be stored relative to a segment's base offset (int32 overflow)."""

    kafka_error = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str, segment_base_offset: int = -1, offset: int = -1) -> None:
        self.segment_base_offset = segment_base_offset
        self.offset = offset
        super().__init__(message)


class InvalidOffsetError(StorageError):
    """An index append out of order (Kafka's InvalidOffsetException)."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class IndexOffsetOverflowError(StorageError):
    """An offset outside [base, base + 2^31 - 1] given to an index."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class CorruptIndexError(StorageError):
    """An index fails its sanity check; the loader rebuilds it from the .log."""

    kafka_error = "CORRUPT_MESSAGE"


class CorruptSnapshotError(StorageError):
    """A producer-state snapshot file is unreadable (bad version, short file, CRC)."""

    kafka_error = "CORRUPT_MESSAGE"


class UnexpectedAppendOffsetError(StorageError):
    """A follower append starts below the log end offset."""

    kafka_error = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        super().__init__(message)


class OffsetsOutOfOrderError(StorageError):
    """Follower batches whose offsets are not monotonically increasing."""

    kafka_error = "UNKNOWN_SERVER_ERROR"


class UnsupportedCompressionTypeError(StorageError):
    kafka_error = "UNSUPPORTED_COMPRESSION_TYPE"


_RECORDS_ERRORS: tuple[tuple[type[BaseException], str], ...] = (
    (CorruptRecordError, "CORRUPT_MESSAGE"),
    (InvalidRecordError, "INVALID_RECORD"),
    (UnsupportedCompressionError, "CORRUPT_MESSAGE"),
    (RecordError, "CORRUPT_MESSAGE"),
    (OSError, "KAFKA_STORAGE_ERROR"),
)


def kafka_error_of(exc: BaseException) -> str:
    """The Kafka error-code name for any exception the storage layer lets through."""
    name = getattr(exc, "kafka_error", None)
    if isinstance(name, str):
        return name
    for cls, code in _RECORDS_ERRORS:
        if isinstance(exc, cls):
            return code
    return "UNKNOWN_SERVER_ERROR"
