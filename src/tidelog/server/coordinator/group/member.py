"""One member of a classic group (Kafka's MemberMetadata), and the JoinGroup and SyncGroup
requests and answers it takes part in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidelog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from tidelog.util.scheduler import ScheduledTask


UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int = -1  # v0: equals the session timeout
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    require_known_member_id: bool = False  # JoinGroup v4+
    reason: str | None = None


@dataclass
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None  # v5+
    protocol_name: str | None = None  # v5+
    assignments: dict[str, bytes] = field(default_factory=dict)


@dataclass(slots=True)
class JoinMember:
    """One entry of the member list the leader receives in its JoinGroup response."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = ""
    members: list[JoinMember] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


JoinCallback = Callable[[JoinResult], None]
SyncCallback = Callable[[SyncResult], None]
Protocols = Sequence[tuple[str, bytes]]


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: JoinCallback | None = None
    awaiting_sync: SyncCallback | None = None
    is_new: bool = False
    heartbeat_satisfied: bool = False
    heartbeat_task: ScheduledTask | None = None
    expiry_at_ms: int = 0  # when heartbeat_task fires
    last_heartbeat_ms: int = 0

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocols(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the candidates (its list is ordered)."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols with the same metadata, in the same order (Kafka's matches)."""
        return list(self.supported_protocols) == [(n, bytes(m)) for n, m in protocols]

    def complete_join(self, result: JoinResult) -> bool:
        cb, self.awaiting_join = self.awaiting_join, None
        if cb is None:
            return False
        self.is_new = False
        cb(result)
        return True

    def complete_sync(self, result: SyncResult) -> bool:
        cb, self.awaiting_sync = self.awaiting_sync, None
        if cb is None:
            return False
        cb(result)
        return True

    def cancel_heartbeat(self) -> None:
        if self.heartbeat_task is not None:
            self.heartbeat_task.cancel()
            self.heartbeat_task = None
