"""`tidelog acls`: Kafka's kafka-acls.sh over confluent-kafka's AdminClient (CreateAcls,
DescribeAcls, DeleteAcls) with Kafka's flags: --add/--remove/--list, --allow-principal /
--deny-principal, --allow-host / --deny-host, --operation, one resource (--topic, --group,
--cluster, --transactional-id) and --resource-pattern-type."""

from __future__ import annotations

import argparse
from typing import Any

from tidelog.cli.client_config import (
    CliError,
    add_connection_args,
    check_answer,
    client_config,
    make_client,
    protocol_client,
    wait,
)

TIMEOUT_S = 30
DESCRIBE_ACLS = 29  # API key

_RESOURCES = (("topic", "TOPIC"), ("group", "GROUP"), ("transactional_id", "TRANSACTIONAL_ID"))


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("acls", help="add, list or remove ACLs (kafka-acls)")
    add_connection_args(p)
    g = p.add_mutually_exclusive_group(required=True)
    for op in ("add", "remove", "list"):
        g.add_argument(f"--{op}", action="store_true")
    p.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL")
    p.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    p.add_argument("--operation", action="append", default=[], metavar="OP",
                   help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
                        "DescribeConfigs, AlterConfigs, IdempotentWrite, All")
    p.add_argument("--principal", help="--list: only this principal's ACLs")
    p.add_argument("--topic")
    p.add_argument("--group")
    p.add_argument("--transactional-id", dest="transactional_id")
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", default=None,
                   choices=["literal", "prefixed", "match", "any"])
    p.add_argument("--force", action="store_true", help="accepted for kafka-acls compatibility")
    p.set_defaults(func=run)


def _enum_name(text: str) -> str:
    """Kafka's CamelCase operation names (ClusterAction) as confluent's enum names."""
    out = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(text))
    return out.upper()


def _resource(args: argparse.Namespace, admin: Any) -> tuple[Any, str | None]:
    chosen = [(kind, getattr(args, attr)) for attr, kind in _RESOURCES if getattr(args, attr)]
    if args.cluster:
        chosen.append(("BROKER", "kafka-cluster"))
    if len(chosen) > 1:
        raise CliError("give one resource: --topic, --group, --transactional-id or --cluster")
    if not chosen:
        if args.add or args.remove:
            raise CliError("--add/--remove need a resource (--topic, --group, ...)")
        return admin.ResourceType.ANY, None
    kind, name = chosen[0]
    return getattr(admin.ResourceType, kind), name


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import admin

    client = make_client(admin.AdminClient, client_config(args, {}, {}))
    rtype, name = _resource(args, admin)
    default_pattern = "any" if args.list else "literal"
    pattern = getattr(admin.ResourcePatternType,
                      (args.resource_pattern_type or default_pattern).upper())
    if args.list:
        return _list(args, admin, rtype, name, pattern)
    bindings = []
    for perm, principals, hosts in (("ALLOW", args.allow_principal, args.allow_host),
                                    ("DENY", args.deny_principal, args.deny_host)):
        for principal in principals:
            for host in hosts or ["*"]:
                for op in args.operation or (["All"] if args.remove else []):
                    bindings.append((principal, host, _enum_name(op), perm))
    if not bindings:
        raise CliError("give --allow-principal/--deny-principal and --operation")
    if args.add:
        acls = [admin.AclBinding(rtype, str(name), pattern, who, host,
                                 getattr(admin.AclOperation, op),
                                 getattr(admin.AclPermissionType, perm))
                for who, host, op, perm in bindings]
        for binding, fut in client.create_acls(acls).items():
            wait(fut, TIMEOUT_S, "CreateAcls")
            print(f"Added {binding}")
        return 0
    filters = [admin.AclBindingFilter(rtype, str(name), pattern, who, host,
                                      getattr(admin.AclOperation, op),
                                      getattr(admin.AclPermissionType, perm))
               for who, host, op, perm in bindings]
    for fut in client.delete_acls(filters).values():
        for binding in wait(fut, TIMEOUT_S, "DeleteAcls"):
            print(f"Removed {binding}")
    return 0


def _list(args: argparse.Namespace, admin: Any, rtype: Any, name: str | None,
          pattern: Any) -> int:
    """DescribeAcls through tidelog's own protocol client: librdkafka drops the answer's error
    (CLUSTER_AUTHORIZATION_FAILED, SECURITY_DISABLED) and hands back an empty list."""
    body = {"resource_type_filter": rtype.value, "resource_name_filter": name,
            "pattern_type_filter": pattern.value, "principal_filter": args.principal,
            "host_filter": None, "operation": admin.AclOperation.ANY.value,
            "permission_type": admin.AclPermissionType.ANY.value}
    with protocol_client(args) as client:
        answer = client.any_connection().call(DESCRIBE_ACLS, 3, body)
    check_answer(answer)
    for r in answer.resources:
        restype = admin.ResourceType(int(r.resource_type)).name
        pattern_type = admin.ResourcePatternType(int(r.pattern_type)).name
        for a in r.acls:
            print(f"{restype} {r.resource_name} ({pattern_type}): {a.principal} from {a.host} "
                  f"{admin.AclPermissionType(int(a.permission_type)).name} "
                  f"{admin.AclOperation(int(a.operation)).name}")
    return 0
