"""`tidelog reassign`: Kafka's kafka-reassign-partitions.sh (ReassignPartitionsCommand).

* ``--generate --topics-to-move-json-file F --broker-list 1,2,3``: prints the topics' current
  assignment and a proposed one over those brokers (nothing is changed);
* ``--execute --reassignment-json-file F [--throttle B/s] [--additional]``: prints the
  current assignment (to roll back with) and starts the moves; with ``--throttle``, the
  moving replicas are named in the topics' ``leader/follower.replication.throttled.replicas``
  and every broker involved gets ``leader/follower.replication.throttled.rate``;
* ``--verify --reassignment-json-file F``: each partition's state; once nothing moves, the
  throttles are removed (unless ``--preserve-throttles``);
* ``--cancel --reassignment-json-file F``: cancels the moves still in progress (reverting
  them) and removes the throttles;
* ``--list``: the moves in progress.

The JSON formats are Kafka's (version 1; ``log_dirs`` other than ``any`` are refused: moves
between a broker's log dirs are not part of this tool here, so
``--replica-alter-log-dirs-throttle`` has no broker to set).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from tidelog.cli.client_config import (
    CliError,
    add_connection_args,
    client_config,
    make_client,
    timeout_s,
    wait,
)
from tidelog.cli.reassign_admin import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
    TOPIC_THROTTLES,
    ReassignAdmin,
    ReassignError,
    assign_replicas,
    format_reassignment,
    name,
    parse_reassignment,
    parse_topics_to_move,
    throttled_replicas,
)
from tidelog.client.kafka_client import KafkaClient
from tidelog.client.security import ClientSecurity
from tidelog.util.topic_partition import TopicPartition

TIMEOUT_S = 30
# the broker throttles --verify and --cancel clear (Kafka also clears the log-dir one, which
# no tidelog broker sets)
CLEARED_BROKER_THROTTLES = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE)
EXISTING = ("Cannot execute because there is an existing partition assignment.  Use --additional "
            "to override this and create a new partition assignment in addition to the existing "
            "one. The --additional flag can also be used to change the throttle by resubmitting "
            "the current reassignment.")  # fmt: skip
VERIFY_WARNING = ("Warning: You must run --verify periodically, until the reassignment completes, "
                  "to ensure the throttle is removed.")  # fmt: skip


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("reassign", help="move partitions between brokers (kafka-reassign-partitions)")
    add_connection_args(p)
    g = p.add_mutually_exclusive_group(required=True)
    for action in ("generate", "execute", "verify", "cancel", "list"):
        g.add_argument(f"--{action}", action="store_true")
    p.add_argument("--topics-to-move-json-file", type=Path, metavar="FILE",
                   help='--generate: {"topics": [{"topic": "t"}], "version": 1}')
    p.add_argument("--broker-list", metavar="IDS", help="--generate: brokers to assign to, e.g. 1,2,3")
    p.add_argument("--reassignment-json-file", type=Path, metavar="FILE",
                   help="--execute/--verify/--cancel: the partitions' target replicas")
    p.add_argument("--throttle", type=int, default=-1, metavar="B/S",
                   help="--execute: replication between brokers throttled to this rate")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1, metavar="B/S",
                   help="--execute: moves between log dirs throttled to this rate")
    p.add_argument("--additional", action="store_true",
                   help="--execute: start even while other reassignments run")
    p.add_argument("--preserve-throttles", action="store_true",
                   help="--verify/--cancel: leave the throttles in place")
    p.add_argument("--disable-rack-aware", action="store_true", help="--generate: ignore racks")
    p.add_argument("--timeout", type=int, default=10000, metavar="MS", help="the longest wait in ms for the cluster to answer (default 10000)")
    p.set_defaults(func=run)


def _read(path: Path | None, flag: str) -> str:
    if path is None:
        raise CliError(f"this action needs {flag}")
    try:
        return path.read_text()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None


class Cluster:
    """The two clients the tool talks through."""

    def __init__(self, args: argparse.Namespace) -> None:
        conf = client_config(args, {}, {})
        self.admin = make_client(AdminClient, conf, timeout_s(args.timeout, "--timeout"))
        props = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
        self.client = KafkaClient(args.bootstrap_server, security=ClientSecurity.from_properties(props))
        self.reassignments = ReassignAdmin(self.client, TIMEOUT_S)

    def close(self) -> None:
        self.client.close()

    def brokers(self) -> list[int]:
        cluster = wait(self.admin.describe_cluster(), TIMEOUT_S, "DescribeCluster")
        return sorted(int(n.id) for n in cluster.nodes)

    def assignment(self, topics: set[str]) -> dict[TopicPartition, list[int]]:
        out: dict[TopicPartition, list[int]] = {}
        for topic in sorted(topics):
            md = self.admin.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
            if md is None or md.error is not None or not md.partitions:
                raise ReassignError(f"Topic {topic} not found")
            for p in md.partitions.values():
                out[TopicPartition(topic, int(p.id))] = [int(b) for b in p.replicas]
        return out

    def alter_configs(self, resources: list[ConfigResource]) -> None:
        """IncrementalAlterConfigs; librdkafka takes one BROKER resource per call."""
        topics = [r for r in resources if r.restype != ResourceType.BROKER]
        calls = [[r] for r in resources if r.restype == ResourceType.BROKER] + ([topics] if topics else [])
        for call in calls:
            for future in self.admin.incremental_alter_configs(call).values():
                wait(future, TIMEOUT_S, "IncrementalAlterConfigs")


def _entries(values: dict[str, str | None]) -> list[ConfigEntry]:
    return [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET if v is not None
                        else AlterConfigOpType.DELETE) for k, v in values.items()]  # fmt: skip


def generate(cluster: Cluster, topics_json: str, broker_list: str | None) -> None:
    if not broker_list:
        raise CliError("--generate needs --broker-list")
    try:
        brokers = sorted({int(b) for b in broker_list.split(",") if b.strip()})
    except ValueError:
        raise CliError(f"invalid --broker-list {broker_list!r}") from None
    known = set(cluster.brokers())
    unknown = [b for b in brokers if b not in known]
    if unknown:
        raise ReassignError(f"Unknown broker id {unknown[0]}")
    topics = parse_topics_to_move(topics_json)
    current = cluster.assignment(set(topics))
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in dict.fromkeys(topics):
        parts = sorted(tp for tp in current if tp.topic == topic)
        rf = len(current[parts[0]])
        for p, replicas in assign_replicas(brokers, len(parts), rf).items():
            proposed[TopicPartition(topic, p)] = replicas
    print(f"Current partition replica assignment\n{format_reassignment(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_reassignment(proposed)}")


def execute(cluster: Cluster, text: str, throttle: int, log_dir_throttle: int, additional: bool) -> None:
    parts = dict(parse_reassignment(text))
    running = cluster.reassignments.list()
    if running and not additional:
        raise ReassignError(EXISTING)
    known = set(cluster.brokers())
    unknown = sorted({b for r in parts.values() for b in r} - known)
    if unknown:
        raise ReassignError(f"Unknown broker id {unknown[0]}")
    current = cluster.assignment({tp.topic for tp in parts})
    missing = [tp for tp in parts if tp not in current]
    if missing:
        raise ReassignError(f"Unable to find partition: {name(missing[0])}")
    print("Current partition replica assignment\n\n"
          f"{format_reassignment({tp: current[tp] for tp in parts})}\n\n"
          "Save this to use as the --reassignment-json-file option during rollback")  # fmt: skip
    if throttle >= 0 or log_dir_throttle >= 0:
        print(VERIFY_WARNING)
    if throttle >= 0:
        leaders, followers, brokers = throttled_replicas(running, parts, current)
        cluster.alter_configs([
            ConfigResource(ResourceType.TOPIC, t, incremental_configs=_entries(
                {LEADER_THROTTLED_REPLICAS: leaders[t], FOLLOWER_THROTTLED_REPLICAS: followers[t] or None}))
            for t in sorted(leaders)
        ])  # fmt: skip
        cluster.alter_configs([
            ConfigResource(ResourceType.BROKER, str(b), incremental_configs=_entries(
                {LEADER_THROTTLED_RATE: str(throttle), FOLLOWER_THROTTLED_RATE: str(throttle)}))
            for b in sorted(brokers)
        ])  # fmt: skip
        print(f"The inter-broker throttle limit was set to {throttle} B/s")
    if log_dir_throttle >= 0:  # no log dir moves here: no broker to set it on, as Kafka's tool
        print(f"The replica-alter-dir throttle limit was set to {log_dir_throttle} B/s")
    errors = {tp: e for tp, e in cluster.reassignments.alter(parts).items() if e is not None}
    if errors:
        lines = "\n".join(f"{name(tp)}: {errors[tp]}" for tp in sorted(errors))
        raise ReassignError(f"Error reassigning partition(s):\n{lines}")
    s = "" if len(parts) == 1 else "s"
    print(f"Successfully started partition reassignment{s} for {','.join(name(tp) for tp in sorted(parts))}")


def clear_throttles(cluster: Cluster, parts: dict[TopicPartition, list[int]]) -> None:
    """Kafka's clearAllThrottles: every live broker's and every target broker's rates, and
    the topics' throttled-replica lists."""
    brokers = sorted(set(cluster.brokers()) | {b for r in parts.values() for b in r})
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          f"{','.join(map(str, brokers))}")  # fmt: skip
    cluster.alter_configs([
        ConfigResource(ResourceType.BROKER, str(b), incremental_configs=_entries(
            dict.fromkeys(CLEARED_BROKER_THROTTLES)))
        for b in brokers
    ])  # fmt: skip
    topics = sorted({tp.topic for tp in parts})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")
    cluster.alter_configs([
        ConfigResource(ResourceType.TOPIC, t, incremental_configs=_entries(dict.fromkeys(TOPIC_THROTTLES)))
        for t in topics
    ])  # fmt: skip


def verify(cluster: Cluster, text: str, preserve_throttles: bool) -> bool:
    """True when every partition is done (Kafka's verifyAssignment)."""
    parts = dict(parse_reassignment(text))
    running = cluster.reassignments.list()
    current = cluster.assignment({tp.topic for tp in parts if tp not in running})
    lines = ["Status of partition reassignment:"]
    done = True
    for tp in sorted(parts):
        if tp in running:
            done = False
            lines.append(f"Reassignment of partition {name(tp)} is still in progress.")
        elif current.get(tp) == parts[tp]:
            lines.append(f"Reassignment of partition {name(tp)} is completed.")
        else:
            replicas = ",".join(map(str, current.get(tp, [])))
            lines.append(f"There is no active reassignment of partition {name(tp)}, but replica set is "
                         f"{replicas} rather than {','.join(map(str, parts[tp]))}.")  # fmt: skip
    print("\n".join(lines))
    if not running and not preserve_throttles:
        clear_throttles(cluster, parts)
    return done


def cancel(cluster: Cluster, text: str, preserve_throttles: bool) -> None:
    parts = dict(parse_reassignment(text))
    moving = sorted(cluster.reassignments.list(list(parts)))
    if moving:
        errors = {tp: e for tp, e in cluster.reassignments.alter(dict.fromkeys(moving)).items() if e}
        if errors:
            lines = "\n".join(f"{name(tp)}: {errors[tp]}" for tp in sorted(errors))
            raise ReassignError(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} "
                                f"for:\n{lines}")  # fmt: skip
        s = "" if len(moving) == 1 else "s"
        print(f"Successfully cancelled partition reassignment{s} for: {','.join(name(tp) for tp in moving)}")
    else:
        print("None of the specified partition reassignments are active.")
    print("None of the specified partition moves are active.")
    if not preserve_throttles:
        clear_throttles(cluster, parts)


def list_reassignments(cluster: Cluster) -> None:
    running = cluster.reassignments.list()
    if not running:
        print("No partition reassignments found.")
        return
    lines = ["Current partition reassignments:"]
    for tp in sorted(running):
        r = running[tp]
        line = f"{name(tp)}: replicas: {','.join(map(str, r.replicas))}."
        if r.adding:
            line += f" adding: {','.join(map(str, r.adding))}."
        if r.removing:
            line += f" removing: {','.join(map(str, r.removing))}."
        lines.append(line)
    print("\n".join(lines))


def run(args: argparse.Namespace) -> int:
    cluster = Cluster(args)
    try:
        return _run(cluster, args)
    except ReassignError as exc:
        print(str(exc))
        return 1
    finally:
        cluster.close()


def _run(cluster: Cluster, args: argparse.Namespace) -> int:
    if args.generate:
        generate(cluster, _read(args.topics_to_move_json_file, "--topics-to-move-json-file"), args.broker_list)
    elif args.execute:
        execute(cluster, _read(args.reassignment_json_file, "--reassignment-json-file"), args.throttle,
                args.replica_alter_log_dirs_throttle, args.additional)  # fmt: skip
    elif args.verify:
        verify(cluster, _read(args.reassignment_json_file, "--reassignment-json-file"), args.preserve_throttles)
    elif args.cancel:
        cancel(cluster, _read(args.reassignment_json_file, "--reassignment-json-file"), args.preserve_throttles)
    else:
        list_reassignments(cluster)
    return 0
