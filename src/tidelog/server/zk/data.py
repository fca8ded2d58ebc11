"""Kafka's ZooKeeper layout (ZkData.scala, 3.6): paths, and each znode's bytes, both ways.

Pure: no ZooKeeper here. Encoders write what Kafka writes (the same keys, value types and
key order, see ``kafka_json``); decoders accept every version Kafka accepts, including the
version-1 topic assignment tools such as CMAK write.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tidelog.util.topic_partition import TopicPartition

from .kafka_json import ScalaHashMap, ScalaMap, dumps, loads

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
CLUSTER_ID_PATH = "/cluster/id"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_ACL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES_PATH = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
CONFIG_ENTITY_TYPES = ("topics", "clients", "users", "brokers", "ips")

# ZkData.PersistentZkPaths: created by every broker at start-up
PERSISTENT_ZK_PATHS = (
    "/consumers",
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    *(f"/config/{t}" for t in CONFIG_ENTITY_TYPES),
)

LEADER_RECOVERED = 0
LEADER_RECOVERING = 1
NO_LEADER = -1


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(tp: TopicPartition) -> str:
    return f"{partitions_path(tp.topic)}/{tp.partition}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{partition_path(tp)}/state"


def config_entity_path(entity_type: str, name: str) -> str:
    return f"/config/{entity_type}/{name}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def uuid_to_kafka(value: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString``: URL-safe base64 of the 16 bytes, unpadded (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def uuid_from_kafka(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def _now_ms() -> int:
    return int(time.time() * 1000)


# --- /controller, /controller_epoch -----------------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int | None = None) -> bytes:
    """ControllerZNode.encode (3.6: version 2, ``kraftControllerEpoch`` -1 in ZooKeeper mode)."""
    ts = _now_ms() if timestamp_ms is None else timestamp_ms
    return dumps(
        ScalaMap(version=2, brokerid=broker_id, timestamp=str(ts), kraftControllerEpoch=-1)
    )


def decode_controller(data: bytes | None) -> int | None:
    js = loads(data)
    return None if js is None else int(js["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


# --- /brokers/ids/<id> --------------------------------------------------------------------------


@dataclass(frozen=True)
class EndPoint:
    listener_name: str
    host: str
    port: int
    security_protocol: str

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerRegistration:
    """What ``/brokers/ids/<id>`` holds (Kafka's BrokerInfo); ``epoch`` is the znode's czxid,
    filled in by the reader, not part of the JSON."""

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    version: int = 5
    timestamp_ms: int = 0
    epoch: int = -1
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def endpoint(self, listener_name: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)


def encode_broker(reg: BrokerRegistration, timestamp_ms: int | None = None) -> bytes:
    """BrokerIdZNode.encode: top-level host/port are the first PLAINTEXT endpoint's (null/-1
    without one), rack from v3, the listener map from v4, features from v5."""
    plain = next((e for e in reg.endpoints if e.security_protocol == "PLAINTEXT"), None)
    ts = _now_ms() if timestamp_ms is None else timestamp_ms
    js = ScalaHashMap(
        version=reg.version,
        host=plain.host if plain else None,
        port=plain.port if plain else -1,
        endpoints=[e.connection_string for e in reg.endpoints],
        jmx_port=reg.jmx_port,
        timestamp=str(ts),
    )
    if reg.rack is not None and reg.version >= 3:
        js["rack"] = reg.rack
    if reg.version >= 4:
        js["listener_security_protocol_map"] = ScalaMap(
            (e.listener_name, e.security_protocol) for e in reg.endpoints
        )
    if reg.version >= 5:
        js["features"] = ScalaMap((k, ScalaMap(v)) for k, v in reg.features.items())
    return dumps(js)


def _parse_endpoint(uri: str, protocols: Mapping[str, str] | None) -> EndPoint:
    name, _, rest = uri.partition("://")
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    protocol = protocols[name] if protocols is not None else name
    return EndPoint(name, host, int(port), protocol)


def decode_broker(broker_id: int, data: bytes, epoch: int = -1) -> BrokerRegistration:
    """BrokerIdZNode.decode, versions 1-5 (v1: host/port only, PLAINTEXT)."""
    js = loads(data)
    version = int(js["version"])
    if version < 1:
        raise ValueError(f"Unsupported version of broker registration: {data!r}")
    if version == 1:
        endpoints: tuple[EndPoint, ...] = (
            EndPoint("PLAINTEXT", str(js["host"]), int(js["port"]), "PLAINTEXT"),
        )
    else:
        protocols = js.get("listener_security_protocol_map")
        endpoints = tuple(_parse_endpoint(u, protocols) for u in js["endpoints"])
    return BrokerRegistration(
        broker_id=broker_id,
        endpoints=endpoints,
        rack=js.get("rack"),
        jmx_port=int(js.get("jmx_port", -1)),
        version=version,
        timestamp_ms=int(js.get("timestamp", 0)),
        epoch=epoch,
        features=js.get("features") or {},
    )


# --- /brokers/topics/<t> and its partitions' state ------------------------------------------------


@dataclass(frozen=True)
class ReplicaAssignment:
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/<t>``: the topic id (absent in v1/v2 written by tools) and replicas."""

    topic: str
    topic_id: uuid.UUID | None
    partitions: Mapping[int, ReplicaAssignment]


def encode_topic(topic_id: uuid.UUID | None, assignment: Mapping[int, ReplicaAssignment]) -> bytes:
    """TopicZNode.encode (version 3)."""
    replicas, adding, removing = ScalaHashMap(), ScalaHashMap(), ScalaHashMap()
    for p, a in assignment.items():
        replicas[str(p)] = list(a.replicas)
        if a.adding_replicas:
            adding[str(p)] = list(a.adding_replicas)
        if a.removing_replicas:
            removing[str(p)] = list(a.removing_replicas)
    js = ScalaHashMap(
        version=3, partitions=replicas, adding_replicas=adding, removing_replicas=removing
    )
    if topic_id is not None:
        js["topic_id"] = uuid_to_kafka(topic_id)
    return dumps(js)


def decode_topic(topic: str, data: bytes | None) -> TopicAssignment:
    js = loads(data)
    if js is None:
        return TopicAssignment(topic, None, {})
    tid = js.get("topic_id")
    adding = js.get("adding_replicas") or {}
    removing = js.get("removing_replicas") or {}
    parts = {
        int(p): ReplicaAssignment(
            tuple(int(r) for r in replicas),
            tuple(int(r) for r in adding.get(p, ())),
            tuple(int(r) for r in removing.get(p, ())),
        )
        for p, replicas in (js.get("partitions") or {}).items()
    }
    return TopicAssignment(topic, uuid_from_kafka(tid) if tid else None, parts)


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    """A partition's ``state`` znode; ``zk_version`` (the partition epoch) is its version."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERED
    zk_version: int = 0

    def new_leader_and_isr(
        self, leader: int, isr: Sequence[int], *, recovery: int | None = None
    ) -> LeaderIsrAndControllerEpoch:
        """Kafka's LeaderAndIsr.newLeaderAndIsr: the leader epoch moves on by one; the
        recovery state stays unless given."""
        return LeaderIsrAndControllerEpoch(
            leader, self.leader_epoch + 1, tuple(isr), self.controller_epoch,
            self.leader_recovery_state if recovery is None else recovery, self.zk_version,
        )  # fmt: skip


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    """TopicPartitionStateZNode.encode (``leader_recovery_state`` only when RECOVERING)."""
    js = ScalaMap(
        version=1,
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        controller_epoch=state.controller_epoch,
        isr=list(state.isr),
    )
    if state.leader_recovery_state != LEADER_RECOVERED:
        js["leader_recovery_state"] = state.leader_recovery_state
    return dumps(js)


def decode_partition_state(data: bytes | None, zk_version: int) -> LeaderIsrAndControllerEpoch | None:
    js = loads(data)
    if js is None:
        return None
    return LeaderIsrAndControllerEpoch(
        leader=int(js["leader"]),
        leader_epoch=int(js["leader_epoch"]),
        isr=tuple(int(b) for b in js["isr"]),
        controller_epoch=int(js["controller_epoch"]),
        leader_recovery_state=int(js.get("leader_recovery_state", LEADER_RECOVERED)),
        zk_version=zk_version,
    )


# --- /config ---------------------------------------------------------------------------------


def encode_config(config: Mapping[str, str]) -> bytes:
    """ConfigEntityZNode.encode: only the overrides, values as strings."""
    return dumps(ScalaMap(version=1, config={k: str(v) for k, v in config.items()}))


def decode_config(data: bytes | None) -> dict[str, str]:
    js = loads(data)
    if not isinstance(js, dict) or not isinstance(js.get("config"), dict):
        return {}
    return {str(k): str(v) for k, v in js["config"].items()}


def encode_config_change(entity_path: str) -> bytes:
    """ConfigEntityChangeNotificationSequenceZNode.encode (version 2, ``topics/<t>``)."""
    return dumps(ScalaMap(version=2, entity_path=entity_path))


def decode_config_change(data: bytes) -> tuple[str, str]:
    """(entity type, entity name) of a change notification (version 1 and 2)."""
    js = loads(data)
    if int(js["version"]) == 1:
        return str(js["entity_type"]), str(js["entity_name"])
    entity_type, _, name = str(js["entity_path"]).partition("/")
    return entity_type, name


# --- notifications and admin requests ------------------------------------------------------------


def _partitions_json(partitions: Iterable[TopicPartition]) -> list[ScalaMap]:
    return [ScalaMap(topic=tp.topic, partition=tp.partition) for tp in partitions]


def _partitions_from(js: object) -> set[TopicPartition]:
    if not isinstance(js, dict):
        return set()
    return {TopicPartition(str(p["topic"]), int(p["partition"])) for p in js["partitions"]}


def encode_isr_change(partitions: Iterable[TopicPartition]) -> bytes:
    return dumps(ScalaMap(version=1, partitions=_partitions_json(partitions)))


def decode_isr_change(data: bytes | None) -> set[TopicPartition]:
    return _partitions_from(loads(data))


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return dumps(ScalaMap(version=1, partitions=_partitions_json(partitions)))


def decode_preferred_replica_election(data: bytes | None) -> set[TopicPartition]:
    return _partitions_from(loads(data))


def encode_log_dir_event(broker_id: int) -> bytes:
    return dumps(ScalaMap(version=1, broker=broker_id, event=1))


def decode_log_dir_event(data: bytes | None) -> int | None:
    js = loads(data)
    return None if js is None else int(js["broker"])


def encode_reassignment(reassignment: Mapping[TopicPartition, Sequence[int]]) -> bytes:
    """ReassignPartitionsZNode.encode (a Jackson bean: declaration order)."""
    parts = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
        for tp, replicas in reassignment.items()
    ]
    return dumps({"version": 1, "partitions": parts})


def decode_reassignment(data: bytes | None) -> dict[TopicPartition, tuple[int, ...]]:
    js = loads(data)
    if js is None:
        return {}
    return {
        TopicPartition(str(p["topic"]), int(p["partition"])): tuple(int(r) for r in p["replicas"])
        for p in js["partitions"]
    }


# --- /cluster/id, /latest_producer_id_block -----------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    """ClusterIdZNode.toJson: note ``version`` is the string "1"."""
    return dumps(ScalaMap(version="1", id=cluster_id))


def decode_cluster_id(data: bytes) -> str:
    return str(loads(data)["id"])


@dataclass(frozen=True)
class ProducerIdBlock:
    broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return dumps(
        ScalaMap(
            version=1,
            broker=block.broker_id,
            block_start=str(block.first_producer_id),
            block_end=str(block.last_producer_id),
        )
    )


def decode_producer_id_block(data: bytes) -> ProducerIdBlock:
    js = loads(data)
    start, end = int(js["block_start"]), int(js["block_end"])
    return ProducerIdBlock(int(js["broker"]), start, end - start + 1)


# --- ACLs (AclAuthorizer's ZooKeeper store) ------------------------------------------------------


@dataclass(frozen=True)
class ZkAclEntry:
    principal: str
    permission_type: str  # "Allow" / "Deny"
    operation: str  # "Read", "Write", ... (Kafka's AclOperation names in camel case)
    host: str = "*"


def acl_path(resource_type: str, name: str, pattern_type: str = "LITERAL") -> str:
    """ZkAclStore.path: ``/kafka-acl/Topic/t`` or ``/kafka-acl-extended/prefixed/Topic/t``."""
    if pattern_type.upper() == "LITERAL":
        return f"{LITERAL_ACL_PATH}/{resource_type}/{name}"
    return f"{EXTENDED_ACL_PATH}/{pattern_type.lower()}/{resource_type}/{name}"


def encode_acls(acls: Iterable[ZkAclEntry]) -> bytes:
    entries = [
        ScalaMap(principal=a.principal, permissionType=a.permission_type,
                 operation=a.operation, host=a.host)
        for a in acls
    ]  # fmt: skip
    return dumps(ScalaMap(version=1, acls=entries))


def decode_acls(data: bytes | None) -> list[ZkAclEntry]:
    js = loads(data)
    if js is None:
        return []
    if int(js["version"]) != 1:
        raise ValueError(f"unsupported ACL znode version {js['version']}")
    return [
        ZkAclEntry(str(a["principal"]), str(a["permissionType"]), str(a["operation"]), str(a["host"]))
        for a in js["acls"]
    ]


def encode_literal_acl_change(resource_type: str, name: str) -> bytes:
    """LiteralAclChangeStore.encode: ``Topic:name`` as plain text."""
    return f"{resource_type}:{name}".encode()


def encode_extended_acl_change(resource_type: str, name: str, pattern_type: str) -> bytes:
    """ExtendedAclChangeStore.encode (ResourceType/PatternType enum names, upper case)."""
    return dumps(
        {"version": 1, "resourceType": resource_type.upper(), "name": name,
         "patternType": pattern_type.upper()}
    )  # fmt: skip
