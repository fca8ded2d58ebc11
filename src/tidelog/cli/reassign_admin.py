"""What ``tidelog reassign`` asks of a cluster, as Kafka's ReassignPartitionsCommand asks its
Admin client: AlterPartitionReassignments and ListPartitionReassignments (which
confluent-kafka's AdminClient does not offer) go to the controller through tidelog's own
protocol client, re-asking the metadata while a broker answers NOT_CONTROLLER; the rest
(replica assignments, brokers, throttle configs) through confluent-kafka's AdminClient.

Also the tool's pure parts: the JSON formats (``--topics-to-move-json-file`` and the
reassignment JSON, version 1), the proposed assignment of ``--generate`` (Kafka's
AdminUtils.assignReplicasToBrokers without racks) and the throttled-replica lists
(calculateLeaderThrottles / calculateFollowerThrottles).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from tidelog.client.kafka_client import KafkaClient
from tidelog.util.topic_partition import TopicPartition

NOT_CONTROLLER = 41
ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 45, 46
ANY_LOG_DIR = "any"
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LOG_DIR_THROTTLED_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
BROKER_THROTTLES = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE, LOG_DIR_THROTTLED_RATE)
TOPIC_THROTTLES = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)


class ReassignError(Exception):
    """What the tool prints before exiting non-zero (Kafka's TerseReassignmentFailureException)."""


@dataclass(frozen=True)
class Reassignment:
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


# --- JSON --------------------------------------------------------------------------------------


def parse_topics_to_move(text: str) -> list[str]:
    js = json.loads(text)
    if js.get("version", 1) != 1:
        raise ReassignError(f"Not supported version field value {js.get('version')}")
    return [str(t["topic"]) for t in js.get("topics", [])]


def parse_reassignment(text: str) -> list[tuple[TopicPartition, list[int]]]:
    """The partitions and target replicas of a reassignment JSON (log_dirs must be 'any')."""
    try:
        js = json.loads(text)
    except ValueError as exc:
        raise ReassignError(f"Unable to parse the reassignment JSON: {exc}") from None
    if js.get("version", 1) != 1:
        raise ReassignError(f"Not supported version field value {js.get('version')}")
    out: list[tuple[TopicPartition, list[int]]] = []
    for p in js.get("partitions", []):
        tp = TopicPartition(str(p["topic"]), int(p["partition"]))
        replicas = [int(r) for r in p["replicas"]]
        dirs = p.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if len(dirs) != len(replicas):
            raise ReassignError(f"Size of replicas list {replicas} is different from size of log dirs "
                                f"list {dirs} for partition {tp.topic}-{tp.partition}")  # fmt: skip
        if any(d != ANY_LOG_DIR for d in dirs):
            raise ReassignError("Moving replicas between log directories is not supported")
        out.append((tp, replicas))
    if not out:
        raise ReassignError("Partition reassignment list cannot be empty")
    if len({tp for tp, _ in out}) != len(out):
        raise ReassignError("Partition reassignment contains duplicate topic partitions")
    for tp, replicas in out:
        if len(set(replicas)) != len(replicas):
            raise ReassignError(f"Partition replica lists may not contain duplicate entries: "
                                f"{tp.topic}-{tp.partition} contains {replicas}")  # fmt: skip
    return out


def format_reassignment(parts: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's formatAsReassignmentJson."""
    return json.dumps({
        "version": 1,
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition, "replicas": list(parts[tp]),
             "log_dirs": [ANY_LOG_DIR] * len(parts[tp])}
            for tp in sorted(parts)
        ],
    }, separators=(",", ":"))  # fmt: skip


def name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


# --- generate and throttles --------------------------------------------------------------------


def assign_replicas(brokers: Sequence[int], partitions: int, replication_factor: int,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """AdminUtils.assignReplicasToBrokersRackUnaware: a random start and shift."""
    if replication_factor > len(brokers):
        raise ReassignError(f"Replication factor: {replication_factor} larger than available "
                            f"brokers: {len(brokers)}.")  # fmt: skip
    rng = rng or random.Random()
    ids = list(brokers)
    n = len(ids)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out: dict[int, list[int]] = {}
    for p in range(partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[(first + 1 + (shift + j) % (n - 1)) % n])
        out[p] = replicas
    return out


def throttled_replicas(
    current: Mapping[TopicPartition, Reassignment],
    proposed: Mapping[TopicPartition, Sequence[int]],
    assigned: Mapping[TopicPartition, Sequence[int]],
) -> tuple[dict[str, str], dict[str, str], set[int]]:
    """Kafka's calculateProposedMoveMap with the leader and follower throttles it implies:
    leaders throttled on each source replica, followers on each new one; and the brokers
    involved (each gets the broker-level rates)."""
    moves: dict[TopicPartition, tuple[set[int], set[int]]] = {}
    for tp, r in current.items():
        moves[tp] = ({b for b in r.replicas if b not in r.adding}, set(r.adding))
    for tp, replicas in proposed.items():
        sources = moves[tp][0] if tp in moves else set(assigned.get(tp, ()))
        if not sources:
            raise ReassignError(f"Trying to reassign a topic partition {name(tp)} with 0 replicas")
        moves[tp] = (sources, {b for b in replicas if b not in sources})
    leaders: dict[str, set[str]] = {}
    followers: dict[str, set[str]] = {}
    brokers: set[int] = set()
    for tp, (sources, destinations) in moves.items():
        leaders.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in sources)
        followers.setdefault(tp.topic, set()).update(f"{tp.partition}:{b}" for b in destinations)
        brokers |= sources | destinations
    return ({t: ",".join(sorted(v)) for t, v in leaders.items()},
            {t: ",".join(sorted(v)) for t, v in followers.items()}, brokers)  # fmt: skip


# --- requests ----------------------------------------------------------------------------------


class ReassignAdmin:
    """AlterPartitionReassignments and ListPartitionReassignments, sent to the controller."""

    def __init__(self, client: KafkaClient, timeout_s: float = 30.0) -> None:
        self.client = client
        self.timeout_s = timeout_s

    def _to_controller(self, api_key: int, body: dict[str, Any]) -> Any:
        deadline = time.monotonic() + self.timeout_s
        while True:
            md = self.client.metadata([])
            conn = (self.client.connection(md.brokers[md.controller_id])
                    if md.controller_id in md.brokers else self.client.any_connection())  # fmt: skip
            resp = conn.call(api_key, 0, body)
            if int(resp.error_code) != NOT_CONTROLLER or time.monotonic() > deadline:
                return resp
            time.sleep(0.1)

    def alter(self, asked: Mapping[TopicPartition, Sequence[int] | None]) -> dict[TopicPartition, str | None]:
        """Each partition's error (None: accepted); a None target cancels its move."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, replicas in asked.items():
            topics.setdefault(tp.topic, []).append({
                "partition_index": tp.partition,
                "replicas": None if replicas is None else list(replicas),
            })  # fmt: skip
        body = {"timeout_ms": int(self.timeout_s * 1000),
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}  # fmt: skip
        resp = self._to_controller(ALTER_REASSIGNMENTS, body)
        if int(resp.error_code):
            raise ReassignError(f"AlterPartitionReassignments failed: {_error(resp)}")
        out: dict[TopicPartition, str | None] = {}
        for t in resp.responses:
            for p in t.partitions:
                out[TopicPartition(t.name, int(p.partition_index))] = (
                    _error(p) if int(p.error_code) else None)
        return out

    def list(self, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, Reassignment]:
        topics: list[dict[str, Any]] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        resp = self._to_controller(LIST_REASSIGNMENTS, {"timeout_ms": int(self.timeout_s * 1000),
                                                        "topics": topics})  # fmt: skip
        if int(resp.error_code):
            raise ReassignError(f"ListPartitionReassignments failed: {_error(resp)}")
        return {
            TopicPartition(t.name, int(p.partition_index)): Reassignment(
                tuple(int(b) for b in p.replicas), tuple(int(b) for b in p.adding_replicas),
                tuple(int(b) for b in p.removing_replicas))
            for t in resp.topics for p in t.partitions
        }  # fmt: skip


def _error(resp: Any) -> str:
    code = ErrorCode(int(resp.error_code))
    msg = getattr(resp, "error_message", None)
    return f"{code.name.upper()}" + (f": {msg}" if msg else "")
