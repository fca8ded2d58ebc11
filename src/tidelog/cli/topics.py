"""``tidelog topics``: create / list / describe / delete / alter topics over the protocol
(the options of Kafka's kafka-topics.sh and kafka-configs.sh, in one command)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

DESCRIBE_CONFIGS, INCREMENTAL_ALTER, CREATE_PARTITIONS = 32, 44, 37
TOPIC_RESOURCE = 2


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("topics", help="create, list, describe, delete or alter topics")
    p.add_argument("--bootstrap-server", default="localhost:9092")
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
    p.set_defaults(func=run)


def _pairs(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"expected K=V, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _call(client: Any, api_key: int, version: int, body: dict[str, Any]) -> Any:
    return client.any_connection().call(api_key, version, body)


def _describe(client: Any, topic: str | None) -> int:
    md = client.metadata(None)
    topics = {t: sorted(ps) for t, ps in md.topics.items()}
    names = [topic] if topic else sorted(topics)
    for name in names:
        if name not in topics:
            print(f"Error: topic '{name}' does not exist", file=sys.stderr)
            return 1
        resp = _call(
            client,
            DESCRIBE_CONFIGS,
            1,
            {
                "resources": [
                    {
                        "resource_type": TOPIC_RESOURCE,
                        "resource_name": name,
                        "configuration_keys": None,
                    }
                ],
                "include_synonyms": False,
            },
        )
        res = resp.results[0]
        configs = ",".join(f"{c.name}={c.value}" for c in res.configs if int(c.config_source) == 1)
        print(
            f"Topic: {name}\tPartitionCount: {len(topics[name])}\tReplicationFactor: 1\tConfigs: {configs}"
        )
        for p in topics[name]:
            leader = md.topics[name][p].leader
            print(
                f"\tTopic: {name}\tPartition: {p}\tLeader: {leader}\tReplicas: {leader}\tIsr: {leader}"
            )
    return 0


def _alter(client: Any, args: argparse.Namespace) -> int:
    from tidelog.protocol.client import check

    if args.partitions is not None:
        resp = _call(
            client,
            CREATE_PARTITIONS,
            0,
            {
                "topics": [{"name": args.topic, "count": args.partitions, "assignments": None}],
                "timeout": 30000,
                "validate_only": False,
            },
        )
        r = resp.results[0]
        check(r.error_code, f"CreatePartitions {args.topic}", r.error_message)
    ops = [{"name": k, "config_operation": 0, "value": v} for k, v in _pairs(args.config).items()]
    ops += [{"name": k, "config_operation": 1, "value": None} for k in args.delete_config]
    if ops:
        resp = _call(
            client,
            INCREMENTAL_ALTER,
            0,
            {
                "resources": [
                    {"resource_type": TOPIC_RESOURCE, "resource_name": args.topic, "configs": ops}
                ],
                "validate_only": False,
            },
        )
        r = resp.responses[0]
        check(r.error_code, f"IncrementalAlterConfigs {args.topic}", r.error_message)
    print(f"Altered topic {args.topic}.")
    return 0


def _run(client: Any, args: argparse.Namespace) -> int:
    from tidelog.protocol.client import KafkaClientError

    if args.list:
        for name in client.list_topics():
            print(name)
        return 0
    if args.describe:
        return _describe(client, args.topic)
    if not args.topic:
        raise ValueError("--topic is required")
    if args.create:
        try:
            client.create_topics(
                {args.topic: args.partitions or -1},
                replication_factor=args.replication_factor,
                configs={args.topic: _pairs(args.config)},
            )
        except KafkaClientError as exc:
            if args.if_not_exists and "ALREADY_EXISTS" in str(exc).upper():
                return 0
            raise
        print(f"Created topic {args.topic}.")
        return 0
    if args.delete:
        try:
            client.delete_topics([args.topic])
        except KafkaClientError as exc:
            if args.if_exists and "UNKNOWN_TOPIC" in str(exc).upper():
                return 0
            raise
        print(f"Deleted topic {args.topic}.")
        return 0
    return _alter(client, args)


def run(args: argparse.Namespace) -> int:
    from tidelog.protocol.client import KafkaClient, KafkaClientError

    try:
        with KafkaClient(args.bootstrap_server, retries=1) as client:
            return _run(client, args)
    except (KafkaClientError, ValueError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
