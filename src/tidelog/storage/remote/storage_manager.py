"""Kafka's ``RemoteStorageManager`` plugin interface (KIP-405), its inputs and its errors.

Kafka's methods return ``InputStream``; these return ``bytes`` (remote reads are a bounded
range of one segment: Kafka's ``RemoteLogReader`` reads at most ``fetch.max.bytes``).
Every method may block on the network: callers run them off the event loop.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .metadata import RemoteLogSegmentMetadata


class RemoteStorageError(Exception):
    """Kafka's ``RemoteStorageException``: remote storage failed (unreachable, 5xx,
    refused credentials, ...). Retriable: the same call may succeed later."""


class RemoteResourceNotFoundError(RemoteStorageError):
    """Kafka's ``RemoteResourceNotFoundException``: the object asked for is not there."""


class IndexType(enum.Enum):
    """Kafka's ``RemoteStorageManager.IndexType``."""

    OFFSET = "OFFSET"
    TIMESTAMP = "TIMESTAMP"
    PRODUCER_SNAPSHOT = "PRODUCER_SNAPSHOT"
    TRANSACTION = "TRANSACTION"
    LEADER_EPOCH = "LEADER_EPOCH"


@dataclass(frozen=True)
class LogSegmentData:
    """Kafka's ``LogSegmentData``: the files of one closed segment to copy.

    ``leader_epoch_index`` is the content of the leader-epoch checkpoint for the segment
    (Kafka's format: version, count, ``epoch offset`` lines), built by the caller from the
    log's leader-epoch cache truncated to the segment's end."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot_index: Path
    leader_epoch_index: bytes


class RemoteStorageManager(Protocol):
    """Kafka's ``RemoteStorageManager``: copies a segment's files to remote storage and
    reads them back. Implementations: :class:`tidelog.storage.remote.rsm.RemoteStorageManager`
    (made by :func:`tidelog.storage.remote.factory.create_remote_storage_manager`)."""

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        """Copy every file of ``data`` for the segment ``metadata`` names; return custom
        metadata to store with the segment (or None). Copying the same segment id again
        overwrites. Raises :class:`RemoteStorageError` (partial objects may remain: the
        caller deletes them with :meth:`delete_log_segment_data`)."""
        ...

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        """Bytes of the segment's ``.log`` from ``start_position`` to ``end_position``
        INCLUSIVE (Kafka's contract), or to its end when None (a reader should bound it:
        start + fetch.max.bytes). Raises
        :class:`RemoteResourceNotFoundError` when the segment is not there."""
        ...

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        """The whole index file of ``index_type``. Raises
        :class:`RemoteResourceNotFoundError` when it is not there (a segment copied without
        a transaction index has none)."""
        ...

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Delete every object of the segment; objects already gone are not an error."""
        ...

    def close(self) -> None:
        """Release clients and connections."""
        ...
