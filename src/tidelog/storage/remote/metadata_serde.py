"""Kafka's wire format of ``__remote_log_metadata`` record values.

Kafka's ``RemoteLogMetadataSerde`` (a ``BytesApiMessageSerde``): unsigned varint apiKey,
unsigned varint version (0), then the flexible-version message of
``storage/src/main/resources/message/``:

=======  =========================================  ===================================
apiKey   message                                    object
=======  =========================================  ===================================
0        RemoteLogSegmentMetadataRecord             RemoteLogSegmentMetadata
1        RemoteLogSegmentMetadataUpdateRecord       RemoteLogSegmentMetadataUpdate
2        RemotePartitionDeleteMetadataRecord        RemotePartitionDeleteMetadata
3        RemoteLogSegmentMetadataSnapshotRecord     RemoteLogSegmentMetadataSnapshot
=======  =========================================  ===================================
"""

from __future__ import annotations

from .metadata import RemoteLogMetadata


class RemoteLogMetadataSerdeError(ValueError):
    """A record value that is not one of Kafka's remote log metadata messages (the message
    says what and at which byte)."""


def serialize(obj: RemoteLogMetadata) -> bytes:
    """The record value Kafka writes for ``obj``."""
    raise NotImplementedError


def deserialize(data: bytes) -> RemoteLogMetadata:
    """The object of a record value; :class:`RemoteLogMetadataSerdeError` on bad input."""
    raise NotImplementedError
