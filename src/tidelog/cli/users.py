"""`tidelog users`: SCRAM credentials over confluent-kafka's AdminClient
(AlterUserScramCredentials / DescribeUserScramCredentials), what Kafka does with
``kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-256=[...]'``.

    tidelog users --bootstrap-server H:P --command-config admin.properties \\
        --add alice --mechanism SCRAM-SHA-256 --iterations 8192 --password-file pw.txt
    tidelog users --describe [alice ...]
    tidelog users --delete alice --mechanism SCRAM-SHA-256

The password is read from --password-file, or prompted for (never from the command line,
where other users of the machine could read it)."""

from __future__ import annotations

import argparse
import getpass
from pathlib import Path
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
DESCRIBE_USER_SCRAM_CREDENTIALS = 50  # API key
_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # ScramMechanism's type ids


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("users", help="add, describe or delete SCRAM users")
    add_connection_args(p)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--add", metavar="USER")
    g.add_argument("--delete", metavar="USER")
    g.add_argument("--describe", nargs="*", metavar="USER")
    p.add_argument("--mechanism", default="SCRAM-SHA-256",
                   choices=["SCRAM-SHA-256", "SCRAM-SHA-512"])
    p.add_argument("--iterations", type=int, default=4096)
    p.add_argument("--password-file", type=Path, help="file whose first line is the password")
    p.set_defaults(func=run)


def _password(args: argparse.Namespace) -> bytes:
    if args.password_file is not None:
        try:
            path: Path = args.password_file
            return path.read_text().splitlines()[0].encode()
        except (OSError, IndexError) as exc:
            raise CliError(f"cannot read a password from {args.password_file}: {exc}") from None
    return getpass.getpass(f"Password for {args.add}: ").encode()


def _describe(args: argparse.Namespace, users: list[str]) -> int:
    """DescribeUserScramCredentials through tidelog's own protocol client: librdkafka aborts
    the process (a bad free) on the answer's top-level error, CLUSTER_AUTHORIZATION_FAILED."""
    body = {"users": [{"name": u} for u in users] or None}
    with protocol_client(args) as client:
        answer = client.any_connection().call(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, body)
    check_answer(answer)
    for r in sorted(answer.results, key=lambda r: str(r.user)):
        check_answer(r)
        infos = ", ".join(f"{_MECHANISMS.get(int(i.mechanism), i.mechanism)} "
                          f"iterations={i.iterations}" for i in r.credential_infos)
        print(f"{r.user}: {infos}")
    return 0


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import admin

    client = make_client(admin.AdminClient, client_config(args, {}, {}))
    mech = getattr(admin.ScramMechanism, args.mechanism.replace("-", "_"))
    if args.describe is not None:
        return _describe(args, args.describe)
    if args.add:
        change: Any = admin.UserScramCredentialUpsertion(
            args.add, admin.ScramCredentialInfo(mech, args.iterations), _password(args))
        user = args.add
    else:
        change = admin.UserScramCredentialDeletion(args.delete, mech)
        user = args.delete
    wait(client.alter_user_scram_credentials([change])[user], TIMEOUT_S,
         "AlterUserScramCredentials")
    print(f"{'Set' if args.add else 'Deleted'} {args.mechanism} credentials of {user}")
    return 0
