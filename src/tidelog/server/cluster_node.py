"""This broker's place in a ZooKeeper cluster (the cluster half of Kafka's KafkaServer).

``ClusterNode`` holds the ZooKeeper session and this broker's registration (zk/registration.py:
``/brokers/ids/<id>``, its czxid the broker epoch), runs this broker's controller (active
when it wins ``/controller``) and, on stop, asks the controller to move leadership away
(ControlledShutdown) before the session ends. Losing the session (expiry) stops the
controller at once; when a new session comes, the broker registers again with a new epoch
and stands for controller again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.client.conn import KafkaClientError, KafkaConnectionError
from tidelog.config.broker_config import BrokerConfig
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.inter_broker import CONTROLLED_SHUTDOWN_KEY
from tidelog.util.topic_partition import TopicPartition

from .controller.channel_manager import ControllerChannelManager
from .controller.controller import ControllerConfig, KafkaController
from .security.inter_broker import inter_broker_security
from .zk.change_notifications import ZkNodeChangeNotificationListener
from .zk.client import KafkaZkClient
from .zk.client_metrics_configs import ZkClientMetricsConfigStore
from .zk.data import BrokerRegistration, EndPoint
from .zk.registration import ZkBrokerRegistration

log = logging.getLogger(__name__)

def controller_config(config: BrokerConfig) -> ControllerConfig:
    v = config.values
    return ControllerConfig(
        unclean_leader_election_enable=bool(v["unclean.leader.election.enable"]),
        auto_leader_rebalance_enable=bool(v["auto.leader.rebalance.enable"]),
        leader_imbalance_check_interval_seconds=float(v["leader.imbalance.check.interval.seconds"]),
        leader_imbalance_per_broker_percentage=int(v["leader.imbalance.per.broker.percentage"]),
        delete_topic_enable=bool(v["delete.topic.enable"]),
    )


class ClusterNode:
    def __init__(
        self,
        config: BrokerConfig,
        endpoints: Callable[[], tuple[EndPoint, ...]],
    ) -> None:
        """``endpoints()`` gives the advertised listeners with their bound ports (known once
        the listeners are up)."""
        connect = config.zookeeper_connect
        if connect is None:
            raise ValueError("zookeeper.connect is not set")
        self.config = config
        self.broker_id = config.node_id
        self.endpoints = endpoints
        self.zk = KafkaZkClient(
            connect,
            session_timeout_ms=int(config.values["zookeeper.session.timeout.ms"]),
            connection_timeout_ms=config.zookeeper_connection_timeout_ms,
        )
        self.security = inter_broker_security(config)
        self.controller = KafkaController(
            self.broker_id, self.zk, self._channel, controller_config(config)
        )
        self.registrar = ZkBrokerRegistration(self.zk, self.broker_id, self.registration)
        # the one watch of /config/changes: topics, users, brokers, quotas, client metrics
        self.config_changes = ZkNodeChangeNotificationListener(self.zk)
        self.on_new_session.append(self.config_changes.load)
        self.cluster_id = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping = False

    @property
    def broker_epoch(self) -> int:
        return self.registrar.broker_epoch

    @property
    def on_new_session(self) -> list[Callable[[], object]]:
        """Run (off the loop) once a new session replaces an expired one."""
        return self.registrar.on_new_session

    def client_metrics_configs(self, now_ms: int) -> ZkClientMetricsConfigStore:
        """The client metrics subscriptions of the cluster, read and followed from ZooKeeper
        (again with every new session)."""
        store = ZkClientMetricsConfigStore(self.zk)
        store.watch(self.config_changes, now_ms)
        return store

    def on_broker_configs(self, values: Mapping[str, Any]) -> None:
        """The broker's configs changed dynamically: a default unclean.leader.election.enable
        turned on elects the offline partitions it concerns (Kafka's DynamicLogConfig)."""
        enabled = bool(values["unclean.leader.election.enable"])
        if enabled != self.controller.config.unclean_leader_election_enable:
            self.controller.set_default_unclean_leader_election(enabled)

    def _channel(self) -> ControllerChannelManager:
        return ControllerChannelManager(
            self.broker_id, self.config.inter_broker_listener_name, security=self.security,
            timeout_s=int(self.config.values["controller.socket.timeout.ms"]) / 1000,
        )  # fmt: skip

    # --- start ----------------------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the session (before the logs: the metadata store reads ZooKeeper, and agrees
        on the cluster id with ``/cluster/id``)."""
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.zk.start)

    async def start(self) -> None:
        """Register (the listeners are bound) and stand for controller."""
        await self.registrar.register()
        self.registrar.watch_session(self._active, self.controller.session_lost,
                                     self._on_new_session)  # fmt: skip
        await self.controller.startup()

    def registration(self) -> BrokerRegistration:
        return BrokerRegistration(self.broker_id, self.endpoints(), rack=self.config.broker_rack)

    def _active(self) -> bool:
        loop = self._loop
        return loop is not None and not loop.is_closed() and not self._stopping

    def _on_new_session(self) -> None:
        """kazoo's thread: a new session after an expiry registers again, on the loop."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._spawn, self._reregister())

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reregister(self) -> None:
        try:
            await self.registrar.register_again()
        except Exception:
            log.exception("broker %d: registering again after session loss failed", self.broker_id)
            return
        self.controller.session_reestablished()

    # --- stop -----------------------------------------------------------------------------------

    async def controlled_shutdown(self) -> bool:
        """Kafka's KafkaServer.controlledShutdown: ask the controller to move leadership
        off this broker until it leads no replicated partition (retried)."""
        retries = int(self.config.values["controlled.shutdown.max.retries"])
        backoff = int(self.config.values["controlled.shutdown.retry.backoff.ms"]) / 1000
        for attempt in range(retries + 1):
            if not self.zk.connected:
                # ZooKeeper is unreachable: nobody can act on the request (its calls would
                # wait for a connection that may never come)
                log.warning("broker %d: no ZooKeeper connection, no controlled shutdown", self.broker_id)
                return False
            try:
                error, remaining = await self._ask_controller()
            except (KafkaConnectionError, KafkaClientError, OSError) as e:
                log.info("broker %d: controlled shutdown attempt %d: %s", self.broker_id,
                         attempt + 1, e)
            else:
                if error == ErrorCode.NONE and not remaining:
                    log.info("broker %d: controlled shutdown succeeded", self.broker_id)
                    return True
                left = f", still leading {summarise_partitions(remaining)}" if remaining else ""
                log.info("broker %d: controlled shutdown attempt %d: %s%s", self.broker_id,
                         attempt + 1, ErrorCode(error).name, left)
            if attempt < retries:
                await asyncio.sleep(backoff)
        return False

    async def _ask_controller(self) -> tuple[int, list[TopicPartition]]:
        controller_id = await asyncio.to_thread(self.zk.get_controller_id)
        if controller_id is None:
            return int(ErrorCode.NOT_CONTROLLER), []
        if controller_id == self.broker_id and self.controller.is_active:
            return await self.controller.controlled_shutdown(self.broker_id, self.broker_epoch)
        reg = await asyncio.to_thread(self.zk.get_broker, controller_id)
        if reg is None:
            return int(ErrorCode.BROKER_NOT_AVAILABLE), []
        ep = reg.endpoint(self.config.inter_broker_listener_name) or reg.endpoints[0]
        conn = await AsyncBrokerConnection.connect(
            ep.host, ep.port, client_id=f"broker-{self.broker_id}", security=self.security,
            timeout_s=int(self.config.values["controller.socket.timeout.ms"]) / 1000,
        )  # fmt: skip
        try:
            body = {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch}
            response = await conn.request(CONTROLLED_SHUTDOWN_KEY, body)
        finally:
            await conn.close()
        remaining = [TopicPartition(p.topic_name, int(p.partition_index))
                     for p in response.remaining_partitions]  # fmt: skip
        return int(response.error_code), remaining

    async def stop(self) -> None:
        if self.config.values["controlled.shutdown.enable"] and self.broker_epoch >= 0:
            try:
                await self.controlled_shutdown()
            except Exception:
                log.exception("broker %d: controlled shutdown failed", self.broker_id)
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        await self.controller.shutdown()
        await asyncio.to_thread(self.zk.close)


def summarise_partitions(tps: list[TopicPartition], shown: int = 3) -> str:
    """``53 partitions (orders-0, orders-1, orders-2, ...)``: a count and the first few, for
    a log line that a broker leading thousands of partitions must keep readable."""
    names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in tps[:shown])
    more = ", ..." if len(tps) > shown else ""
    return f"{len(tps)} partition{'s' if len(tps) != 1 else ''} ({names}{more})"
