"""What the controller's helpers (broker requests, topic deletion, log dir events,
reassignment) use of the KafkaController: they sit below it and type against this Protocol,
so that no helper imports the controller module that builds them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tidelog.util.topic_partition import TopicPartition

from .context import ControllerChannel, ControllerContext, RequestBatch
from .partitions import PartitionStateMachine

if TYPE_CHECKING:  # a type only: the AlterPartition handler reaches here without kazoo
    from tidelog.server.zk.client import KafkaZkClient

T = TypeVar("T")
Event = Callable[[], Awaitable[None]]


class ControllerSettings(Protocol):
    @property
    def delete_topic_enable(self) -> bool: ...


class IsrChangeListener(Protocol):
    async def on_isr_change(self, partitions: Iterable[TopicPartition]) -> None: ...


class ControllerHost(Protocol):
    @property
    def broker_id(self) -> int: ...
    @property
    def zk(self) -> KafkaZkClient: ...
    @property
    def config(self) -> ControllerSettings: ...
    @property
    def context(self) -> ControllerContext: ...
    @property
    def channel(self) -> ControllerChannel | None: ...
    @property
    def partitions(self) -> PartitionStateMachine: ...
    @property
    def reassignment(self) -> IsrChangeListener: ...
    @property
    def is_active(self) -> bool: ...

    def put(self, event: Event) -> None: ...

    def watch(self, event: Event, key: object = None) -> Callable[[Any], None]: ...

    async def call(self, fn: Callable[..., T], *args: Any) -> T: ...

    def batch(self) -> RequestBatch: ...

    def send(self, batch: RequestBatch) -> None: ...

    async def refresh_topic_configs(self, topics: Iterable[str]) -> None: ...

    def unclean_enabled(self, topic: str) -> bool: ...

    async def topic_deletion(self) -> None: ...


__all__ = ["ControllerHost", "ControllerSettings", "Event", "IsrChangeListener"]
