"""An error a handler turns into a Kafka error code (Kafka's ApiException)."""

from __future__ import annotations

from tidelog.protocol.errors import ErrorCode, error_code
from tidelog.storage.errors import kafka_error_of


class ApiError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code.name}: {message}" if message else code.name)


def to_error(exc: BaseException) -> tuple[ErrorCode, str | None]:
    """(code, message) for any exception a handler caught from below."""
    if isinstance(exc, ApiError):
        return exc.code, exc.message
    if isinstance(exc, ValueError) and type(exc).__name__ == "ConfigError":
        return ErrorCode.INVALID_CONFIG, str(exc)
    return error_code(kafka_error_of(exc)), str(exc) or None
