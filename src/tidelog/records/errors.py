"""Errors raised by the record codec (Kafka's CorruptRecordException & co)."""

from __future__ import annotations


class RecordError(Exception):
    """Base class of record-format errors."""


class CorruptRecordError(RecordError):
    """A batch fails a structural check (size, magic, CRC); ``position`` is its byte offset."""

    def __init__(self, message: str, position: int | None = None, path: str | None = None) -> None:
        self.position = position
        self.path = path
        where = ""
        if path is not None:
            where += f"{path}"
        if position is not None:
            where += f"{' ' if where else ''}at byte {position}"
        super().__init__(f"{message} ({where})" if where else message)


class InvalidRecordError(RecordError):
    """A record inside a batch is malformed (Kafka's InvalidRecordException)."""


class UnsupportedCompressionError(RecordError):
    """Unknown codec id, or the decompressed size exceeds the allowed bound."""
