"""librdkafka client settings for the console tools, gathered as Kafka's tools gather theirs:
``--bootstrap-server``, a client properties file (``--command-config``, or Kafka's
``--producer.config`` / ``--consumer.config``) and ``--producer-property`` /
``--consumer-property`` ``K=V`` pairs, later ones winning. The file is read as Java reads it,
so the same ``client.properties`` (``security.protocol``, ``sasl.*``, ``ssl.*.location``)
serves Kafka's tools and these."""

from __future__ import annotations

import argparse
from typing import Any


class CliError(Exception):
    """A user-facing failure: main prints ``tidelog <command>: <message>``, exits 1."""


def add_connection_args(p: argparse.ArgumentParser, config_flag: str | None = None) -> None:
    p.add_argument("--bootstrap-server", default="localhost:9092", help="HOST1:PORT1,...")
    flags = ["--command-config"] + ([config_flag] if config_flag else [])
    p.add_argument(
        *flags,
        dest="command_config",
        metavar="FILE",
        help="client properties file (security.protocol, sasl.*, ssl.*, ...)",
    )


def pairs(items: list[str], what: str) -> dict[str, str]:
    """``K=V`` items of a repeatable option; a malformed one names the option."""
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise CliError(f"{what}: expected KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def client_config(
    args: argparse.Namespace, defaults: dict[str, Any], overrides: dict[str, str]
) -> dict[str, Any]:
    """defaults < properties file < ``--*-property`` overrides; bootstrap from the option."""
    conf: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap_server,
        # librdkafka logs at info (level 6) by default; Kafka's tools show warnings and up
        "log_level": 4,
        **defaults,
    }
    if args.command_config is not None:
        # here, not at the top: tidelog.config is ~8 ms of every client command's start-up
        from tidelog.config.properties import read_properties_file

        try:
            conf.update(read_properties_file(args.command_config))
        except OSError as exc:
            raise CliError(f"cannot read {args.command_config}: {exc.strerror or exc}") from None
    conf.update(overrides)
    return conf


def make_client(kind: Any, conf: dict[str, Any]) -> Any:
    """``kind(conf)``, with librdkafka's complaint about a setting turned into one line."""
    from confluent_kafka import KafkaException

    try:
        return kind(conf)
    except KafkaException as exc:
        raise CliError(f"invalid client configuration: {exc.args[0].str()}") from None
    except (ValueError, TypeError) as exc:
        raise CliError(f"invalid client configuration: {exc}") from None
