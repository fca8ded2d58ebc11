"""tidelog's ``RemoteStorageManager``: Aiven's plugin over an :class:`ObjectStorage`,
without its chunking, compression, encryption or manifest.

Each file of a segment becomes ONE object, byte for byte the local file (keys from
:mod:`.object_key`): any tool that reads Kafka's segment files reads the bucket. A fetch of
``.log`` bytes is one ranged GET.
"""

from __future__ import annotations

from .metadata import RemoteLogSegmentMetadata
from .object_key import ObjectKeyFactory
from .object_storage import ObjectStorage
from .storage_manager import IndexType, LogSegmentData


class RemoteStorageManager:
    """Kafka's ``RemoteStorageManager`` (see :mod:`.storage_manager`) over ``storage``."""

    def __init__(self, storage: ObjectStorage, key_prefix: str = "") -> None:
        self.storage = storage
        self.keys = ObjectKeyFactory(key_prefix)

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        raise NotImplementedError

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        raise NotImplementedError

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        raise NotImplementedError

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.storage.close()
