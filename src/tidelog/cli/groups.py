"""``tidelog groups``: list, describe, reset offsets of, and delete consumer groups over the
wire (the options of Kafka's kafka-consumer-groups.sh); with ``--type share``, share groups
(kafka-share-groups.sh's options, share_groups.py). ``--list --type`` and ``--list --state``
print Kafka 4.x's GROUP / TYPE / STATE table over groups of every type.

``--describe`` shows, per partition, the committed offset, the log end, the lag in messages
and the lag in time (the age of the oldest record not yet consumed). ``--reset-offsets``
prints the plan; it only commits with ``--execute`` (``--dry-run`` is the default, as in
Kafka) and only for an inactive group.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tidelog.cli.client_config import CliError, add_connection_args, protocol_client
from tidelog.cli.group_admin import GroupAdmin, GroupInfo, Member, TopicPartition
from tidelog.cli.share_groups import SHARE, list_groups_of_types, run_share, share_hint
from tidelog.cli.times import parse_datetime_ms, parse_duration_ms

INACTIVE_STATES = ("Empty", "Dead")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "groups", help="list, describe, reset offsets of or delete consumer and share groups"
    )
    add_connection_args(p)
    op = p.add_mutually_exclusive_group(required=True)
    for name in ("list", "describe", "reset-offsets", "delete", "delete-offsets"):
        op.add_argument(f"--{name}", action="store_true")
    p.add_argument("--group", action="append", default=[], help="group id (repeatable)")
    p.add_argument("--all-groups", action="store_true")
    p.add_argument("--topic", action="append", default=[], help="TOPIC or TOPIC:P1,P2")
    p.add_argument("--all-topics", action="store_true")
    p.add_argument("--members", action="store_true", help="describe members")
    p.add_argument("--offsets", action="store_true",
                   help="describe offsets and lag (what --describe shows by default)")
    p.add_argument("--state", nargs="?", const="", default=None, metavar="STATE[,STATE]",
                   help="describe the group's state; with --list, show states (and list "
                        "only groups in the given states)")
    p.add_argument("--type", nargs="?", const="", default=None, metavar="TYPE[,TYPE]",
                   help="classic, consumer or share; with --list, show types (and list only "
                        "the given types); share: act on share groups")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--to-earliest", action="store_true")
    how.add_argument("--to-latest", action="store_true")
    how.add_argument("--to-current", action="store_true")
    how.add_argument("--to-offset", type=int)
    how.add_argument("--shift-by", type=int)
    how.add_argument("--to-datetime", help="YYYY-MM-DDTHH:mm:SS.sss[+HH:MM|Z]")
    how.add_argument("--by-duration", help="ISO 8601 duration, e.g. PT10M or P1DT2H")
    p.add_argument("--timeout", type=int, default=5000, metavar="MS",
                   help="how long to wait for the cluster to answer (default 5000, as Kafka)")
    run_mode = p.add_mutually_exclusive_group()
    run_mode.add_argument("--dry-run", action="store_true")
    run_mode.add_argument("--execute", action="store_true")
    p.set_defaults(func=run)


# ---------------------------------------------------------------------------- wire helpers


def list_groups(client: GroupAdmin) -> list[tuple[str, str, str]]:
    return client.list_groups()


def describe_group(client: GroupAdmin, group: str) -> GroupInfo:
    return client.describe_group(group)


def committed_offsets(client: GroupAdmin, group: str) -> dict[TopicPartition, int]:
    return client.committed_offsets(group)


# ---------------------------------------------------------------------------- describe


@dataclass
class PartitionLag:
    tp: TopicPartition
    current: int | None
    log_end: int
    lag: int | None
    lag_ms: int | None
    member: Member | None


def partition_lags(
    client: GroupAdmin, info: GroupInfo, committed: dict[TopicPartition, int]
) -> list[PartitionLag]:
    owner = {tp: m for m in info.members for tp in m.partitions}
    tps = sorted(set(committed) | set(owner))
    ends = client.latest_offsets(tps) if tps else {}
    behind = {tp: committed[tp] for tp in tps if tp in committed and ends[tp] > committed[tp]}
    # lag in time: the age of the oldest record not yet consumed
    first_ts = client.first_timestamps(behind)
    now = int(time.time() * 1000)
    out = []
    for tp in tps:
        cur = committed.get(tp)
        end = ends.get(tp, -1)
        lag = None if cur is None else max(end - cur, 0)
        age = max(now - first_ts[tp], 0) if tp in first_ts else (0 if lag == 0 else None)
        out.append(PartitionLag(tp, cur, end, lag, age, owner.get(tp)))
    return out


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def _dash(v: object) -> str:
    return "-" if v is None else str(v)


def _describe_state(group: str, info: GroupInfo) -> str:
    head = ["GROUP", "PROTOCOL-TYPE", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    row = [
        group,
        info.protocol_type or "-",
        info.protocol or "-",
        info.state,
        str(len(info.members)),
    ]
    return _table([head, row])


def _describe_members(group: str, info: GroupInfo) -> str:
    rows = [
        [
            "GROUP",
            "CONSUMER-ID",
            "GROUP-INSTANCE-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
            "ASSIGNMENT",
        ]
    ]
    for m in info.members:
        assignment = ",".join(f"{tp.topic}:{tp.partition}" for tp in sorted(m.partitions)) or "-"
        rows.append(
            [
                group,
                m.member_id,
                _dash(m.instance_id),
                m.host,
                m.client_id,
                str(len(m.partitions)),
                assignment,
            ]
        )
    return _table(rows)


def _describe_offsets(client: GroupAdmin, group: str, info: GroupInfo) -> str:
    lags = partition_lags(client, info, committed_offsets(client, group))
    rows = [
        [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "LAG-MS",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
    ]
    for pl in lags:
        m = pl.member
        rows.append(
            [
                group,
                pl.tp.topic,
                str(pl.tp.partition),
                _dash(pl.current),
                str(pl.log_end),
                _dash(pl.lag),
                _dash(pl.lag_ms),
                m.member_id if m else "-",
                m.host if m else "-",
                m.client_id if m else "-",
            ]
        )
    header = "" if info.members else f"Consumer group '{group}' has no active members.\n\n"
    return header + _table(rows)


def describe(client: GroupAdmin, group: str, *, members: bool, state: bool) -> str:
    """kafka-consumer-groups.sh --describe [--members | --state]."""
    info = describe_group(client, group)
    if state:
        return _describe_state(group, info)
    if members:
        return _describe_members(group, info)
    if info.state == "Dead":
        return f"Consumer group '{group}' does not exist."
    return _describe_offsets(client, group, info)


# ---------------------------------------------------------------------------- reset


def target_partitions(
    client: GroupAdmin, args: argparse.Namespace, committed: dict[TopicPartition, int]
) -> list[TopicPartition]:
    if args.all_topics:
        topics = sorted({tp.topic for tp in committed})
        return [TopicPartition(t, p) for t in topics for p in client.partitions_for(t)]
    out: list[TopicPartition] = []
    for spec in args.topic:
        topic, _, parts = spec.partition(":")
        ps = [int(p) for p in parts.split(",") if p] if parts else client.partitions_for(topic)
        out.extend(TopicPartition(topic, p) for p in ps)
    if not out:
        raise ValueError("one of --topic or --all-topics is required")
    return out


def reset_plan(
    client: GroupAdmin,
    args: argparse.Namespace,
    tps: list[TopicPartition],
    committed: dict[TopicPartition, int],
    now_ms: int,
) -> dict[TopicPartition, int]:
    earliest = client.earliest_offsets(tps)
    latest = client.latest_offsets(tps)

    def clamp(tp: TopicPartition, o: int) -> int:
        return min(max(o, earliest[tp]), latest[tp])

    if args.to_earliest:
        return dict(earliest)
    if args.to_latest:
        return dict(latest)
    if args.to_offset is not None:
        return {tp: clamp(tp, args.to_offset) for tp in tps}
    if args.shift_by is not None:
        return {tp: clamp(tp, committed.get(tp, latest[tp]) + args.shift_by) for tp in tps}
    if args.to_current:
        return {tp: committed.get(tp, latest[tp]) for tp in tps}
    if args.to_datetime or args.by_duration:
        ts = (
            parse_datetime_ms(args.to_datetime)
            if args.to_datetime
            else now_ms - parse_duration_ms(args.by_duration)
        )
        found = client.offsets_for_times(dict.fromkeys(tps, ts))
        return {tp: latest[tp] if found.get(tp, -1) < 0 else found[tp] for tp in tps}
    raise ValueError(
        "choose one of --to-earliest/--to-latest/--to-offset/--shift-by/"
        "--to-current/--to-datetime/--by-duration"
    )


def reset_offsets(client: GroupAdmin, group: str, args: argparse.Namespace) -> str:
    committed = committed_offsets(client, group)
    plan = reset_plan(
        client, args, target_partitions(client, args, committed), committed, int(time.time() * 1000)
    )
    if args.execute:
        state = describe_group(client, group).state
        if state not in INACTIVE_STATES:
            raise ValueError(
                f"Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {state}."
            )
        client.commit_offsets(group, plan)
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    rows += [[group, tp.topic, str(tp.partition), str(o)] for tp, o in sorted(plan.items())]
    return _table(rows)


# ---------------------------------------------------------------------------- delete


def delete_groups(client: GroupAdmin, groups: Iterable[str]) -> tuple[list[str], bool]:
    """A line per group, and whether every deletion succeeded (a refused one, such as
    GROUP_ID_NOT_FOUND or NON_EMPTY_GROUP, makes the command exit 1)."""
    results = client.delete_groups(list(groups))
    lines = [f"Deletion of group '{group}': " + ("Successful" if err is None else err)
             for group, err in results]
    return lines, all(err is None for _, err in results)


def delete_offsets(args: argparse.Namespace, group: str, tps: list[TopicPartition]) -> str:
    """OffsetDelete, which confluent-kafka's AdminClient does not offer: tidelog's own
    protocol client sends it."""
    with protocol_client(args) as client:
        return _delete_offsets(client, group, tps)


def _delete_offsets(client: Any, group: str, tps: list[TopicPartition]) -> str:
    topics: dict[str, list[dict[str, int]]] = {}
    for tp in tps:
        topics.setdefault(tp.topic, []).append({"partition_index": tp.partition})
    body = {
        "group_id": group,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
    resp = client.find_coordinator(group).call(47, 0, body)  # OffsetDelete v0
    if int(resp.error_code) != 0:
        return f"Error: {_error_name(int(resp.error_code))}"
    rows = [["TOPIC", "PARTITION", "STATUS"]]
    for t in resp.topics:
        for p in t.partitions:
            code = int(p.error_code)
            rows.append(
                [t.name, str(p.partition_index), "Successful" if code == 0 else _error_name(code)]
            )
    return _table(rows)


def _error_name(code: int) -> str:
    from tidelog.protocol.errors import ErrorCode

    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


# ---------------------------------------------------------------------------- main


def _groups(client: GroupAdmin, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g for g, _, _ in list_groups(client)]
    if not args.group:
        raise ValueError("--group or --all-groups is required")
    return list(args.group)


def _is_missing(client: GroupAdmin, group: str) -> bool:
    """Dead with no committed offsets: the broker knows nothing of the group."""
    return describe_group(client, group).state == "Dead" and not committed_offsets(client, group)


def _wants_share(args: argparse.Namespace) -> bool:
    types = {t.strip().lower() for t in (args.type or "").split(",") if t.strip()}
    if SHARE in types and len(types) > 1 and not args.list:
        raise ValueError("--type share acts on share groups only: give it alone")
    return SHARE in types


def run(args: argparse.Namespace) -> int:
    try:
        if args.list and (args.type is not None or args.state is not None):
            print(list_groups_of_types(args))
            return 0
        if _wants_share(args):
            return run_share(args)
    except (CliError, ValueError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    try:
        with GroupAdmin(args) as client:
            if args.list:
                for g, _, _ in list_groups(client):
                    print(g)
            elif args.describe:
                missing = [g for g in _groups(client, args) if _is_missing(client, g)]
                if missing:
                    # kafka-consumer-groups.sh's message; exit 1 so scripts can tell
                    print(f"Error: Consumer group '{missing[0]}' does not exist."
                          + share_hint(args, missing[0]), file=sys.stderr)
                    return 1
                print(
                    "\n\n".join(
                        describe(client, g, members=args.members,
                                 state=args.state is not None)
                        for g in _groups(client, args)
                    )
                )
            elif args.reset_offsets:
                if not args.execute and not args.dry_run:
                    print(
                        "WARN: No action will be performed as the --execute option is missing. "
                        "Use --dry-run or --execute.",
                        file=sys.stderr,
                    )
                print("\n\n".join(reset_offsets(client, g, args) for g in _groups(client, args)))
            elif args.delete:
                lines, deleted = delete_groups(client, _groups(client, args))
                print("\n".join(lines))
                if not deleted:
                    return 1
            elif args.delete_offsets:
                committed = committed_offsets(client, args.group[0]) if args.group else {}
                tps = target_partitions(client, args, committed)
                print(delete_offsets(args, args.group[0], tps))
    except (CliError, ValueError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return 0
