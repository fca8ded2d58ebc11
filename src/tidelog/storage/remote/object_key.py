"""Object keys of remote segment files: the layout of Aiven's ``ObjectKeyFactory``.

``<key prefix><topic>-<topic id>/<partition>/<20-digit start offset>-<segment id>.<suffix>``
where both ids are Kafka's ``Uuid.toString`` (URL-safe base64, unpadded), e.g.
``prefix/topic-MWJ6FHTfRYy67jzwZdeqSQ/7/00000000000000001234-tqimKeZwStOEOwRzT3L5oQ.log``.
Unlike Aiven (one ``.indexes`` object and an ``.rsm-manifest``), each index is its own
object with the suffix of Kafka's local file, byte-identical to it.
"""

from __future__ import annotations

from .metadata import RemoteLogSegmentMetadata, uuid_to_str
from .storage_manager import IndexType

LOG_SUFFIX = "log"
INDEX_SUFFIXES: dict[IndexType, str] = {
    IndexType.OFFSET: "index",
    IndexType.TIMESTAMP: "timeindex",
    IndexType.PRODUCER_SNAPSHOT: "snapshot",
    IndexType.TRANSACTION: "txnindex",
    IndexType.LEADER_EPOCH: "leader_epoch_checkpoint",
}


def filename_prefix_from_offset(offset: int) -> str:
    """Kafka's ``filenamePrefixFromOffset``: the offset, zero-padded to 20 digits."""
    return f"{offset:020d}"


def main_path(metadata: RemoteLogSegmentMetadata) -> str:
    """Aiven's ``ObjectKeyFactory.mainPath``:
    ``<topic>-<topic id>/<partition>/<20-digit start offset>-<segment id>``."""
    segment_id = metadata.remote_log_segment_id
    tip = segment_id.topic_id_partition
    return (f"{tip.topic}-{uuid_to_str(tip.topic_id)}/{tip.partition}/"
            f"{filename_prefix_from_offset(metadata.start_offset)}-{uuid_to_str(segment_id.id)}")


class ObjectKeyFactory:
    """Keys of a segment's objects under ``prefix`` (``rsm.config.key.prefix``, may be "")."""

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix or ""

    def key(self, metadata: RemoteLogSegmentMetadata, suffix: str) -> str:
        return f"{self.prefix}{main_path(metadata)}.{suffix}"

    def log_key(self, metadata: RemoteLogSegmentMetadata) -> str:
        return self.key(metadata, LOG_SUFFIX)

    def index_key(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> str:
        return self.key(metadata, INDEX_SUFFIXES[index_type])

    def all_keys(self, metadata: RemoteLogSegmentMetadata) -> list[str]:
        """The ``.log`` key and every index key (whether or not the segment had that file)."""
        return [self.log_key(metadata), *(self.index_key(metadata, t) for t in IndexType)]
