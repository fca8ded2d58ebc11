"""Helpers for controller tests: a channel that records what the controller sends, brokers
that are only ZooKeeper registrations, and polling with a deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tidelog.server.controller.context import (
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrRequestData,
    ResponseCallback,
    StopReplicaRequestData,
    UpdateMetadataRequestData,
)
from tidelog.server.zk import data as z
from tidelog.server.zk.client import KafkaZkClient
from tidelog.util.topic_partition import TopicPartition


class RecordingChannel:
    """Records every request; answers StopReplica with no error for each partition, except
    to brokers in ``unreachable``."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, ControllerRequest]] = []
        self.brokers: set[int] = set()
        self.closed = False

    def add_broker(self, broker: z.BrokerRegistration) -> None:
        self.brokers.add(broker.broker_id)

    def remove_broker(self, broker_id: int) -> None:
        self.brokers.discard(broker_id)

    def send(self, broker_id: int, request: ControllerRequest, callback: ResponseCallback | None = None) -> None:
        assert broker_id in self.brokers, f"sent to unknown broker {broker_id}"
        self.sent.append((broker_id, request))
        if callback is not None and isinstance(request, StopReplicaRequestData):
            response = ControllerResponse(0, {tp: 0 for tp in request.partitions})
            asyncio.get_running_loop().call_soon(callback, broker_id, response)

    async def close(self) -> None:
        self.closed = True

    def leader_and_isr(self, broker_id: int | None = None) -> list[tuple[int, LeaderAndIsrRequestData]]:
        return [(b, r) for b, r in self.sent if isinstance(r, LeaderAndIsrRequestData)
                and (broker_id is None or b == broker_id)]  # fmt: skip

    def update_metadata(self) -> list[tuple[int, UpdateMetadataRequestData]]:
        return [(b, r) for b, r in self.sent if isinstance(r, UpdateMetadataRequestData)]

    def stop_replica(self) -> list[tuple[int, StopReplicaRequestData]]:
        return [(b, r) for b, r in self.sent if isinstance(r, StopReplicaRequestData)]

    def last_state_sent(self, broker_id: int, tp: TopicPartition) -> z.LeaderIsrAndControllerEpoch | None:
        found = None
        for _, r in self.leader_and_isr(broker_id):
            for p in r.partitions:
                if p.tp == tp:
                    found = p.state
        return found


def register(connect: str, broker_id: int, rack: str | None = None) -> KafkaZkClient:
    """A broker as ZooKeeper sees it: a session holding ``/brokers/ids/<id>``."""
    c = KafkaZkClient(connect, session_timeout_ms=6000)
    c.start()
    ep = z.EndPoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id, "PLAINTEXT")
    c.register_broker(z.BrokerRegistration(broker_id, (ep,), rack=rack))
    return c


async def until(cond: Callable[[], object], timeout: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)
