"""The broker: its listeners, the handler registry, the replica manager, the purgatories and
the coordinators on one asyncio loop (uvloop when installed, chosen by the caller).

Every subsystem is a typed field. Those that need the logs (dynamic configs, the log dir
mover, client quotas, the group and transaction coordinators) are built in ``start`` after
the replica manager starts, and ``stop`` tears them down in reverse.

The parts a broker runs only when configured are imported when they start: the ZooKeeper
cluster member (``zookeeper.connect``: kazoo, the controller, replication) and tiered
storage (``remote.log.storage.system.enable``), so a one-broker start does not load them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from tidelog.config.broker_config import BrokerConfig
from tidelog.config.log_config import LogConfig
from tidelog.config.remote_log_config import RemoteLogManagerConfig
from tidelog.metrics import RequestMetrics
from tidelog.metrics.loop_lag import LAG_IDLE_INTERVAL_S, LagProbe
from tidelog.server.coordinator.group.coordinator import GroupCoordinator
from tidelog.server.coordinator.group.share.wiring import (
    start_share_coordinator,
    stop_share_coordinator,
)
from tidelog.server.coordinator.group.wiring import start_group_coordinator, stop_group_coordinator
from tidelog.server.coordinator.transaction.coordinator import TransactionCoordinator
from tidelog.server.coordinator.transaction.wiring import (
    start_txn_coordinator,
    stop_txn_coordinator,
)
from tidelog.storage.errors import RecordValidationError
from tidelog.util.clock import SYSTEM_CLOCK, Clock
from tidelog.util.topic_partition import TopicPartition

from .connection import KafkaConnection
from .coordinator.runtime import CoordinatorRuntime
from .dynamic_config import DynamicBrokerConfig
from .fetch_session import FetchSessionCache
from .handler_discovery import discover
from .log_dir_moves import LogDirMover
from .metadata.admin import AdminManager, LocalAdminManager
from .metadata.cache import MetadataCache
from .metadata.image import BrokerInfo
from .quota.manager import ClientQuotaManager
from .quota.wiring import new_quota_manager
from .registry import Registry
from .replica_manager import ReplicaManager
from .security.authorizer import StandardAuthorizer
from .security.credentials import CredentialStore
from .security.session import ListenerSecurity
from .security.wiring import credential_store, listener_securities, make_authorizer
from .socket_buffers import set_socket_buffers

if TYPE_CHECKING:
    from .cluster_node import ClusterNode
    from .log_dir_events import LogDirFailureNotifier
    from .metadata.peer_metadata import PeerMetadata
    from .remote_log_manager import RemoteLogManager
    from .replication.wiring import Replication
    from .zk.data import EndPoint
    from .zk.metadata_store import ZkAdminManager, ZkMetadataStore

log = logging.getLogger(__name__)
RecordValidator = Callable[[str, Mapping[str, str], bytes], RecordValidationError | None]


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
        # the metadata image handlers read; in one-broker mode the replica manager publishes
        # it from the local store, and topic admin is local
        self.metadata_cache = MetadataCache()
        # a member of a ZooKeeper cluster when zookeeper.connect is set: registration, the
        # controller, controlled shutdown, topics in ZooKeeper (None: a one-broker cluster)
        self.cluster: ClusterNode | None = None
        self.peer_metadata: PeerMetadata | None = None  # CreateTopics waits for the others
        store = self._cluster_member(config)
        self.replica_manager = ReplicaManager(config, clock, metadata_cache=self.metadata_cache,
                                              store=store)  # fmt: skip
        self.admin_manager: AdminManager = (
            LocalAdminManager(self.replica_manager) if store is None
            else self._zk_admin_manager(store)
        )  # fmt: skip
        self.purgatory = self.replica_manager.delayed_fetch
        self.fetch_sessions = FetchSessionCache(
            int(config.values["max.incremental.fetch.session.cache.slots"]), clock
        )
        # With every log dir offline the broker cannot serve anything: it shuts down (Kafka
        # halts). ``fatal_listeners`` run on the loop (``tidelog serve`` stops the process);
        # without any, the broker stops itself.
        self.fatal_error: str | None = None
        self.fatal_listeners: list[Callable[[], object]] = []
        # Produce-time checks of a topic's records plugged in beside the broker (the schema
        # registry's validated topics): (topic, topic config overrides, batch bytes) -> the
        # error to answer with, or None. Run on the loop before the append.
        self.record_validators: list[RecordValidator] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fault_stop: asyncio.Future[None] | None = None
        self.replica_manager.add_all_dirs_offline_listener(self._on_all_dirs_offline)
        # Kafka's RequestMetrics, recorded by the connections and read by /metrics
        self.request_metrics: RequestMetrics | None = RequestMetrics()
        self.connections: set[KafkaConnection] = set()
        # security: each listener's TLS/SASL settings, SCRAM credentials, the authorizer
        self.listener_security: dict[str, ListenerSecurity] = listener_securities(config)
        self.credentials: CredentialStore = credential_store(config)
        self.authorizer: StandardAuthorizer | None = make_authorizer(config)
        if self.cluster is not None:
            self._zk_security(self.cluster)
        self._init_unstarted()

    def _cluster_member(self, config: BrokerConfig) -> ZkMetadataStore | None:
        """With zookeeper.connect: this broker's ClusterNode and the topics' ZooKeeper store."""
        if config.zookeeper_connect is None:
            return None
        from .cluster_node import ClusterNode
        from .zk.metadata_store import ZkMetadataStore

        self.cluster = ClusterNode(config, self._cluster_endpoints)
        return ZkMetadataStore(self.cluster.zk, config.log_dirs, config.node_id,
                               self.cluster.config_changes)  # fmt: skip

    def _init_unstarted(self) -> None:
        """The parts start() builds or binds: listeners, coordinators, replication, tiering."""
        # the listeners: the first one's server and port, then every listener's by name
        self._server: asyncio.base_events.Server | None = None
        self.bound_port = 0
        self.bound_ports: dict[str, int] = {}
        self.other_servers: list[asyncio.base_events.Server] = []
        self._idle_handle: asyncio.TimerHandle | None = None
        self._loop_lag: LagProbe | None = None  # tidelog_eventloop_lag_ms
        # built by start() once the logs are open, None before and after
        self.dynamic_config: DynamicBrokerConfig | None = None
        self.log_dir_mover: LogDirMover | None = None
        self.client_quotas: ClientQuotaManager | None = None
        # the group, share and transaction coordinators' shards, by internal topic
        self.coordinator_runtime = CoordinatorRuntime()
        self.group_coordinator: GroupCoordinator | None = None
        self._group_load: asyncio.Task[None] | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self._txn_tasks: list[asyncio.Task[None]] = []
        # a cluster member's follower fetchers, AlterPartition sender, isr-expiration task
        self.replication: Replication | None = None
        self.log_dir_notifier: LogDirFailureNotifier | None = None
        # tiered storage (remote.log.storage.system.enable): copies, expiry, remote reads
        self.remote_log_manager: RemoteLogManager | None = None

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def listening(self) -> bool:
        """The Kafka listener is bound (set by ``start``, cleared by ``stop``)."""
        return self._server is not None

    @property
    def advertised_host(self) -> str:
        return self.config.advertised_listener.host

    @property
    def advertised_port(self) -> int:
        """The advertised port; a listener bound to port 0 advertises the real port."""
        port = self.config.advertised_listener.port
        return port or self.bound_port

    def endpoint(self, listener_name: str) -> tuple[str, int]:
        """The advertised host and port of a listener (the one a request came in on): Kafka
        answers Metadata/FindCoordinator with the endpoints of the client's own listener."""
        adv = self.config.advertised.get(listener_name)
        if adv is None or listener_name == self.config.listener.name:
            return self.advertised_host, self.advertised_port
        return adv.host, adv.port or self.bound_ports.get(listener_name, 0)

    def _zk_security(self, cluster: ClusterNode) -> None:
        """SCRAM users live in ZooKeeper: any broker authenticates them; so do the ACLs:
        made through any broker, enforced by all."""
        from .zk.acls import ZkAclAuthorizer
        from .zk.credentials import ZkCredentialStore

        self.credentials = ZkCredentialStore(cluster.zk, cluster.config_changes)
        if self.authorizer is not None:
            self.authorizer = ZkAclAuthorizer(cluster.zk, self.authorizer.super_users,
                                              self.authorizer.allow_if_no_acl)  # fmt: skip

    # -- start ----------------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.cluster is not None:
            await self._connect_cluster(self.cluster)
        try:
            self._start_logs()
            # tiered storage: its remote storage checked (endpoint, bucket, credentials)
            self.remote_log_manager = await self._start_remote_log_manager()
            # cluster services start here: after the logs and the metadata, before the
            # listeners accept
            await self._start_listeners()
        except BaseException:
            await self._stop_listeners()
            await self._stop_remote_log_manager()
            self._stop_logs()
            raise
        if self.cluster is not None:
            await self._join_cluster(self.cluster)
        self._schedule_idle_check()
        self._loop_lag = LagProbe(idle_interval_s=LAG_IDLE_INTERVAL_S)
        self._loop_lag.start(asyncio.get_running_loop())
        self._start_coordinators()
        log.info(
            "tidelog broker %d listening on %s:%d (cluster %s)",
            self.node_id,
            self.config.listener.host,
            self.bound_port,
            self.replica_manager.cluster_id,
        )

    async def _connect_cluster(self, cluster: ClusterNode) -> None:
        """Before the logs: the metadata store, the ACLs and the SCRAM users read ZooKeeper."""
        from .zk.acls import ZkAclAuthorizer
        from .zk.credentials import ZkCredentialStore

        await cluster.connect()
        if isinstance(self.authorizer, ZkAclAuthorizer):
            await asyncio.to_thread(self.authorizer.load)
        if isinstance(self.credentials, ZkCredentialStore):
            await asyncio.to_thread(self.credentials.load)
        self._rearm_after_session_expiry(cluster)

    async def _start_remote_log_manager(self) -> RemoteLogManager | None:
        """Tiered storage, when ``remote.log.storage.system.enable`` (None otherwise)."""
        config = RemoteLogManagerConfig.from_props(self.config.originals)
        if not config.remote_log_storage_system_enable:
            return None
        from .remote_log_wiring import start_remote_log_manager

        return await start_remote_log_manager(self)

    async def _join_cluster(self, cluster: ClusterNode) -> None:
        """The listeners are bound (their real ports are registered): join the cluster."""
        from .free_space_replication import FloorReplicationHold
        from .log_dir_events import LogDirFailureNotifier

        cluster.cluster_id = self.replica_manager.cluster_id
        self._start_replication(cluster)  # before registering: LeaderAndIsr follows
        if self.remote_log_manager is not None and self.replication is not None:
            from .remote_log_follower import tier_state_builder

            self.replication.fetcher_manager.tier_state = tier_state_builder(
                self.remote_log_manager, self.replica_manager)
        # a failed log dir is announced to the controller (/log_dir_event_notification)
        self.log_dir_notifier = LogDirFailureNotifier(
            self.node_id, cluster.zk, self.replica_manager, asyncio.get_running_loop())
        # so is a dir below log.dir.min.free.bytes: its replicas leave replication
        self.replica_manager.floor_hold = FloorReplicationHold(
            self.node_id, cluster.zk, self.replica_manager, asyncio.get_running_loop())
        await cluster.start()

    def _start_logs(self) -> None:
        """The logs and the metadata, then what reads them before the broker serves."""
        self.replica_manager.startup()
        if not self.replica_manager.one_broker:
            self.replica_manager.start_isr_expiration()
        # persisted dynamic broker configs apply before serving
        if self.cluster is not None:  # in ZooKeeper, with the quotas: altered anywhere, applied by all
            from .zk.config_sync import start_zk_configs

            self.dynamic_config, self.client_quotas = start_zk_configs(
                self.cluster.zk, self.cluster.config_changes, self.config, self.replica_manager.logs)
        else:
            self.dynamic_config = DynamicBrokerConfig(self.config, self.replica_manager.logs)
            # the quota file is read now: read on first use, a produce after its disk failed
            # would crash on the read instead of answering KAFKA_STORAGE_ERROR
            self.client_quotas = new_quota_manager(self.config)
        if self.cluster is not None:  # the controller follows unclean.leader.election.enable
            self.dynamic_config.listeners.append(self.cluster.on_broker_configs)
            self.cluster.on_broker_configs(self.config.values)
        self.log_dir_mover = LogDirMover(self.replica_manager)
        self.log_dir_mover.start()  # partition moves a restart interrupted go on

    async def _start_listeners(self) -> None:
        loop = asyncio.get_running_loop()
        for i, lst in enumerate(self.config.listeners):  # the first is config.listener
            sec = self.listener_security[lst.name]
            server = await loop.create_server(
                lambda sec=sec: KafkaConnection(self, sec),
                lst.host, lst.port, reuse_address=True, ssl=sec.ssl_context,
                start_serving=False,
            )
            set_socket_buffers(server, self.config.values)
            await server.start_serving()
            port = server.sockets[0].getsockname()[1]
            self.bound_ports[lst.name] = port
            if i == 0:
                self._server, self.bound_port = server, port
            else:
                self.other_servers.append(server)
                log.info("listener %s (%s) on %s:%d", lst.name, sec.protocol, lst.host, port)
        self.replica_manager.set_local_broker(self.broker_info())

    def broker_info(self) -> BrokerInfo:
        """This broker as the metadata image shows it: every listener's advertised address."""
        endpoints = {lst.name: self.endpoint(lst.name) for lst in self.config.listeners}
        return BrokerInfo(self.node_id, endpoints, self.config.values["broker.rack"])

    def _rearm_after_session_expiry(self, cluster: ClusterNode) -> None:
        """The topic mirror, SCRAM users and entity configs are read again by the handlers
        of ``cluster.config_changes`` (first in ``on_new_session``); the ACLs here."""
        from .zk.acls import ZkAclAuthorizer

        if isinstance(self.authorizer, ZkAclAuthorizer):
            cluster.on_new_session.append(self.authorizer.load)

    def _zk_admin_manager(self, store: ZkMetadataStore) -> ZkAdminManager:
        """Topic admin of a cluster member: any broker writes ZooKeeper, and answers once
        this broker's metadata shows the new partitions' leaders, and the others' too
        (within the request's timeout: metadata/peer_metadata.py)."""
        from .metadata.peer_metadata import PeerMetadata
        from .security.inter_broker import inter_broker_security
        from .zk.metadata_store import ZkAdminManager
        from .zk.topic_admin import ZkTopicAdmin

        assert self.cluster is not None
        v = self.config.values

        def leaders_ready(topic: str, partitions: Sequence[int]) -> bool:
            image = self.metadata_cache.image
            regs = [image.partition(TopicPartition(topic, p)) for p in partitions]
            return all(r is not None and r.leader >= 0 for r in regs)

        self.peer_metadata = PeerMetadata(self.node_id, self.metadata_cache,
                                          self.config.inter_broker_listener_name,
                                          inter_broker_security(self.config))  # fmt: skip
        admin = ZkTopicAdmin(self.cluster.zk, num_partitions=int(v["num.partitions"]),
                             default_replication_factor=int(v["default.replication.factor"]),
                             leaders_ready=leaders_ready,
                             peers_ready=self.peer_metadata.wait_for_leaders)  # fmt: skip
        # a topic's configs changed by any broker apply to the logs here
        store.listeners.append(self._on_topic_metadata)
        return ZkAdminManager(store, admin, auto_create=bool(v["auto.create.topics.enable"]),
                              internal_topics=frozenset(self.replica_manager.internal_topics),
                              validate_configs=self.replica_manager.validate_configs)  # fmt: skip

    def _on_topic_metadata(self, topic: str) -> None:
        """kazoo's thread: a topic's znodes changed; its configs go to the logs on the loop."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._apply_topic_configs, topic)

    def _apply_topic_configs(self, topic: str) -> None:
        info = self.replica_manager.store.topics.get(topic)
        if info is not None:
            try:
                self.replica_manager.logs.update_topic_config(topic, dict(info.configs))
            except Exception:
                log.exception("applying the configs of topic %s failed", topic)
        unclean = "" if info is None else str(info.configs.get("unclean.leader.election.enable"))
        if self.cluster is not None and unclean.lower() == "true":  # its offline ones elect
            self.cluster.controller.enable_topic_unclean_leader_election(topic)

    def _cluster_endpoints(self) -> tuple[EndPoint, ...]:
        from .zk.data import EndPoint

        return tuple(
            EndPoint(lst.name, *self.endpoint(lst.name), self.config.security_protocol(lst.name))
            for lst in self.config.listeners
        )

    def _start_coordinators(self) -> None:
        """Groups and transactions: each loads its internal topic in the background when it
        exists (a fresh broker creates the topic on the first FindCoordinator)."""
        self.group_coordinator, self._group_load = start_group_coordinator(
            self.config, self.clock, self.replica_manager, self.coordinator_runtime)
        start_share_coordinator(self)
        self.txn_coordinator, self._txn_tasks = start_txn_coordinator(self)
        if self.cluster is not None:  # coordinators follow the internal topics' leaders
            from .coordinator.leadership import elect_led_partitions
            from .handlers.consumer_group_heartbeat import group_configs_for

            elect_led_partitions(self)
            group_configs_for(self)  # followed in ZooKeeper from the start (a file moves in)

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

    def _start_replication(self, cluster: ClusterNode) -> None:
        from .replication.wiring import build_replication

        rm = self.replica_manager
        def log_config(tp: TopicPartition) -> LogConfig | None:
            p = rm.partitions.get(tp)
            return None if p is None else p.log.config

        def high_watermark_moved(tps: list[TopicPartition]) -> None:
            for tp in tps:  # consumers parked on this follower (KIP-392) read on
                rm.notify_append(tp)

        self.replication = build_replication(
            self.config, self.metadata_cache, rm.partitions.get, lambda: cluster.broker_epoch,
            cluster.security, log_config=log_config, on_high_watermark=high_watermark_moved,
        )  # fmt: skip
        rm.fetcher_manager = self.replication.fetcher_manager
        rm.set_alter_partition_sender(self.replication.alter_partition)
        self.replication.start()

    # -- stop (the reverse of start) -------------------------------------------------------------
    async def stop(self) -> None:
        # cluster services stop here first: controlled shutdown moves leadership away
        # before the listeners close
        if self.cluster is not None:
            await self.cluster.stop()  # leadership moves away while we still serve
        if self.replication is not None:
            await self.replication.stop()
            self.replication = None
        if self.log_dir_notifier is not None:
            self.log_dir_notifier.stop()
            self.log_dir_notifier = None
        if self.replica_manager.floor_hold is not None:
            self.replica_manager.floor_hold.stop()
        if self._idle_handle is not None:
            self._idle_handle.cancel()
            self._idle_handle = None
        if self._loop_lag is not None:
            self._loop_lag.cancel()
            self._loop_lag = None
        await self._stop_listeners()
        self._stop_coordinators()
        await self._stop_remote_log_manager()  # no copy may outlive the logs
        await self.admin_manager.drain()  # a create cut off by shutdown would publish after it
        if self.peer_metadata is not None:
            await self.peer_metadata.close()
        self._stop_logs()
        log.info("tidelog broker %d stopped", self.node_id)

    async def _stop_listeners(self) -> None:
        servers = self.other_servers
        if self._server is not None:
            servers = [self._server, *servers]
        for server in servers:
            server.close()
        for conn in list(self.connections):
            conn.close("broker shutting down")
        for server in servers:
            await server.wait_closed()
        self._server = None
        self.other_servers = []

    async def _stop_remote_log_manager(self) -> None:
        self.replica_manager.remote_fetch = None
        if self.remote_log_manager is not None:
            await self.remote_log_manager.stop()
            self.remote_log_manager = None

    def _stop_coordinators(self) -> None:
        if self.txn_coordinator is not None:
            stop_txn_coordinator(self.txn_coordinator, self._txn_tasks, self.coordinator_runtime)
            self.txn_coordinator, self._txn_tasks = None, []
        if self.group_coordinator is not None:
            stop_share_coordinator(self.group_coordinator.share, self.coordinator_runtime)
            stop_group_coordinator(self.group_coordinator, self._group_load,
                                   self.coordinator_runtime)
            self.group_coordinator = self._group_load = None
        self.coordinator_runtime.close()  # loads in flight

    def _stop_logs(self) -> None:
        """The log dir mover, then the logs (and their locks) themselves. The quota manager
        and the dynamic configs hold nothing to release."""
        if self.log_dir_mover is not None:  # an unfinished move resumes at the next start
            self.log_dir_mover.stop()
        try:
            self.replica_manager.shutdown()
        except Exception:
            log.exception("log shutdown failed (logs recover on the next start)")
