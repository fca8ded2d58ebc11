"""tidelog's ``RemoteStorageManager``: Aiven's plugin over an :class:`ObjectStorage`,
WITHOUT Aiven's chunking, compression, encryption or manifest.

Each file of a segment becomes ONE object, byte for byte the local file (keys from
:mod:`.object_key`: ``.log``, ``.index``, ``.timeindex``, ``.snapshot``, ``.txnindex``
when the segment has one, ``.leader_epoch_checkpoint``), so any tool that reads Kafka's
segment files reads the bucket. A fetch of ``.log`` bytes is one ranged GET. The ``.log`` is
uploaded last: a segment whose ``.log`` is there had all its other files uploaded.
"""

from __future__ import annotations

from pathlib import Path

from .metadata import RemoteLogSegmentMetadata
from .object_key import ObjectKeyFactory
from .object_storage import ObjectStorage
from .storage_manager import IndexType, LogSegmentData, RemoteStorageError


class RemoteStorageManager:
    """Kafka's ``RemoteStorageManager`` (see :mod:`.storage_manager`) over ``storage``."""

    def __init__(self, storage: ObjectStorage, key_prefix: str = "") -> None:
        self.storage = storage
        self.keys = ObjectKeyFactory(key_prefix)

    def _uploads(self, metadata: RemoteLogSegmentMetadata,
                 data: LogSegmentData) -> list[tuple[str, Path | bytes]]:
        index = self.keys.index_key
        uploads: list[tuple[str, Path | bytes]] = [
            (index(metadata, IndexType.OFFSET), data.offset_index),
            (index(metadata, IndexType.TIMESTAMP), data.time_index),
            (index(metadata, IndexType.PRODUCER_SNAPSHOT), data.producer_snapshot_index),
            (index(metadata, IndexType.LEADER_EPOCH), data.leader_epoch_index),
        ]
        if data.transaction_index is not None:
            uploads.append((index(metadata, IndexType.TRANSACTION), data.transaction_index))
        uploads.append((self.keys.log_key(metadata), data.log_segment))
        return uploads

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        """Upload every file of the segment (the ``.log`` last); no custom metadata."""
        for key, source in self._uploads(metadata, data):
            if isinstance(source, Path) and not source.is_file():
                raise RemoteStorageError(f"{source} (for {key!r}) is not a file")
            self.storage.upload(key, source)
        return None

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        """Kafka's ``fetchLogSegment``: ``end_position`` is INCLUSIVE, None = to the end."""
        if start_position < 0:
            raise ValueError(f"start position {start_position} must not be negative")
        if end_position is not None and end_position < start_position:
            raise ValueError(f"end position {end_position} is before start position "
                             f"{start_position}")
        return self.storage.fetch(self.keys.log_key(metadata), (start_position, end_position))

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        return self.storage.fetch(self.keys.index_key(metadata, index_type))

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """Delete the ``.log`` first (a segment without it is not readable), then the rest."""
        self.storage.delete(self.keys.all_keys(metadata))

    def close(self) -> None:
        self.storage.close()
