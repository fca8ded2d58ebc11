"""`tidelog schemas`: the Schema Registry from the command line (list, register, get, check,
config, mode, delete), over Confluent's REST API, so it works against tidelog's registry and
Confluent's alike.

    tidelog schemas list [--deleted] [--prefix orders]
    tidelog schemas register orders-value --schema-file order.avsc [--type AVRO]
        [--reference com.ex.Address=address-value:1] [--normalize]
    tidelog schemas get orders-value [--version latest] | tidelog schemas get --id 3
    tidelog schemas versions orders-value
    tidelog schemas check orders-value --schema-file order-v2.avsc [--version latest]
    tidelog schemas config [orders-value] [--set FULL_TRANSITIVE]
    tidelog schemas mode [orders-value] [--set READONLY]
    tidelog schemas delete orders-value [--version 2] [--permanent]

The registry is ``--registry`` (default ``$TIDELOG_SCHEMA_REGISTRY`` or
http://localhost:8081); answers are printed as JSON, errors as the registry's message."""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tidelog.cli.client_config import CliError

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("schemas", help="list, register, get, check, configure and "
                                              "delete schemas in a Schema Registry")
    p.add_argument("--registry", default=os.environ.get("TIDELOG_SCHEMA_REGISTRY",
                                                        "http://localhost:8081"),
                   help="registry URL (default $TIDELOG_SCHEMA_REGISTRY or localhost:8081)")
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    sub.required = True
    s = sub.add_parser("list", help="subjects")
    s.add_argument("--deleted", action="store_true", help="include soft-deleted subjects")
    s.add_argument("--prefix", default="", help="only subjects starting with this")
    s = sub.add_parser("register", help="register a schema under a subject")
    s.add_argument("subject")
    _schema_args(s)
    s.add_argument("--normalize", action="store_true")
    s = sub.add_parser("get", help="a version of a subject, or a schema by id")
    s.add_argument("subject", nargs="?")
    s.add_argument("--version", default="latest")
    s.add_argument("--id", type=int, help="the schema with this global id")
    s.add_argument("--deleted", action="store_true", help="soft-deleted versions too")
    s = sub.add_parser("versions", help="a subject's versions")
    s.add_argument("subject")
    s.add_argument("--deleted", action="store_true")
    s = sub.add_parser("check", help="is a schema compatible with a subject's versions?")
    s.add_argument("subject")
    _schema_args(s)
    s.add_argument("--version", default="latest")
    for name in ("config", "mode"):
        s = sub.add_parser(name, help=f"show or set the global or a subject's {name}")
        s.add_argument("subject", nargs="?")
        s.add_argument("--set", dest="value", metavar="LEVEL" if name == "config" else "MODE")
    s = sub.add_parser("delete", help="delete a subject or one version (soft, or --permanent)")
    s.add_argument("subject")
    s.add_argument("--version")
    s.add_argument("--permanent", action="store_true")
    for action in sub.choices.values():  # --registry also after the action
        action.add_argument("--registry", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def _schema_args(s: argparse.ArgumentParser) -> None:
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--schema-file", type=Path, help="file holding the schema text")
    g.add_argument("--schema", help="the schema text")
    s.add_argument("--type", default="AVRO", choices=["AVRO", "JSON", "PROTOBUF"])
    s.add_argument("--reference", action="append", default=[],
                   metavar="NAME=SUBJECT:VERSION", help="a referenced schema (repeatable)")


def _body(args: argparse.Namespace) -> dict[str, Any]:
    text = args.schema if args.schema is not None else args.schema_file.read_text()
    body: dict[str, Any] = {"schema": text}
    if args.type != "AVRO":
        body["schemaType"] = args.type
    refs = []
    for item in args.reference:
        name, sep, rest = item.partition("=")
        subject, sep2, version = rest.rpartition(":")
        if not (sep and sep2 and version.isdigit()):
            raise CliError(f"--reference {item!r}: expected NAME=SUBJECT:VERSION")
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


def request(base: str, method: str, path: str, body: Any = None) -> Any:
    """One REST call; the registry's error message becomes a CliError."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base.rstrip("/") + path, data=data, method=method,
                                 headers={"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as err:
        try:
            answer = json.loads(err.read())
            message = f"{answer['message']} (error code {answer['error_code']})"
        except (ValueError, KeyError, TypeError):
            message = f"HTTP {err.code}"
        raise CliError(message) from None
    except urllib.error.URLError as err:
        raise CliError(f"cannot reach the registry at {base}: {err.reason}") from None
    return json.loads(raw) if raw else None


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _path(args: argparse.Namespace) -> tuple[str, str, Any]:
    """(method, path, body) of the action."""
    action, subject = args.action, str(getattr(args, "subject", None) or "")
    deleted = "?deleted=true" if getattr(args, "deleted", False) else ""
    if action == "list":
        prefix = f"&subjectPrefix={_q(args.prefix)}" if args.prefix else ""
        return "GET", f"/subjects?deleted={str(args.deleted).lower()}{prefix}", None
    if action == "register":
        normalize = "?normalize=true" if args.normalize else ""
        return "POST", f"/subjects/{_q(subject)}/versions{normalize}", _body(args)
    if action == "get" and args.id is not None:
        return "GET", f"/schemas/ids/{args.id}", None
    if action == "get":
        if not subject:
            raise CliError("give a subject or --id")
        return "GET", f"/subjects/{_q(subject)}/versions/{_q(args.version)}{deleted}", None
    if action == "versions":
        return "GET", f"/subjects/{_q(subject)}/versions{deleted}", None
    if action == "check":
        return ("POST", f"/compatibility/subjects/{_q(subject)}/versions/{_q(args.version)}"
                "?verbose=true", _body(args))
    if action in ("config", "mode"):
        where = f"/{action}" + (f"/{_q(subject)}" if subject else "")
        if args.value is None:
            return "GET", where + ("?defaultToGlobal=true" if subject else ""), None
        key = "compatibility" if action == "config" else "mode"
        return "PUT", where, {key: args.value.upper()}
    permanent = "?permanent=true" if args.permanent else ""
    version = f"/versions/{_q(args.version)}" if args.version else ""
    return "DELETE", f"/subjects/{_q(subject)}{version}{permanent}", None


def run(args: argparse.Namespace) -> int:
    method, path, body = _path(args)
    answer = request(args.registry, method, path, body)
    if args.action == "get" and isinstance(answer, dict) and "schema" in answer:
        try:  # show an Avro or JSON schema as JSON rather than as an escaped string
            answer = {**answer, "schema": json.loads(answer["schema"])}
        except ValueError:
            pass
    json.dump(answer, sys.stdout, indent=2 if args.action in ("get", "check") else None)
    sys.stdout.write("\n")
    if args.action == "check" and isinstance(answer, dict) and not answer.get("is_compatible"):
        return 1
    return 0
