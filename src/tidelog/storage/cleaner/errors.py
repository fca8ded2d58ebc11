"""The cleaner's control-flow exceptions (Kafka's LogCleaningAbortedException & co)."""

from __future__ import annotations


class LogCleaningAbortedError(Exception):
    """Cleaning of a partition was aborted (log deleted, truncated, paused); not a failure."""


class ThreadShutdownError(Exception):
    """The cleaner is shutting down."""


class SwapAbortedError(LogCleaningAbortedError):
    """The segments to replace changed under the cleaner (e.g. retention deleted one): the
    round is abandoned and retried later, the partition stays cleanable."""
