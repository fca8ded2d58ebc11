"""``tidelog topics``: create / list / describe / delete / alter topics, the counterpart of
kafka-topics.sh (and of kafka-configs.sh for topic configs), on librdkafka's AdminClient.

Output and messages are TopicCommand's: ``Created topic X.``, the describe lines with TopicId,
and ``Error while executing topic command : ...`` (on stderr here) with exit code 1.
"""

from __future__ import annotations

import argparse
import base64
import time
from typing import TYPE_CHECKING, Any

from tidelog.cli.client_config import (
    CliError,
    add_connection_args,
    client_config,
    make_client,
    pairs,
)

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

TIMEOUT_S = 60  # Kafka admin clients: default.api.timeout.ms
# ListOffsets timestamps (Kafka's ListOffsetsRequest): KIP-405's and KIP-1005's
EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP = -2, -4, -5


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("topics", help="create, list, describe, delete or alter topics")
    add_connection_args(p)
    g = p.add_mutually_exclusive_group(required=True)
    for op in ("create", "list", "describe", "delete", "alter"):
        g.add_argument(f"--{op}", action="store_true")
    p.add_argument("--topic", help="topic name")
    p.add_argument("--partitions", type=int, help="partition count (create / alter)")
    p.add_argument("--replication-factor", type=int, default=-1)
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="K=V",
        help="topic config (create), or config to set (alter)",
    )
    p.add_argument("--delete-config", action="append", default=[], metavar="K")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="describe only partitions whose ISR is smaller than their replica set",
    )
    p.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="describe only partitions whose leader is missing or not a live broker",
    )
    p.add_argument(
        "--under-min-isr-partitions",
        action="store_true",
        help="describe only partitions without a leader or whose ISR is below min.insync.replicas",
    )
    p.add_argument(
        "--at-min-isr-partitions",
        action="store_true",
        help="describe only partitions whose ISR is exactly min.insync.replicas",
    )
    p.add_argument(
        "--iceberg-config",
        metavar="FILE",
        help="the broker's properties file (its iceberg.* settings and log.dirs): --describe "
        "then shows the Iceberg table of a topic in Iceberg mode",
    )
    p.set_defaults(func=run)


class TopicCommandError(CliError):
    def __init__(self, message: str) -> None:
        super().__init__(f"Error while executing topic command : {message}")


def _result(future: Any, doing: str | None = None) -> Any:
    """A future's result, with a Kafka error turned into TopicCommand's one-line message;
    with ``doing``, a progress line counts the seconds while the broker works."""
    from concurrent.futures import TimeoutError as Pending

    from confluent_kafka import KafkaException

    from tidelog.cli.progress import Progress

    try:
        with Progress(doing or "", unit="s elapsed") as progress:
            progress.enabled &= doing is not None
            start = time.monotonic()
            while True:
                try:
                    return future.result(0.5)
                except Pending:
                    if time.monotonic() - start > TIMEOUT_S:
                        raise TopicCommandError(f"{doing or 'request'}: timed out") from None
                    progress.update(int(time.monotonic() - start))
    except KafkaException as exc:
        err = exc.args[0]
        raise TopicCommandError(f"{err.name()}: {err.str()}") from None


def uuid_text(topic_id: Any) -> str:
    """Kafka prints a Uuid as URL-safe base64 without padding (Uuid.toString)."""
    raw = base64.b64decode(str(topic_id) + "==")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


_REPORTS = ("under_replicated_partitions", "unavailable_partitions",
            "under_min_isr_partitions", "at_min_isr_partitions")


def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    """Kafka's TopicCommand --describe: the topic line (unless a report option filters the
    partitions), then one line per partition the report options select."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import ConfigResource

    listed = admin.list_topics(timeout=TIMEOUT_S)
    names = [args.topic] if args.topic else sorted(listed.topics)
    live = set(listed.brokers)
    filtered = any(getattr(args, r) for r in _REPORTS)
    for name, future in admin.describe_topics(TopicCollection(names)).items():
        try:
            desc = _result(future)
        except TopicCommandError as exc:
            if "UNKNOWN_TOPIC" in str(exc):
                raise TopicCommandError(f"Topic '{name}' does not exist as expected") from None
            raise
        [cfg] = admin.describe_configs([ConfigResource("topic", name)]).values()
        entries = _result(cfg)
        if not filtered:
            configs = ",".join(f"{k}={v.value}" for k, v in entries.items() if not v.is_default)
            print(
                f"Topic: {name}\tTopicId: {uuid_text(desc.topic_id)}\t"
                f"PartitionCount: {len(desc.partitions)}\t"
                f"ReplicationFactor: {len(desc.partitions[0].replicas) if desc.partitions else 0}"
                f"\tConfigs: {configs}"
            )
        min_isr = int(entries["min.insync.replicas"].value) if "min.insync.replicas" in entries \
            else 1
        tiered = _tiered_columns(args, name, [p.id for p in desc.partitions], entries)
        table = _iceberg_columns(admin, args, name, [p.id for p in desc.partitions], entries,
                                 show_table=not filtered)
        tiered = {p.id: tiered.get(p.id, "") + table.get(p.id, "") for p in desc.partitions}
        for part in desc.partitions:
            if filtered and not _reported(args, part, live, min_isr):
                continue
            replicas = [n.id for n in part.replicas]
            isr = [n.id for n in part.isr]
            leader = part.leader.id if part.leader is not None else "none"
            print(
                f"\tTopic: {name}\tPartition: {part.id}\tLeader: {leader}\t"
                f"Replicas: {','.join(map(str, replicas))}\tIsr: {','.join(map(str, isr))}\t"
                "Elr: \tLastKnownElr: " + tiered.get(part.id, "")
            )
    return 0


def _tiered_columns(args: argparse.Namespace, name: str, partitions: list[int],
                    entries: dict[str, Any]) -> dict[int, str]:
    """For a topic with ``remote.storage.enable``, the tiered offsets of each partition its
    leader answers, as extra describe columns: the log start (the remote log start),
    EARLIEST_LOCAL (-4, the local log start) and LATEST_TIERED (-5, the highest offset in
    remote storage, -1 while nothing is). librdkafka's OffsetSpec has neither -4 nor -5,
    so tidelog's own client asks (ListOffsets v9)."""
    enabled = entries.get("remote.storage.enable")
    if enabled is None or str(enabled.value).lower() != "true" or not partitions:
        return {}
    from tidelog.client.conn import KafkaClientError, TopicPartition
    from tidelog.client.kafka_client import KafkaClient
    from tidelog.client.security import ClientSecurity

    conf = client_config(args, {}, {})
    props = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    tps = [TopicPartition(name, p) for p in partitions]
    answers: list[dict[TopicPartition, tuple[int, int]]] = []
    try:
        with KafkaClient(args.bootstrap_server, security=ClientSecurity.from_properties(props),
                         request_timeout_ms=TIMEOUT_S * 1000) as client:
            for spec in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP):
                answers.append(client.list_offsets(dict.fromkeys(tps, spec)))
    except KafkaClientError as exc:
        raise TopicCommandError(f"ListOffsets {name}: {exc}") from None
    start, local, tiered = answers
    return {
        tp.partition: f"\tRemoteLogStartOffset: {start[tp][0]}\t"
        f"LocalLogStartOffset: {local[tp][0]}\tHighestTieredOffset: {tiered[tp][0]}"
        for tp in tps
    }


def _iceberg_columns(admin: AdminClient, args: argparse.Namespace, name: str, partitions: list[int],
                     entries: dict[str, Any], *, show_table: bool) -> dict[int, str]:
    """For a topic in Iceberg mode, with ``--iceberg-config``: a line naming its table and
    current snapshot, and per partition the next offset the table holds and how many
    committed records (up to the last stable offset) it still lacks."""
    import importlib

    from tidelog.config.iceberg_config import DISABLED, MODE, canonical_topic_configs

    mode = canonical_topic_configs({k: str(v.value) for k, v in entries.items()}).get(
        MODE, DISABLED)
    if mode == DISABLED or not args.iceberg_config:
        return {}
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    from tidelog.config.properties import read_properties_file

    describe = importlib.import_module("tidelog.iceberg.describe")
    try:
        table = describe.describe_table(read_properties_file(args.iceberg_config), name)
    except OSError as exc:
        raise TopicCommandError(f"--iceberg-config: {exc}") from None
    if show_table:
        snapshot = "none" if table.snapshot_id is None else (
            f"{table.snapshot_id}\tSnapshotTime: {_iso(table.snapshot_ms)}")
        print(f"\tIcebergTable: {table.table}\tMode: {mode}\tSnapshotId: {snapshot}")
    ends = admin.list_offsets({TopicPartition(name, p): OffsetSpec.latest() for p in partitions},
                              isolation_level=IsolationLevel.READ_COMMITTED)
    out = {}
    for tp, future in ends.items():
        end = _result(future).offset
        committed = table.committed.get(tp.partition, 0)
        out[tp.partition] = (f"\tIcebergCommittedOffset: {committed}\t"
                             f"IcebergLag: {max(0, end - committed)}")
    return out


def _iso(ms: int | None) -> str:
    import datetime

    if ms is None:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(
        timespec="milliseconds")


def _reported(args: argparse.Namespace, part: Any, live: set[int], min_isr: int) -> bool:
    """Whether a report option selects ``part`` (TopicCommand's PartitionDescription)."""
    leader = part.leader.id if part.leader is not None else None
    isr = len(part.isr)
    return bool(
        (args.under_replicated_partitions and len(part.replicas) > isr)
        or (args.unavailable_partitions and (leader is None or leader not in live))
        or (args.under_min_isr_partitions and (leader is None or isr < min_isr))
        or (args.at_min_isr_partitions and isr == min_isr)
    )


def _create(admin: AdminClient, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import NewTopic

    if args.partitions is not None and args.partitions < 1:
        raise TopicCommandError("The partitions must be greater than 0")
    if args.replication_factor != -1 and args.replication_factor < 1:
        raise TopicCommandError("The replication factor must be greater than 0")
    topic = NewTopic(
        args.topic,
        args.partitions if args.partitions is not None else -1,
        args.replication_factor,
        config=pairs(args.config, "--config"),
    )
    try:
        future = admin.create_topics([topic], request_timeout=TIMEOUT_S)[args.topic]
        _result(future, f"Creating topic {args.topic}")
    except TopicCommandError as exc:
        if args.if_not_exists and "TOPIC_ALREADY_EXISTS" in str(exc):
            return 0
        raise
    print(f"Created topic {args.topic}.")
    return 0


def _delete(admin: AdminClient, args: argparse.Namespace) -> int:
    try:
        _result(admin.delete_topics([args.topic], request_timeout=TIMEOUT_S)[args.topic])
    except TopicCommandError as exc:
        if args.if_exists and "UNKNOWN_TOPIC" in str(exc):
            return 0
        raise
    print(f"Deleted topic {args.topic}.")
    return 0


def _alter(admin: AdminClient, args: argparse.Namespace) -> int:
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
    )

    if args.partitions is not None:
        new = NewPartitions(args.topic, args.partitions)
        future = admin.create_partitions([new], request_timeout=TIMEOUT_S)[args.topic]
        _result(future, f"Creating partitions of {args.topic}")
    ops = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
        for k, v in pairs(args.config, "--config").items()
    ]
    ops += [
        ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
        for k in args.delete_config
    ]
    if ops:
        res = ConfigResource("topic", args.topic, incremental_configs=ops)
        [future] = admin.incremental_alter_configs([res]).values()
        _result(future)
    print(f"Altered topic {args.topic}.")
    return 0


def run(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import AdminClient

    # describing or altering a missing topic must not create it (librdkafka's Metadata asks
    # the broker to auto-create for producer-type handles, AdminClient included)
    admin = make_client(AdminClient, client_config(args, {"allow.auto.create.topics": False}, {}))
    if args.list:
        for name in sorted(admin.list_topics(timeout=TIMEOUT_S).topics):
            print(name)
        return 0
    if args.describe:
        return _describe(admin, args)
    if not args.topic:
        raise TopicCommandError("--topic is required")
    if args.create:
        return _create(admin, args)
    if args.delete:
        return _delete(admin, args)
    return _alter(admin, args)
