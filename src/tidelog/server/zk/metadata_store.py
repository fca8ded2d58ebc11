"""The metadata store of a ZooKeeper cluster: topics, configs, the cluster id and producer-id
blocks in Kafka's znodes (``MetadataStore`` over ``KafkaZkClient``), and its
``ZkAdminManager`` (the ``AdminManager`` handlers call).

``topics`` mirrors ``/brokers/topics`` and ``/config/topics``: it is read whole by ``load``
and kept current by ZooKeeper watches (a topic created, grown or deleted by any broker or by
a tool) and by its ``topics`` handler of the ``/config/changes`` listener (a config change;
read whole again with a new session). The mirror is replaced whole
on kazoo's thread, so a reader on the event loop always sees one consistent map;
``listeners`` are told which topic changed (on kazoo's thread: hand it to your loop).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from kazoo.exceptions import ConnectionClosedError, ConnectionLoss

from tidelog.protocol.errors import ErrorCode
from tidelog.util.files import atomic_write

from ..errors import ApiError
from ..meta_properties import META_PROPERTIES, MetaPropertiesError, verify_meta_properties
from ..metadata.admin import DEFAULT_TIMEOUT_MS, NewTopic
from ..metadata.store import MetadataStoreError, TopicInfo, new_topic_id
from . import data as z
from .change_notifications import ConfigHandler, ZkNodeChangeNotificationListener
from .client import KafkaZkClient, TopicExistsError
from .topic_admin import ZkTopicAdmin

log = logging.getLogger(__name__)


def _quietly(fn: Callable[..., object], *args: object) -> None:
    """Run a watch's work on kazoo's thread: a session closing under it is expected, any
    other failure is logged (kazoo would print it and drop the watch)."""
    try:
        fn(*args)
    except (ConnectionClosedError, ConnectionLoss):
        log.debug("ZooKeeper watch while the session closes")
    except Exception:
        log.exception("reading topics from ZooKeeper failed")


def _usable(d: Path) -> bool:
    try:
        d.mkdir(parents=True, exist_ok=True)
        return True
    except OSError as exc:
        log.error("log dir %s cannot be used: %s", d, exc)
        return False


def _new_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ZkMetadataStore:
    def __init__(self, zk: KafkaZkClient, log_dirs: list[Path], node_id: int,
                 changes: ZkNodeChangeNotificationListener | None = None) -> None:  # fmt: skip
        """``changes``: the broker's ``/config/changes`` listener (its own when None)."""
        self.zk = zk
        self.log_dirs = log_dirs
        self.node_id = node_id
        self.cluster_id = ""
        self._topics: dict[str, TopicInfo] = {}
        self._lock = threading.Lock()
        self._watched: set[str] = set()
        self.listeners: list[Callable[[str], None]] = []
        self.changes = changes if changes is not None else ZkNodeChangeNotificationListener(zk)
        self.changes.add_handler(ConfigHandler("topics", self._topic_config_changed,
                                               self._refresh_topics))  # fmt: skip

    @property
    def topics(self) -> Mapping[str, TopicInfo]:
        return self._topics

    # --- load ----------------------------------------------------------------------------------

    def load(self) -> bool:
        """The cluster id from ``/cluster/id`` (this broker's proposal if it is the first),
        checked against the log dirs' ``meta.properties`` (Kafka refuses a dir of another
        cluster); then every topic."""
        # a dir that cannot be used is offline (the LogManager says why) and has no say
        self.log_dirs = [d for d in self.log_dirs if _usable(d)]
        try:
            stored = verify_meta_properties(self.log_dirs, self.node_id, "")
        except MetaPropertiesError as exc:
            raise MetadataStoreError(str(exc)) from None
        self.cluster_id = self.zk.get_or_create_cluster_id(stored or _new_cluster_id())
        if stored and stored != self.cluster_id:
            raise MetadataStoreError(
                f"The Cluster ID {self.cluster_id} doesn't match stored clusterId {stored} in "
                "meta.properties. The broker is trying to join the wrong cluster. Configured "
                "zookeeper.connect may be wrong."
            )
        self._write_meta_properties()
        self.changes.arm()
        self._refresh_topics()
        return True  # ZooKeeper knows every topic: a log no topic owns is a stray

    def _write_meta_properties(self) -> None:
        for d in self.log_dirs:
            p = d / META_PROPERTIES
            if not p.exists():
                text = (
                    f"#\n#{time.strftime('%a %b %d %H:%M:%S UTC %Y', time.gmtime())}\n"
                    f"cluster.id={self.cluster_id}\ndirectory.id={_new_cluster_id()}\n"
                    f"node.id={self.node_id}\nversion=1\n"
                )
                atomic_write(p, text.encode())

    # --- the mirror ------------------------------------------------------------------------------

    def _read_topic(self, name: str) -> TopicInfo | None:
        got = self.zk.get_topic_assignment(name, self._topic_watch(name))
        if got is None:
            return None
        a = got[0]
        if a.topic_id is None:
            return None  # written by a tool and not yet given an id by the controller
        assignment = {p: r.replicas for p, r in a.partitions.items()}
        configs = self.zk.get_entity_configs("topics", name)
        return TopicInfo(name, a.topic_id, len(assignment), configs, assignment)

    def _topic_watch(self, name: str) -> Callable[[Any], None]:
        return lambda _event: _quietly(self._refresh_one, name)

    def _refresh_topics(self, _event: Any = None) -> None:
        if _event is not None:  # a watch: kazoo's thread; the known topics have their own
            _quietly(self._refresh_topics_now, False)
        else:
            self._refresh_topics_now(True)

    def _refresh_topics_now(self, everything: bool) -> None:
        """The topic list changed: read the topics not in the mirror yet and drop the gone
        ones. A known topic's own watch (set by ``_read_topic``) and ``/config/changes``
        keep it current, so only a load (``everything``) reads them all again: re-reading
        every topic on each creation made the mirror trail a new topic by a read per topic."""
        names = self.zk.get_all_topics(self._refresh_topics)
        with self._lock:
            known = {} if everything else self._topics
            fresh = {n: known[n] for n in names if n in known}
            fresh.update((n, info) for n in names
                         if n not in known and (info := self._read_topic(n)) is not None)
            changed = set(fresh.keys()) ^ set(self._topics.keys())
            self._topics = fresh
        for name in sorted(changed):
            self._notify(name)

    def _refresh_one(self, name: str) -> None:
        with self._lock:
            info = self._read_topic(name)
            topics = dict(self._topics)
            if info is None:
                topics.pop(name, None)
            else:
                topics[name] = info
            self._topics = topics
        self._notify(name)

    def reread_topic(self, name: str) -> TopicInfo | None:
        """Read one topic from ZooKeeper into the mirror now and return it. The mirror
        follows ``/brokers/topics`` through a watch that re-reads every topic, so it can trail
        a topic created a moment ago."""
        self._refresh_one(name)
        return self._topics.get(name)

    def _topic_config_changed(self, name: str) -> None:
        """kazoo's thread: a topic's configs changed (``/config/changes``): re-read it."""
        if name in self._topics:
            self._refresh_one(name)

    def _notify(self, name: str) -> None:
        for fn in list(self.listeners):
            try:
                fn(name)
            except Exception:
                log.exception("topic listener failed")

    # --- writes ----------------------------------------------------------------------------------

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        return next((t for t in self._topics.values() if t.topic_id == topic_id), None)

    def create_topic(self, info: TopicInfo) -> None:
        assignment = {p: z.ReplicaAssignment(tuple(info.replicas(p, self.node_id)))
                      for p in range(info.partitions)}  # fmt: skip
        try:
            self.zk.create_topic(info.name, info.topic_id, assignment, dict(info.configs))
        except TopicExistsError:
            raise MetadataStoreError(f"Topic '{info.name}' already exists.") from None
        self._refresh_one(info.name)

    def delete_topic(self, name: str) -> None:
        """Ask the controller to delete it (``/admin/delete_topics/<t>``)."""
        self.zk.create_delete_topic_path(name)

    def update_topic(self, info: TopicInfo) -> None:
        got = self.zk.get_topic_assignment(info.name)
        if got is None:
            raise MetadataStoreError(f"The topic '{info.name}' does not exist.")
        current, version = got
        if info.partitions > len(current.partitions):
            merged = dict(current.partitions) | {
                p: z.ReplicaAssignment(tuple(info.replicas(p, self.node_id)))
                for p in range(len(current.partitions), info.partitions)
            }
            self.zk.set_topic_assignment(info.name, current.topic_id, merged, version)
        if dict(info.configs) != self.zk.get_entity_configs("topics", info.name):
            self.zk.set_or_create_entity_configs("topics", info.name, dict(info.configs))
        self._refresh_one(info.name)

    def claim_producer_id_block(self, size: int) -> int:
        return self.zk.allocate_producer_id_block(self.node_id, size).first_producer_id


class ZkAdminManager:
    """The AdminManager of a ZooKeeper cluster (Kafka's ZkAdminManager): any broker writes
    the znodes through ``ZkTopicAdmin`` and answers once the partitions have leaders."""

    def __init__(self, store: ZkMetadataStore, admin: ZkTopicAdmin, *,
                 auto_create: bool, internal_topics: frozenset[str],
                 validate_configs: Callable[[Mapping[str, str]], object] | None = None) -> None:  # fmt: skip
        self.validate_configs = validate_configs or (lambda _configs: None)
        self.store = store
        self.admin = admin
        self.auto_create_enable = auto_create
        self.internal_topics = internal_topics
        self._creating: set[str] = set()

    async def create_topic(self, topic: NewTopic, *, validate_only: bool = False,
                           timeout_ms: int = DEFAULT_TIMEOUT_MS) -> TopicInfo:  # fmt: skip
        self.validate_configs(topic.configs)  # INVALID_CONFIG before anything is written
        plan = await self.admin.plan_topic(topic.name, topic.num_partitions,
                                           topic.replication_factor, topic.assignment)  # fmt: skip
        info = TopicInfo(topic.name, new_topic_id(), len(plan), dict(topic.configs), plan)
        if validate_only:
            return info
        self._creating.add(topic.name)
        try:
            await self.admin.create_topic(topic.name, plan, topic.configs, topic_id=info.topic_id,
                                          timeout_ms=timeout_ms)  # fmt: skip
        finally:
            self._creating.discard(topic.name)
        return info

    async def delete_topic(self, name: str, *, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> TopicInfo:
        # a topic this broker's CreateTopics answered a moment ago may not be in the mirror
        # yet (Kafka checks its metadata cache, which that CreateTopics waited for)
        info = self.store.topics.get(name) or await asyncio.to_thread(self.store.reread_topic, name)
        if info is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        await self.admin.delete_topic(name, timeout_ms=timeout_ms)
        return info

    async def create_partitions(self, name: str, count: int, *,
                                assignment: Sequence[tuple[int, ...]] | None = None,
                                validate_only: bool = False,
                                timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:  # fmt: skip
        await self.admin.create_partitions(name, count, assignment, validate_only=validate_only,
                                           timeout_ms=timeout_ms)  # fmt: skip

    def alter_topic_configs(self, name: str, configs: Mapping[str, str], *,
                            validate_only: bool = False) -> None:  # fmt: skip
        info = self.store.topics.get(name)
        if info is None:
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        self.validate_configs(configs)
        if not validate_only:
            self.store.update_topic(replace(info, configs=dict(configs)))

    async def auto_create(self, name: str) -> TopicInfo | None:
        if not self.auto_create_enable or name in self.internal_topics:
            return None
        try:
            return await self.create_topic(NewTopic(name))
        except ApiError:  # TOPIC_ALREADY_EXISTS: in ZooKeeper, if not in the mirror yet
            return self.store.topics.get(name) or await asyncio.to_thread(self.store.reread_topic, name)

    async def ensure_internal_topic(self, name: str, partitions: int, configs: Mapping[str, str],
                                    replication_factor: int = 1) -> bool:  # fmt: skip
        if name in self._creating:
            return False
        return await self.admin.internal_topic_ready(name, partitions, replication_factor, configs)

    async def drain(self, timeout_s: float = 60.0) -> None:
        return None  # nothing runs here after the request: ZooKeeper holds it all
