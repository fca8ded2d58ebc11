"""What the coordinators use of the broker that hosts them (the broker, or a test's stand-in)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .runtime import CoordinatorRuntime

if TYPE_CHECKING:
    from tidelog.config.broker_config import BrokerConfig
    from tidelog.server.coordinator.group.coordinator import GroupCoordinator
    from tidelog.server.replica_manager import ReplicaManager
    from tidelog.util.clock import Clock


class CoordinatorHost(Protocol):
    @property
    def config(self) -> BrokerConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def replica_manager(self) -> ReplicaManager: ...

    @property
    def coordinator_runtime(self) -> CoordinatorRuntime: ...

    @property
    def group_coordinator(self) -> GroupCoordinator | None: ...
