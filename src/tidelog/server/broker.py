"""The broker: one PLAINTEXT listener, the handler registry, the replica manager and the
fetch purgatory on one asyncio loop (uvloop when installed, chosen by the caller)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tidelog.config.broker_config import BrokerConfig
from tidelog.metrics import RequestMetrics
from tidelog.util.clock import SYSTEM_CLOCK, Clock

from .fetch_session import FetchSessionCache
from .purgatory import FetchPurgatory
from .registry import Registry, discover
from .replica_manager import ReplicaManager
from .security.wiring import setup_security, start_other_listeners, stop_other_listeners

if TYPE_CHECKING:
    from .connection import KafkaConnection

log = logging.getLogger(__name__)


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        clock: Clock = SYSTEM_CLOCK,
        registry: Registry | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.registry = registry if registry is not None else discover()
        self.replica_manager = ReplicaManager(config, clock)
        self.purgatory = FetchPurgatory()
        self.fetch_sessions = FetchSessionCache(
            int(config.values["max.incremental.fetch.session.cache.slots"])
        )
        self.replica_manager.add_append_listener(self.purgatory.check_and_complete)
        # With every log dir offline the broker cannot serve anything: it shuts down (Kafka
        # halts). ``fatal_listeners`` run on the loop (``tidelog serve`` stops the process);
        # without any, the broker stops itself.
        self.fatal_error: str | None = None
        self.fatal_listeners: list[Callable[[], object]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.replica_manager.add_all_dirs_offline_listener(self._on_all_dirs_offline)
        # Kafka's RequestMetrics, recorded by the connections and read by /metrics
        self.request_metrics: RequestMetrics | None = RequestMetrics()
        self.connections: set[KafkaConnection] = set()
        self._server: asyncio.base_events.Server | None = None
        self.bound_port = 0
        # listeners, SCRAM credentials and the authorizer (server/security/wiring.py)
        self.listener_security: dict[str, Any] = {}
        self.credentials: Any = None
        self.authorizer: Any = None
        self.bound_ports: dict[str, int] = {}
        self.other_servers: list[Any] = []
        setup_security(self)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def advertised_host(self) -> str:
        return self.config.advertised_listener.host

    @property
    def advertised_port(self) -> int:
        """The advertised port; a listener bound to port 0 advertises the real port."""
        port = self.config.advertised_listener.port
        return port or self.bound_port

    async def start(self) -> None:
        from .connection import KafkaConnection

        listener = self.config.listener
        loop = asyncio.get_running_loop()
        self._loop = loop
        try:
            self.replica_manager.startup()
            from .dynamic_config import dynamic_config

            dynamic_config(self)  # persisted dynamic broker configs apply before serving
            from .log_dir_moves import log_dir_mover

            log_dir_mover(self)  # partition moves a restart interrupted go on
            from .quota.wiring import quota_manager

            # Read the quota file now: made on first use, a produce after its disk failed
            # would crash on the read instead of answering KAFKA_STORAGE_ERROR.
            quota_manager(self)
            security = self.listener_security[listener.name]
            self._server = await loop.create_server(
                lambda: KafkaConnection(self, security),
                listener.host,
                listener.port,
                reuse_address=True,
                ssl=security.ssl_context,
            )
            self.bound_port = self._server.sockets[0].getsockname()[1]
            await start_other_listeners(self)
        except BaseException:
            if self._server is not None:
                self._server.close()
                self._server = None
            await stop_other_listeners(self)
            self._release_logs()
            raise
        self._schedule_idle_check()
        self._start_group_coordinator()
        self._start_txn_coordinator()
        log.info(
            "tidelog broker %d listening on %s:%d (cluster %s)",
            self.node_id,
            listener.host,
            self.bound_port,
            self.replica_manager.cluster_id,
        )

    def _on_all_dirs_offline(self) -> None:
        """Called from whichever thread hit the last disk error."""
        self.fatal_error = "all log dirs have failed"
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(self._shut_down_after_fault)

    def _shut_down_after_fault(self) -> None:
        if self.fatal_listeners:
            for fn in self.fatal_listeners:
                fn()
        else:
            self._fault_stop = asyncio.ensure_future(self.stop())

    def _release_logs(self) -> None:
        """After a failed start: give the log dirs (and their locks) back."""
        try:
            self.replica_manager.shutdown()
        except Exception:
            log.debug("log shutdown after a failed start", exc_info=True)

    def _schedule_idle_check(self) -> None:
        """Close connections idle for ``connections.max.idle.ms`` (Kafka's Selector does)."""
        idle_ms = int(self.config.values["connections.max.idle.ms"])
        if idle_ms <= 0:
            return
        loop = asyncio.get_running_loop()
        period = min(idle_ms, 30_000) / 2000

        def check() -> None:
            if self._server is None:
                return
            now = loop.time()
            for conn in list(self.connections):
                if conn.idle and (now - conn.last_active) * 1000 >= idle_ms:
                    conn.close(f"idle for more than connections.max.idle.ms ({idle_ms})")
            self._idle_handle = loop.call_later(period, check)

        self._idle_handle = loop.call_later(period, check)

    def _start_group_coordinator(self) -> None:
        """Load committed offsets/groups at start when ``__consumer_offsets`` exists; a fresh
        broker creates it lazily on the first group request (keeps cold start fast)."""
        if self.replica_manager.topic("__consumer_offsets") is None:
            return
        try:
            from .group.wiring import start_group_coordinator
        except ImportError:
            return
        start_group_coordinator(self)

    def _start_txn_coordinator(self) -> None:
        """Load ``__transaction_state`` (and resume prepared transactions) at start when it
        exists; a fresh broker creates it on the first transactional FindCoordinator."""
        if self.replica_manager.topic("__transaction_state") is None:
            return
        from .txn.wiring import start_txn_coordinator

        start_txn_coordinator(self)

    async def stop(self) -> None:
        from .txn.wiring import stop_txn_coordinator

        stop_txn_coordinator(self)
        mover = getattr(self, "log_dir_mover", None)
        if mover is not None:  # an unfinished move resumes at the next start
            mover.stop()
        try:
            from .group.wiring import stop_group_coordinator

            stop_group_coordinator(self)
        except ImportError:
            pass
        handle = getattr(self, "_idle_handle", None)
        if handle is not None:
            handle.cancel()
        await stop_other_listeners(self)
        if self._server is not None:
            self._server.close()
            for conn in list(self.connections):
                conn.close("broker shutting down")
            await self._server.wait_closed()
            self._server = None
        from . import topic_admin

        await topic_admin.drain()  # a create cut off by shutdown would publish after it
        try:
            self.replica_manager.shutdown()
        except Exception:
            log.exception("log shutdown failed (logs recover on the next start)")
        log.info("tidelog broker %d stopped", self.node_id)
