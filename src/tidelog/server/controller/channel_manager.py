"""The controller's connections to brokers (Kafka's ControllerChannelManager).

One ordered queue and one sender task per live broker, over ``tidelog.client.aio`` to the
broker's inter-broker listener with its security. A request is retried (after
``backoff_s``) until it is answered or the broker is removed, as Kafka's RequestSendThread
does; the answer goes to the request's callback as a ``ControllerResponse``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.client.conn import KafkaClientError, KafkaConnectionError
from tidelog.client.security import ClientSecurity
from tidelog.protocol.inter_broker import LEADER_AND_ISR_KEY, STOP_REPLICA_KEY, UPDATE_METADATA_KEY
from tidelog.server.zk.data import BrokerRegistration
from tidelog.util.topic_partition import TopicPartition

from .context import (
    ControllerRequest,
    ControllerResponse,
    LeaderAndIsrRequestData,
    PartitionStateInfo,
    ResponseCallback,
    StopReplicaRequestData,
    UpdateMetadataRequestData,
)

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 2.0
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def _by_topic(parts: tuple[PartitionStateInfo, ...]) -> dict[str, list[PartitionStateInfo]]:
    out: dict[str, list[PartitionStateInfo]] = {}
    for p in parts:
        out.setdefault(p.tp.topic, []).append(p)
    return out


def leader_and_isr_body(r: LeaderAndIsrRequestData) -> dict[str, Any]:
    topics = [
        {"topic_name": t, "topic_id": ps[0].topic_id, "partition_states": [
            {"partition_index": p.tp.partition, "controller_epoch": p.state.controller_epoch,
             "leader": p.state.leader, "leader_epoch": p.state.leader_epoch, "isr": p.state.isr,
             "partition_epoch": p.state.zk_version, "replicas": p.replicas,
             "adding_replicas": p.adding_replicas, "removing_replicas": p.removing_replicas,
             "is_new": p.is_new, "leader_recovery_state": p.state.leader_recovery_state}
            for p in ps]}
        for t, ps in _by_topic(r.partitions).items()
    ]  # fmt: skip
    leaders = []
    for b in r.live_leaders:
        ep = b.endpoints[0]
        leaders.append({"broker_id": b.broker_id, "host_name": ep.host, "port": ep.port})
    return {"controller_id": r.controller_id, "controller_epoch": r.controller_epoch,
            "broker_epoch": r.broker_epoch, "type_": 0, "topic_states": topics,
            "live_leaders": leaders}  # fmt: skip


def update_metadata_body(r: UpdateMetadataRequestData) -> dict[str, Any]:
    topics = [
        {"topic_name": t, "topic_id": ps[0].topic_id, "partition_states": [
            {"partition_index": p.tp.partition, "controller_epoch": p.state.controller_epoch,
             "leader": p.state.leader, "leader_epoch": p.state.leader_epoch, "isr": p.state.isr,
             "zk_version": p.state.zk_version, "replicas": p.replicas,
             "offline_replicas": p.offline_replicas}
            for p in ps]}
        for t, ps in _by_topic(r.partitions).items()
    ]  # fmt: skip
    brokers = [
        {"id_": b.broker_id, "rack": b.rack, "endpoints": [
            {"port": e.port, "host": e.host, "listener": e.listener_name,
             "security_protocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0)}
            for e in b.endpoints]}
        for b in r.live_brokers
    ]  # fmt: skip
    return {"controller_id": r.controller_id, "controller_epoch": r.controller_epoch,
            "broker_epoch": r.broker_epoch, "topic_states": topics, "live_brokers": brokers}  # fmt: skip


def stop_replica_body(r: StopReplicaRequestData) -> dict[str, Any]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, (epoch, delete) in r.partitions.items():
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "leader_epoch": epoch, "delete_partition": delete}
        )
    topics = [{"topic_name": t, "partition_states": ps} for t, ps in by_topic.items()]
    return {"controller_id": r.controller_id, "controller_epoch": r.controller_epoch,
            "broker_epoch": r.broker_epoch, "topic_states": topics}  # fmt: skip


def encode(request: ControllerRequest) -> tuple[int, dict[str, Any]]:
    if isinstance(request, LeaderAndIsrRequestData):
        return LEADER_AND_ISR_KEY, leader_and_isr_body(request)
    if isinstance(request, UpdateMetadataRequestData):
        return UPDATE_METADATA_KEY, update_metadata_body(request)
    return STOP_REPLICA_KEY, stop_replica_body(request)


def decode(request: ControllerRequest, response: Any) -> ControllerResponse:
    errors: dict[TopicPartition, int] = {}
    if isinstance(request, StopReplicaRequestData):
        for e in response.partition_errors:
            errors[TopicPartition(e.topic_name, int(e.partition_index))] = int(e.error_code)
    elif isinstance(request, LeaderAndIsrRequestData):
        names = {p.topic_id: p.tp.topic for p in request.partitions}
        for t in response.topics:
            for e in t.partition_errors:
                errors[TopicPartition(names.get(t.topic_id, ""), int(e.partition_index))] = int(e.error_code)
    return ControllerResponse(int(response.error_code), errors)


class _BrokerQueue:
    def __init__(self, owner: ControllerChannelManager, broker: BrokerRegistration) -> None:
        self.owner = owner
        self.broker = broker
        self.queue: asyncio.Queue[tuple[ControllerRequest, ResponseCallback | None]] = asyncio.Queue()
        self.conn: AsyncBrokerConnection | None = None
        self.task = asyncio.create_task(self._run(), name=f"controller-to-broker-{broker.broker_id}")

    async def _connection(self) -> AsyncBrokerConnection:
        if self.conn is None or self.conn.closed:
            ep = self.broker.endpoint(self.owner.listener_name) or self.broker.endpoints[0]
            self.conn = await AsyncBrokerConnection.connect(
                ep.host, ep.port, client_id=f"controller-{self.owner.controller_id}",
                timeout_s=self.owner.timeout_s, security=self.owner.security,
            )  # fmt: skip
        return self.conn

    async def _run(self) -> None:
        while True:
            request, callback = await self.queue.get()
            key, body = encode(request)
            backoff = self.owner.backoff_s
            while True:
                try:
                    conn = await self._connection()
                    response = await conn.request(key, body)
                    break
                except (KafkaConnectionError, KafkaClientError, OSError) as e:
                    # the first failure of a request is worth a line; its retries are not
                    level = logging.INFO if backoff == self.owner.backoff_s else logging.DEBUG
                    log.log(level, "controller request to broker %d failed (%r); retrying",
                            self.broker.broker_id, e)  # fmt: skip
                    if self.conn is not None:
                        await self.conn.close()
                        self.conn = None
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF_S)
            if callback is not None:
                try:
                    callback(self.broker.broker_id, decode(request, response))
                except Exception:
                    log.exception("controller response callback failed")

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        if self.conn is not None:
            await self.conn.close()


class ControllerChannelManager:
    def __init__(
        self,
        controller_id: int,
        listener_name: str,
        *,
        security: ClientSecurity | None = None,
        timeout_s: float = 30.0,
        backoff_s: float = 0.1,
    ) -> None:
        self.controller_id = controller_id
        self.listener_name = listener_name
        self.security = security
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self.brokers: dict[int, _BrokerQueue] = {}

    def add_broker(self, broker: BrokerRegistration) -> None:
        old = self.brokers.pop(broker.broker_id, None)
        if old is not None:
            asyncio.get_running_loop().create_task(old.close())
        self.brokers[broker.broker_id] = _BrokerQueue(self, broker)

    def remove_broker(self, broker_id: int) -> None:
        old = self.brokers.pop(broker_id, None)
        if old is not None:
            asyncio.get_running_loop().create_task(old.close())

    def send(
        self, broker_id: int, request: ControllerRequest, callback: ResponseCallback | None = None
    ) -> None:
        q = self.brokers.get(broker_id)
        if q is not None:
            q.queue.put_nowait((request, callback))

    async def close(self) -> None:
        queues, self.brokers = list(self.brokers.values()), {}
        await asyncio.gather(*(q.close() for q in queues), return_exceptions=True)

    def pending(self) -> Mapping[int, int]:
        return {b: q.queue.qsize() for b, q in self.brokers.items()}
