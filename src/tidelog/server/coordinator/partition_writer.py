"""The coordinators' writes in a cluster: replicated appends with acks=all semantics
(Kafka's coordinator-common PartitionWriter).

Kafka's CoordinatorRuntime appends a write operation's records through
``ReplicaManager.appendRecords(requiredAcks = -1, origin = Coordinator)`` and completes the
operation (answers the client) once the high watermark passes them; so do the transaction
coordinator's appendTransactionToLog and the classic GroupMetadataManager.appendForGroup.
``PartitionWriter`` is that for the coordinators' stores: ``append``
writes as the partition's leader (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS surface as
``CoordinatorWriteError``, an ``OSError`` the coordinators already answer), and remembers the
offset after the last batch of each partition; handlers ``await replicated(partition)``
before answering, and get the Kafka error the coordinator maps the outcome to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidelog.protocol.errors import ErrorCode
from tidelog.server.errors import ApiError
from tidelog.storage.validator import AppendOrigin
from tidelog.util.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tidelog.server.replica_manager import ReplicaManager

# Kafka's appendForGroup / appendTransactionToLog error mapping
_TO_COORDINATOR_ERROR = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


def coordinator_error(error: ErrorCode) -> ErrorCode:
    return _TO_COORDINATOR_ERROR.get(error, error)


class CoordinatorWriteError(OSError):
    """A replicated coordinator append refused; ``error`` is the coordinator's error."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error


class PartitionWriter:
    """Appends of one internal topic through the replicated path; ``replicated`` is the
    wait for the high watermark to pass them."""

    def __init__(self, replica_manager: ReplicaManager, topic: str, timeout_ms: int) -> None:
        self.rm = replica_manager
        self.topic = topic
        self.timeout_ms = timeout_ms
        self.pending: dict[int, int] = {}  # partition -> offset after its last batch

    def append(self, partition: int, batch: bytes) -> int:
        tp = TopicPartition(self.topic, partition)
        try:
            info = self.rm.append(tp, batch, required_acks=-1, origin=AppendOrigin.COORDINATOR)
        except ApiError as exc:
            raise CoordinatorWriteError(coordinator_error(exc.code), str(exc)) from exc
        except Exception as exc:  # storage errors: the coordinator is unavailable
            raise CoordinatorWriteError(ErrorCode.NOT_COORDINATOR, str(exc)) from exc
        self.pending[partition] = max(self.pending.get(partition, 0), info.last_offset + 1)
        return int(info.first_offset)

    async def replicated(self, partition: int) -> ErrorCode:
        """NONE once the ISR has every batch appended to ``partition`` so far, else the
        coordinator's error (NOT_COORDINATOR when leadership moved meanwhile)."""
        required = self.pending.get(partition)
        if required is None:
            return ErrorCode.NONE
        tp = TopicPartition(self.topic, partition)
        result = await self.rm.wait_replicated({tp: required}, self.timeout_ms)
        error = result.get(tp, ErrorCode.NONE)
        if error == ErrorCode.NONE and self.pending.get(partition) == required:
            del self.pending[partition]
        return coordinator_error(error)
