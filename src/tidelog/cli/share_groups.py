"""``tidelog groups --type share``: share groups (KIP-932) with the options of Kafka's
kafka-share-groups.sh: ``--list``, ``--describe`` (offsets by default; ``--members``,
``--state``), ``--delete``, ``--reset-offsets`` (``--to-earliest`` / ``--to-latest`` /
``--to-datetime`` / ``--to-offset``, a plan unless ``--execute``) and ``--delete-offsets``.

confluent-kafka's AdminClient has no share group calls, so this speaks the share group APIs
(ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets) and ListGroups v5 through tidelog's own protocol client.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from tidelog.cli.client_config import CliError, client_config
from tidelog.cli.times import parse_datetime_ms
from tidelog.client.conn import KafkaClientError
from tidelog.client.kafka_client import KafkaClient, TopicPartition
from tidelog.client.security import ClientSecurity
from tidelog.protocol.errors import ErrorCode

SHARE = "share"
INACTIVE_STATES = ("Empty", "Dead")


@dataclass(frozen=True)
class ShareOffset:
    tp: TopicPartition
    leader_epoch: int
    start_offset: int
    lag: int


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def _dash(v: int) -> str:
    return "-" if v < 0 else str(v)


class ShareGroupAdmin:
    """The share group requests, each sent where Kafka's Admin client sends it."""

    def __init__(self, args: argparse.Namespace) -> None:
        conf = client_config(args, {}, {})
        props = {k: str(v) for k, v in conf.items() if k not in ("bootstrap.servers", "log_level", "logger")}
        self.client = KafkaClient(args.bootstrap_server,
                                  security=ClientSecurity.from_properties(props))

    def __enter__(self) -> ShareGroupAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def list_groups(self, types: list[str], states: list[str]) -> list[tuple[str, str, str]]:
        """(group, type, state) of every group on every broker (ListGroups v5)."""
        out: set[tuple[str, str, str]] = set()
        for address in self.client.metadata().brokers.values():
            resp = self.client.connection(address).call(
                16, 5, {"states_filter": states, "types_filter": types})
            if int(resp.error_code) != 0:
                raise CliError(f"ListGroups: {_error_name(int(resp.error_code))}")
            out |= {(g.group_id, g.group_type, g.group_state) for g in resp.groups}
        return sorted(out)

    def describe(self, group: str) -> Any:
        """The ShareGroupDescribe entry of ``group`` (None: no such share group)."""
        resp = self.client.find_coordinator(group).call(
            77, 1, {"group_ids": [group], "include_authorized_operations": False})
        [g] = resp.groups
        code = int(g.error_code)
        if code == ErrorCode.GROUP_ID_NOT_FOUND:
            return None
        if code != 0:
            raise CliError(f"ShareGroupDescribe {group}: {_error_name(code)}")
        return g

    def offsets(self, group: str) -> list[ShareOffset]:
        """Every share-partition's start offset and lag (DescribeShareGroupOffsets v1)."""
        resp = self.client.find_coordinator(group).call(
            90, 1, {"groups": [{"group_id": group, "topics": None}]})
        [g] = resp.groups
        if int(g.error_code) != 0:
            raise CliError(f"DescribeShareGroupOffsets {group}: {_error_name(int(g.error_code))}")
        return sorted((ShareOffset(TopicPartition(t.topic_name, int(p.partition_index)),
                                   int(p.leader_epoch), int(p.start_offset), int(p.lag))
                       for t in g.topics for p in t.partitions if int(p.error_code) == 0),
                      key=lambda o: (o.tp.topic, o.tp.partition))

    def alter(self, group: str, plan: dict[TopicPartition, int]) -> None:
        topics: dict[str, list[dict[str, int]]] = {}
        for tp, offset in sorted(plan.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            topics.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "start_offset": offset})
        resp = self.client.find_coordinator(group).call(91, 0, {"group_id": group, "topics": [
            {"topic_name": t, "partitions": ps} for t, ps in topics.items()]})
        if int(resp.error_code) != 0:
            raise CliError(f"AlterShareGroupOffsets {group}: {_error_name(int(resp.error_code))}"
                           + (f": {resp.error_message}" if resp.error_message else ""))
        for t in resp.responses:
            for p in t.partitions:
                if int(p.error_code) != 0:
                    raise CliError(f"AlterShareGroupOffsets {group} {t.topic_name}-"
                                   f"{p.partition_index}: {_error_name(int(p.error_code))}")

    def delete_offsets(self, group: str, topics: list[str]) -> list[tuple[str, str]]:
        resp = self.client.find_coordinator(group).call(
            92, 0, {"group_id": group, "topics": [{"topic_name": t} for t in topics]})
        if int(resp.error_code) != 0:
            raise CliError(f"DeleteShareGroupOffsets {group}: "
                           f"{_error_name(int(resp.error_code))}")
        return [(t.topic_name, "Successful" if int(t.error_code) == 0
                 else _error_name(int(t.error_code))) for t in resp.responses]

    def delete_groups(self, groups: list[str]) -> list[tuple[str, str | None]]:
        out: list[tuple[str, str | None]] = []
        for group in groups:
            resp = self.client.find_coordinator(group).call(42, 2, {"groups_names": [group]})
            code = int(resp.results[0].error_code)
            out.append((group, None if code == 0 else _error_name(code)))
        return out


# ---------------------------------------------------------------------------- describe


def describe_offsets(admin: ShareGroupAdmin, group: str) -> str:
    rows = [["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"]]
    rows += [[group, o.tp.topic, str(o.tp.partition), _dash(o.leader_epoch),
              _dash(o.start_offset), _dash(o.lag)] for o in admin.offsets(group)]
    return _table(rows)


def describe_state(admin: ShareGroupAdmin, group: str, g: Any) -> str:
    coord = admin.client.find_coordinator(group)
    rows = [["GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"],
            [group, f"{coord.address[0]}:{coord.address[1]}", g.group_state,
             str(g.group_epoch), str(g.assignment_epoch), str(len(g.members))]]
    return _table(rows)


def describe_members(group: str, g: Any) -> str:
    rows = [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH",
             "ASSIGNMENT"]]
    for m in g.members:
        parts = [(t.topic_name, int(p)) for t in m.assignment.topic_partitions
                 for p in t.partitions]
        assignment = ",".join(f"{t}:{p}" for t, p in sorted(parts)) or "-"
        rows.append([group, m.member_id, m.client_host, m.client_id, str(len(parts)),
                     str(m.member_epoch), assignment])
    return _table(rows)


def describe(admin: ShareGroupAdmin, group: str, args: argparse.Namespace) -> str:
    g = admin.describe(group)
    if g is None:
        raise CliError(f"Share group '{group}' does not exist.")
    if args.state is not None:
        return describe_state(admin, group, g)
    if args.members:
        return describe_members(group, g)
    header = "" if g.members else f"Share group '{group}' has no active members.\n\n"
    return header + describe_offsets(admin, group)


# ---------------------------------------------------------------------------- reset


def _targets(admin: ShareGroupAdmin, group: str, args: argparse.Namespace) -> list[TopicPartition]:
    if args.all_topics:
        return [o.tp for o in admin.offsets(group)]
    out: list[TopicPartition] = []
    for spec in args.topic:
        topic, _, parts = spec.partition(":")
        ps = [int(p) for p in parts.split(",") if p] if parts else (
            admin.client.partitions_for(topic))
        out += [TopicPartition(topic, p) for p in ps]
    if not out:
        raise CliError("one of --topic or --all-topics is required")
    return out


def reset_plan(admin: ShareGroupAdmin, tps: list[TopicPartition],
               args: argparse.Namespace) -> dict[TopicPartition, int]:
    c = admin.client
    if args.to_earliest:
        return dict(c.earliest_offsets(tps))
    if args.to_latest:
        return dict(c.latest_offsets(tps))
    if args.to_offset is not None:
        lo, hi = c.earliest_offsets(tps), c.latest_offsets(tps)
        return {tp: min(max(args.to_offset, lo[tp]), hi[tp]) for tp in tps}
    if args.to_datetime:
        ts = parse_datetime_ms(args.to_datetime)
        found = c.offsets_for_times(dict.fromkeys(tps, ts))
        latest = c.latest_offsets(tps)
        out = {}
        for tp in tps:
            at = found.get(tp)
            out[tp] = latest[tp] if at is None or at < 0 else at
        return out
    raise CliError("choose one of --to-earliest/--to-latest/--to-offset/--to-datetime "
                   "(share groups)")


def reset_offsets(admin: ShareGroupAdmin, group: str, args: argparse.Namespace) -> str:
    plan = reset_plan(admin, _targets(admin, group, args), args)
    if args.execute:
        g = admin.describe(group)
        if g is not None and g.group_state not in INACTIVE_STATES:
            raise CliError(f"Share group '{group}' is not empty.")
        admin.alter(group, plan)
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    rows += [[group, tp.topic, str(tp.partition), str(o)]
             for tp, o in sorted(plan.items(), key=lambda kv: (kv[0].topic, kv[0].partition))]
    return _table(rows)


# ---------------------------------------------------------------------------- main


def list_groups_of_types(args: argparse.Namespace) -> str:
    """``--list --type [T,...]`` / ``--list --state [S,...]``: Kafka 4.x's GROUP / TYPE /
    STATE table, over every kind of group (ListGroups v5 filters by both)."""
    types = [t.strip().lower() for t in (args.type or "").split(",") if t.strip()]
    states = [x.strip() for x in (args.state or "").split(",") if x.strip()]
    with ShareGroupAdmin(args) as admin:
        groups = admin.list_groups(types, states)
    rows = [["GROUP"] + (["TYPE"] if args.type is not None else [])
            + (["STATE"] if args.state is not None else [])]
    for g, kind, state in groups:
        rows.append([g] + ([kind.capitalize()] if args.type is not None else [])
                    + ([state] if args.state is not None else []))
    return _table(rows)


def share_hint(args: argparse.Namespace, group: str) -> str:
    """For a consumer group command on a share group: how to reach it ("" otherwise)."""
    try:
        with ShareGroupAdmin(args) as admin:
            shares = {g for g, _, _ in admin.list_groups([SHARE], [])}
    except (CliError, KafkaClientError, OSError):
        return ""
    return f" '{group}' is a share group: use --type share." if group in shares else ""


def _groups(admin: ShareGroupAdmin, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        return [g for g, _, _ in admin.list_groups([SHARE], [])]
    if not args.group:
        raise CliError("--group or --all-groups is required")
    return list(args.group)


def _act(admin: ShareGroupAdmin, args: argparse.Namespace) -> str:
    if args.list:
        return "\n".join(g for g, _, _ in admin.list_groups([SHARE], []))
    if args.describe:
        return "\n\n".join(describe(admin, g, args) for g in _groups(admin, args))
    if args.delete:
        return "\n".join(f"Deletion of group '{g}': " + ("Successful" if err is None else err)
                         for g, err in admin.delete_groups(_groups(admin, args)))
    groups = _groups(admin, args)
    if len(groups) != 1:
        raise CliError("give one --group (share groups are reset or deleted from one at a time)")
    if args.reset_offsets:
        if not args.execute and not args.dry_run:
            print("WARN: No action will be performed as the --execute option is missing. "
                  "Use --dry-run or --execute.", file=sys.stderr)
        return reset_offsets(admin, groups[0], args)
    topics = sorted({spec.partition(":")[0] for spec in args.topic})
    if not topics:
        raise CliError("--delete-offsets needs --topic")
    rows = [["TOPIC", "STATUS"], *[list(r) for r in admin.delete_offsets(groups[0], topics)]]
    return _table(rows)


def run_share(args: argparse.Namespace) -> int:
    """``tidelog groups --type share ...``: 0, or 1 with the error on stderr."""
    try:
        with ShareGroupAdmin(args) as admin:
            out = _act(admin, args)
    except (CliError, KafkaClientError, ValueError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    if out:
        print(out)
    return 0
