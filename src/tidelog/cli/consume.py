"""``tidelog consume``: print records of a topic (kafka-console-consumer.sh): from the
beginning, an offset or a timestamp, one partition or all; exits after ``--max-messages``
or when no record arrived for ``--timeout-ms``. With ``--group`` it resumes from the group's
committed offsets and commits its position after every fetch round (a standalone consumer:
all partitions, no group membership or rebalancing)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("consume", help="print records of a topic")
    p.add_argument("--bootstrap-server", default="localhost:9092")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int)
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true")
    start.add_argument("--offset", type=int, help="start offset (needs --partition)")
    start.add_argument("--timestamp", type=int, help="start at the first record at/after this ms")
    p.add_argument("--group", help="resume from / commit to this consumer group's offsets")
    p.add_argument("--max-messages", type=int)
    p.add_argument("--timeout-ms", type=int, default=None, help="exit after this long idle")
    p.add_argument("--print-key", action="store_true")
    p.add_argument("--print-offset", action="store_true")
    p.add_argument("--print-timestamp", action="store_true")
    p.add_argument("--print-headers", action="store_true")
    p.add_argument("--key-separator", default="\t")
    p.set_defaults(func=run)


def _start_offsets(client: Any, args: argparse.Namespace, tps: list[Any]) -> dict[Any, int]:
    if args.group and args.offset is None and args.timestamp is None:
        committed = {tp: o for tp, o in client.committed_offsets(args.group, tps).items() if o >= 0}
        if len(committed) == len(tps):
            return committed
        rest = [tp for tp in tps if tp not in committed]
        fallback = (
            client.earliest_offsets(rest) if args.from_beginning else client.latest_offsets(rest)
        )
        return {**fallback, **committed}
    if args.offset is not None:
        if args.partition is None:
            raise ValueError("--offset needs --partition")
        return {tp: args.offset for tp in tps}
    if args.from_beginning:
        return dict(client.earliest_offsets(tps))
    latest = client.latest_offsets(tps)
    if args.timestamp is not None:
        found = client.offsets_for_times(dict.fromkeys(tps, args.timestamp))
        return {tp: (o if o is not None else latest[tp]) for tp, o in found.items()}
    return dict(latest)


def _fmt(b: bytes | None) -> str:
    return "null" if b is None else b.decode("utf-8", "replace")


def _print(args: argparse.Namespace, tp: Any, rec: Any) -> None:
    parts = []
    if args.print_offset:
        parts.append(f"{tp.partition}:{rec.offset}")
    if args.print_timestamp:
        parts.append(f"CreateTime:{rec.timestamp}")
    if args.print_headers:
        hs = ",".join(f"{k}:{_fmt(v)}" for k, v in rec.headers)
        parts.append(hs or "NO_HEADERS")
    if args.print_key:
        parts.append(_fmt(rec.key))
    parts.append(_fmt(rec.value))
    sys.stdout.write(args.key_separator.join(parts) + "\n")


def _poll(client: Any, args: argparse.Namespace, positions: dict[Any, int]) -> int:
    """One fetch round; returns how many records were printed (and advances positions)."""
    from tidelog.protocol.client import check

    printed = 0
    for tp, fetched in client.fetch(positions, max_wait_ms=200).items():
        check(fetched.error, f"Fetch {tp} at {positions[tp]}")
        for batch in fetched.batches():
            if batch.is_control:
                positions[tp] = batch.next_offset
                continue
            for rec in batch.iter_records():
                if rec.offset < positions[tp]:
                    continue
                _print(args, tp, rec)
                printed += 1
                positions[tp] = rec.offset + 1
                if args.max_messages is not None and printed >= args.max_messages:
                    return printed
            positions[tp] = max(positions[tp], batch.next_offset)
    return printed


def run(args: argparse.Namespace) -> int:
    from tidelog.protocol.client import KafkaClient, KafkaClientError, TopicPartition

    try:
        with KafkaClient(args.bootstrap_server) as client:
            parts = (
                [args.partition]
                if args.partition is not None
                else client.partitions_for(args.topic)
            )
            tps = [TopicPartition(args.topic, p) for p in parts]
            positions = _start_offsets(client, args, tps)
            total = 0
            idle_since = time.monotonic()
            while args.max_messages is None or total < args.max_messages:
                n = _poll(client, args, positions)
                total += n
                if args.group and n:
                    client.commit_offsets(args.group, positions)
                sys.stdout.flush()
                if n:
                    idle_since = time.monotonic()
                elif (
                    args.timeout_ms is not None
                    and (time.monotonic() - idle_since) * 1000 >= args.timeout_ms
                ):
                    break
    except (KafkaClientError, ValueError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0
