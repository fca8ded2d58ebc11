"""Kafka's KafkaZkClient on kazoo: every read and write the brokers and the controller make.

Blocking calls (kazoo's own thread does the I/O); asyncio callers run them with
``asyncio.to_thread``. Watches are one-shot, as Kafka's: a reader passes ``watch=`` and
re-reads (re-arming it) when it fires. Controller writes are fenced as Kafka fences them:
each is one multi-op with ``check(/controller_epoch, epoch_zk_version)`` first, so a
deposed controller writes nothing (``ControllerMovedError``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.protocol.states import ZnodeStat

from tidelog.util.topic_partition import TopicPartition

from . import data as z

log = logging.getLogger(__name__)

Watch = Callable[[Any], None]
Op = tuple[str, str, bytes | None, int]  # ("create" | "set" | "delete", path, data, version)


class ControllerMovedError(Exception):
    """The controller epoch's zkVersion changed: another broker is controller now."""


class BrokerIdTakenError(Exception):
    """``/brokers/ids/<id>`` is held by another session (a live broker with this id)."""


class TopicExistsError(Exception):
    pass


@dataclass
class UpdateLeaderAndIsrResult:
    """Kafka's UpdateLeaderAndIsrResult: committed states (with their new zkVersion), the
    partitions whose expected zkVersion was stale, and other failures."""

    finished: dict[TopicPartition, z.LeaderIsrAndControllerEpoch] = field(default_factory=dict)
    bad_version: set[TopicPartition] = field(default_factory=set)
    failed: dict[TopicPartition, Exception] = field(default_factory=dict)


def _first_error(results: list[Any]) -> Exception | None:
    for r in results:
        if isinstance(r, Exception) and not isinstance(r, RolledBackError):
            return r
    return None


class KafkaZkClient:
    def __init__(
        self, connect: str, *, session_timeout_ms: int = 18000, connection_timeout_ms: int = 18000
    ) -> None:
        self.connect = connect
        self.connection_timeout_ms = connection_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.zk = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000.0)

    # --- session ------------------------------------------------------------------------------

    def start(self) -> None:
        self._create_chroot_if_necessary()
        self.zk.start(timeout=self.connection_timeout_ms / 1000.0)
        self.create_top_level_paths()

    def _create_chroot_if_necessary(self) -> None:
        # KafkaServer creates the chroot of zookeeper.connect before using it
        hosts, sep, chroot = self.connect.partition("/")
        if not sep or not chroot.strip("/"):
            return
        root = KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000.0)
        root.start(timeout=self.connection_timeout_ms / 1000.0)
        try:
            root.ensure_path("/" + chroot.strip("/"))
        finally:
            root.stop()
            root.close()

    def close(self) -> None:
        try:
            self.zk.stop()
        finally:
            self.zk.close()

    @property
    def session_id(self) -> int:
        return int(self.zk.client_id[0]) if self.zk.client_id else 0

    @property
    def connected(self) -> bool:
        return bool(self.zk.state == KazooState.CONNECTED)

    def add_state_listener(self, listener: Callable[[str], None]) -> None:
        """``listener(state)`` with kazoo's ``KazooState`` names (CONNECTED, SUSPENDED, LOST),
        called on kazoo's thread: do not block it."""
        self.zk.add_listener(listener)

    def create_top_level_paths(self) -> None:
        for path in z.PERSISTENT_ZK_PATHS:
            self.zk.ensure_path(path)

    # --- generic reads (watch re-arming readers) ------------------------------------------------

    def get_children(self, path: str, watch: Watch | None = None) -> list[str]:
        try:
            return sorted(self.zk.get_children(path, watch=watch))
        except NoNodeError:
            if watch is not None:  # arm an existence watch instead
                self.zk.exists(path, watch=watch)
            return []

    def get_data(self, path: str, watch: Watch | None = None) -> tuple[bytes | None, ZnodeStat | None]:
        try:
            data, stat = self.zk.get(path, watch=watch)
            return data, stat
        except NoNodeError:
            if watch is not None:
                self.zk.exists(path, watch=watch)
            return None, None

    # --- cluster id, brokers ---------------------------------------------------------------------

    def get_or_create_cluster_id(self, proposed: str) -> str:
        data, _ = self.get_data(z.CLUSTER_ID_PATH)
        if data is not None:
            return z.decode_cluster_id(data)
        try:
            self.zk.create(z.CLUSTER_ID_PATH, z.encode_cluster_id(proposed), makepath=True)
            return proposed
        except NodeExistsError:
            data, _ = self.get_data(z.CLUSTER_ID_PATH)
            assert data is not None
            return z.decode_cluster_id(data)

    def register_broker(self, reg: z.BrokerRegistration) -> int:
        """Create the ephemeral ``/brokers/ids/<id>`` (Kafka's CheckedEphemeral: create then
        setData at version 0, one multi) and return the broker epoch, its czxid. A znode left
        by this same session (a retried create) is ours; one of another session is not."""
        path = z.broker_path(reg.broker_id)
        data = z.encode_broker(reg)
        t = self.zk.transaction()
        t.create(path, data, ephemeral=True)
        t.set_data(path, data, version=0)
        err = _first_error(t.commit())
        if isinstance(err, NodeExistsError):
            _, stat = self.get_data(path)
            if stat is not None and stat.ephemeralOwner == self.session_id:
                return int(stat.czxid)
            raise BrokerIdTakenError(f"broker id {reg.broker_id} is registered by another broker")
        if err is not None:
            raise err
        _, stat = self.get_data(path)
        if stat is None:
            raise NoNodeError(path)
        return int(stat.czxid)

    def get_broker(self, broker_id: int) -> z.BrokerRegistration | None:
        data, stat = self.get_data(z.broker_path(broker_id))
        if data is None or stat is None:
            return None
        return z.decode_broker(broker_id, data, epoch=int(stat.czxid))

    def get_all_brokers(self, watch: Watch | None = None) -> dict[int, z.BrokerRegistration]:
        out = {}
        for child in self.get_children(z.BROKER_IDS_PATH, watch):
            reg = self.get_broker(int(child))
            if reg is not None:  # gone between the listing and the read
                out[reg.broker_id] = reg
        return out

    # --- controller election ------------------------------------------------------------------

    def get_controller_id(self, watch: Watch | None = None) -> int | None:
        data, _ = self.get_data(z.CONTROLLER_PATH, watch)
        return z.decode_controller(data)

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, its zkVersion), or None before the first election."""
        data, stat = self.get_data(z.CONTROLLER_EPOCH_PATH)
        if data is None or stat is None:
            return None
        return z.decode_controller_epoch(data), int(stat.version)

    def register_controller_and_increment_controller_epoch(self, broker_id: int) -> tuple[int, int]:
        """Kafka's election: one multi creating the ephemeral ``/controller`` and bumping
        ``/controller_epoch`` at the version read. Returns (new epoch, its zkVersion); raises
        ControllerMovedError when another broker won."""
        current = self.get_controller_epoch()
        if current is None:
            try:  # KafkaZkClient.maybeCreateControllerEpochZNode: epoch 0 at version 0
                self.zk.create(z.CONTROLLER_EPOCH_PATH, z.encode_controller_epoch(0))
            except NodeExistsError:
                pass
            current = self.get_controller_epoch()
            assert current is not None
        epoch, version = current
        t = self.zk.transaction()
        t.create(z.CONTROLLER_PATH, z.encode_controller(broker_id), ephemeral=True)
        t.set_data(z.CONTROLLER_EPOCH_PATH, z.encode_controller_epoch(epoch + 1), version=version)
        err = _first_error(t.commit())
        if err is None:
            return epoch + 1, version + 1
        if isinstance(err, NodeExistsError | BadVersionError):
            # a retried multi whose first attempt succeeded leaves /controller ours
            data, stat = self.get_data(z.CONTROLLER_PATH)
            again = self.get_controller_epoch()
            if (stat is not None and stat.ephemeralOwner == self.session_id
                    and z.decode_controller(data) == broker_id and again is not None):  # fmt: skip
                return again
            raise ControllerMovedError(f"controller moved (broker {z.decode_controller(data)})")
        raise err

    def delete_controller(self, epoch_zk_version: int) -> None:
        """Resign: delete ``/controller`` fenced by the epoch we won."""
        self._checked(epoch_zk_version, ("delete", z.CONTROLLER_PATH, None, -1))

    def _checked(self, epoch_zk_version: int, *ops: Op) -> list[Any]:
        """Run ``ops`` in one multi behind the controller epoch check (Kafka's
        wrapRequestWithControllerEpochCheck); their results after the check's."""
        return self._checked_many(epoch_zk_version, [list(ops)])[0]

    def _checked_many(self, epoch_zk_version: int, multis: list[list[Op]]) -> list[list[Any]]:
        """Several epoch-checked multis sent at once (pipelined, as Kafka's controller sends
        its requests asynchronously), then their results in order."""
        pending = []
        for ops in multis:
            t = self.zk.transaction()
            t.check(z.CONTROLLER_EPOCH_PATH, epoch_zk_version)
            for kind, path, data, version in ops:
                if kind == "create":
                    t.create(path, data or b"")
                elif kind == "set":
                    t.set_data(path, data or b"", version)
                else:
                    t.delete(path, version)
            pending.append(t.commit_async())
        out = []
        for result in pending:
            results = result.get()
            if isinstance(results[0], BadVersionError | NoNodeError):
                raise ControllerMovedError("controller epoch zkVersion changed")
            out.append(list(results[1:]))
        return out

    # --- topics ------------------------------------------------------------------------------

    def get_all_topics(self, watch: Watch | None = None) -> list[str]:
        return self.get_children(z.TOPICS_PATH, watch)

    def get_topic_assignment(
        self, topic: str, watch: Watch | None = None
    ) -> tuple[z.TopicAssignment, int] | None:
        """(assignment, znode version) or None when the topic does not exist."""
        data, stat = self.get_data(z.topic_path(topic), watch)
        if data is None or stat is None:
            return None
        return z.decode_topic(topic, data), int(stat.version)

    def create_topic(
        self,
        topic: str,
        topic_id: uuid.UUID,
        assignment: Mapping[int, z.ReplicaAssignment],
        config: Mapping[str, str],
    ) -> None:
        """AdminZkClient.createTopicWithAssignment: configs first, then the assignment the
        controller watches (TopicExistsError when the topic is there)."""
        if self.zk.exists(z.topic_path(topic)) is not None:
            raise TopicExistsError(topic)
        self.set_or_create_entity_configs("topics", topic, config, notify=False)
        try:
            self.zk.create(z.topic_path(topic), z.encode_topic(topic_id, assignment), makepath=True)
        except NodeExistsError:
            raise TopicExistsError(topic) from None

    def set_topic_assignment(
        self,
        topic: str,
        topic_id: uuid.UUID | None,
        assignment: Mapping[int, z.ReplicaAssignment],
        expected_version: int,
        epoch_zk_version: int | None = None,
    ) -> None:
        data = z.encode_topic(topic_id, assignment)
        path = z.topic_path(topic)
        if epoch_zk_version is None:
            self.zk.set(path, data, version=expected_version)
            return
        err = _first_error(
            self._checked(epoch_zk_version, ("set", path, data, expected_version))
        )
        if err is not None:
            raise err

    def get_topic_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, z.LeaderIsrAndControllerEpoch]:
        tps = list(partitions)
        pending = [self.zk.get_async(z.partition_state_path(tp)) for tp in tps]  # pipelined
        out = {}
        for tp, result in zip(tps, pending, strict=True):
            try:
                data, stat = result.get()
            except NoNodeError:
                continue
            state = z.decode_partition_state(data, int(stat.version))
            if state is not None:
                out[tp] = state
        return out

    def create_topic_partition_states(
        self, states: Mapping[TopicPartition, z.LeaderIsrAndControllerEpoch], epoch_zk_version: int
    ) -> dict[TopicPartition, Exception | None]:
        """Create each ``partitions/<p>/state`` (and its parents) behind the epoch check;
        None for a created one, the error otherwise (NodeExistsError: already there)."""
        topics = {tp.topic for tp in states}
        self._create_all([z.partitions_path(t) for t in sorted(topics)])
        self._create_all([z.partition_path(tp) for tp in states])
        tps = list(states)
        results = self._checked_many(epoch_zk_version, [
            [("create", z.partition_state_path(tp), z.encode_partition_state(states[tp]), -1)]
            for tp in tps
        ])  # fmt: skip
        return {tp: _first_error(r) for tp, r in zip(tps, results, strict=True)}

    def _create_all(self, paths: list[str]) -> None:
        """Create empty znodes, pipelined; existing ones are fine."""
        pending = [self.zk.create_async(p, b"") for p in paths]
        for result in pending:
            try:
                result.get()
            except NodeExistsError:
                pass

    def update_leader_and_isr(
        self, states: Mapping[TopicPartition, z.LeaderIsrAndControllerEpoch], epoch_zk_version: int
    ) -> UpdateLeaderAndIsrResult:
        """Write each state at its expected zkVersion (``state.zk_version``) behind the epoch
        check; committed states come back with the new zkVersion (the partition epoch)."""
        result = UpdateLeaderAndIsrResult()
        tps = list(states)
        all_results = self._checked_many(epoch_zk_version, [
            [("set", z.partition_state_path(tp), z.encode_partition_state(states[tp]),
              states[tp].zk_version)]
            for tp in tps
        ])  # fmt: skip
        for tp, res in zip(tps, all_results, strict=True):
            state = states[tp]
            err = _first_error(res)
            if err is None:
                stat = res[0]
                result.finished[tp] = z.LeaderIsrAndControllerEpoch(
                    state.leader, state.leader_epoch, state.isr, state.controller_epoch,
                    state.leader_recovery_state, int(stat.version),
                )  # fmt: skip
            elif isinstance(err, BadVersionError):
                result.bad_version.add(tp)
            else:
                result.failed[tp] = err
        return result

    # --- topic deletion ------------------------------------------------------------------------

    def create_delete_topic_path(self, topic: str) -> None:
        try:
            self.zk.create(z.delete_topic_path(topic), b"", makepath=True)
        except NodeExistsError:
            pass

    def get_topic_deletions(self, watch: Watch | None = None) -> list[str]:
        return self.get_children(z.DELETE_TOPICS_PATH, watch)

    def delete_topic_deletions(self, topics: Iterable[str], epoch_zk_version: int) -> None:
        for topic in topics:
            path = z.delete_topic_path(topic)
            self._checked(epoch_zk_version, ("delete", path, None, -1))

    def _subtree(self, path: str) -> list[str]:
        """Paths under and including ``path``, deepest first."""
        out: list[str] = []
        for child in self.get_children(path):
            out += self._subtree(f"{path}/{child}")
        if self.zk.exists(path) is not None:
            out.append(path)
        return out

    def delete_topic_znodes(self, topic: str, epoch_zk_version: int) -> None:
        """Remove ``/brokers/topics/<t>`` (with its partition states) and
        ``/config/topics/<t>``, fenced by the controller epoch."""
        paths = self._subtree(z.topic_path(topic)) + self._subtree(
            z.config_entity_path("topics", topic)
        )

        if paths:
            ops = [("delete", p, None, -1) for p in paths]
            err = _first_error(self._checked(epoch_zk_version, *ops))
            if err is not None and not isinstance(err, NoNodeError):
                raise err

    # --- configs -----------------------------------------------------------------------------

    def get_entity_configs(self, entity_type: str, name: str) -> dict[str, str]:
        data, _ = self.get_data(z.config_entity_path(entity_type, name))
        return z.decode_config(data)

    def set_or_create_entity_configs(
        self, entity_type: str, name: str, config: Mapping[str, str], *, notify: bool = True
    ) -> None:
        path, data = z.config_entity_path(entity_type, name), z.encode_config(config)
        try:
            self.zk.set(path, data)
        except NoNodeError:
            try:
                self.zk.create(path, data, makepath=True)
            except NodeExistsError:  # another broker created it in between: overwrite
                self.zk.set(path, data)
        if notify:
            self.create_config_change_notification(f"{entity_type}/{name}")

    def create_config_change_notification(self, entity_path: str) -> None:
        self.zk.create(
            f"{z.CONFIG_CHANGES_PATH}/{z.CONFIG_CHANGE_PREFIX}",
            z.encode_config_change(entity_path),
            sequence=True,
            makepath=True,
        )

    def purge_obsolete_notifications(self, root: str, names: Iterable[str], expiration_ms: int,
                                     now_ms: float | None = None) -> None:  # fmt: skip
        """ZkNodeChangeNotificationListener.purgeObsoleteNotifications: delete the
        notifications created (znode ctime) more than ``expiration_ms`` before now."""
        if now_ms is None:
            now_ms = time.time() * 1000
        for name in sorted(names):
            _, stat = self.get_data(f"{root}/{name}")
            if stat is None:
                continue
            if now_ms - int(stat.ctime) <= expiration_ms:
                break  # sorted by sequence: the rest are newer
            try:
                self.zk.delete(f"{root}/{name}")
            except NoNodeError:
                pass

    # --- producer ids --------------------------------------------------------------------------

    def allocate_producer_id_block(self, broker_id: int, size: int) -> z.ProducerIdBlock:
        """ZkProducerIdManager.getNewProducerIdBlock: the block after the latest one, claimed
        with a conditional write (retried when another broker claimed first)."""
        while True:
            data, stat = self.get_data(z.PRODUCER_ID_BLOCK_PATH)
            if stat is None:
                self.zk.ensure_path(z.PRODUCER_ID_BLOCK_PATH)
                continue
            first = 0
            if data:
                first = z.decode_producer_id_block(data).last_producer_id + 1
            block = z.ProducerIdBlock(broker_id, first, size)
            try:
                self.zk.set(
                    z.PRODUCER_ID_BLOCK_PATH, z.encode_producer_id_block(block), version=stat.version
                )
                return block
            except BadVersionError:
                continue

    # --- notifications and admin requests -----------------------------------------------------

    def get_reassignment(self, watch: Watch | None = None) -> dict[TopicPartition, tuple[int, ...]]:
        data, _ = self.get_data(z.REASSIGN_PARTITIONS_PATH, watch)
        return z.decode_reassignment(data)

    def set_reassignment(
        self, reassignment: Mapping[TopicPartition, tuple[int, ...]], epoch_zk_version: int
    ) -> None:
        data = z.encode_reassignment(reassignment)
        err = _first_error(
            self._checked(epoch_zk_version, ("set", z.REASSIGN_PARTITIONS_PATH, data, -1))
        )
        if err is not None:
            raise err

    def delete_reassignment(self, epoch_zk_version: int) -> None:
        if self.zk.exists(z.REASSIGN_PARTITIONS_PATH) is not None:
            self._checked(epoch_zk_version, ("delete", z.REASSIGN_PARTITIONS_PATH, None, -1))

    def get_preferred_replica_election(self, watch: Watch | None = None) -> set[TopicPartition]:
        data, _ = self.get_data(z.PREFERRED_REPLICA_ELECTION_PATH, watch)
        return z.decode_preferred_replica_election(data)

    def delete_preferred_replica_election(self, epoch_zk_version: int) -> None:
        if self.zk.exists(z.PREFERRED_REPLICA_ELECTION_PATH) is not None:
            self._checked(
                epoch_zk_version, ("delete", z.PREFERRED_REPLICA_ELECTION_PATH, None, -1)
            )

    def get_isr_change_notifications(self, watch: Watch | None = None) -> dict[str, set[TopicPartition]]:
        out = {}
        for child in self.get_children(z.ISR_CHANGE_NOTIFICATION_PATH, watch):
            data, _ = self.get_data(f"{z.ISR_CHANGE_NOTIFICATION_PATH}/{child}")
            out[child] = z.decode_isr_change(data)
        return out

    def delete_isr_change_notifications(self, names: Iterable[str], epoch_zk_version: int) -> None:
        for name in names:
            path = f"{z.ISR_CHANGE_NOTIFICATION_PATH}/{name}"
            err = _first_error(self._checked(epoch_zk_version, ("delete", path, None, -1)))
            if err is not None and not isinstance(err, NoNodeError):
                raise err

    def propagate_log_dir_event(self, broker_id: int) -> str:
        """A log dir of this broker failed: ``/log_dir_event_notification/log_dir_event_<seq>``
        for the controller (Kafka's propagateLogDirEvent); the znode's path."""
        return str(self.zk.create(
            f"{z.LOG_DIR_EVENT_NOTIFICATION_PATH}/{z.LOG_DIR_EVENT_PREFIX}",
            z.encode_log_dir_event(broker_id), sequence=True, makepath=True,
        ))  # fmt: skip

    def get_log_dir_event_notifications(self, watch: Watch | None = None) -> dict[str, int]:
        """Each notification's name and the broker whose log dir failed."""
        out = {}
        for child in self.get_children(z.LOG_DIR_EVENT_NOTIFICATION_PATH, watch):
            data, _ = self.get_data(f"{z.LOG_DIR_EVENT_NOTIFICATION_PATH}/{child}")
            broker = z.decode_log_dir_event(data)
            if broker is not None:
                out[child] = broker
        return out

    def delete_log_dir_event_notifications(self, names: Iterable[str], epoch_zk_version: int) -> None:
        for name in names:
            path = f"{z.LOG_DIR_EVENT_NOTIFICATION_PATH}/{name}"
            err = _first_error(self._checked(epoch_zk_version, ("delete", path, None, -1)))
            if err is not None and not isinstance(err, NoNodeError):
                raise err

    # --- ACLs ------------------------------------------------------------------------------------

    def get_versioned_acls(self, path: str) -> tuple[list[z.ZkAclEntry], int]:
        """(entries, znode version); version -1 when the resource has no ACL znode."""
        data, stat = self.get_data(path)
        return z.decode_acls(data), (int(stat.version) if stat is not None else -1)

    def conditional_set_or_create_acls(
        self, path: str, acls: list[z.ZkAclEntry], expected_version: int
    ) -> bool:
        """Kafka's conditionalSetAclsForResource / createAclsForResourceIfNotExists: False
        when another writer got there first (re-read and retry)."""
        try:
            if expected_version < 0:
                self.zk.create(path, z.encode_acls(acls), makepath=True)
            else:
                self.zk.set(path, z.encode_acls(acls), version=expected_version)
            return True
        except (BadVersionError, NodeExistsError):
            return False

    def conditional_delete(self, path: str, expected_version: int) -> bool:
        """Kafka's conditionalDelete: False when the znode moved past ``expected_version``
        (a znode already gone counts as deleted)."""
        try:
            self.zk.delete(path, version=expected_version)
            return True
        except NoNodeError:
            return True
        except BadVersionError:
            return False

    def create_acl_change_notification(self, change_path: str, data: bytes) -> None:
        self.zk.create(f"{change_path}/{z.ACL_CHANGE_PREFIX}", data, sequence=True, makepath=True)
