"""librdkafka client settings for the console tools, gathered as Kafka's tools gather theirs:
``--bootstrap-server``, a client properties file (``--command-config``, or Kafka's
``--producer.config`` / ``--consumer.config``) and ``--producer-property`` /
``--consumer-property`` ``K=V`` pairs, later ones winning. The file is read as Java reads it,
so the same ``client.properties`` (``security.protocol``, ``sasl.*``, ``ssl.*.location``)
serves Kafka's tools and these."""

from __future__ import annotations

import argparse
import re
from typing import Any

# How long a command waits for its first answer from the bootstrap servers when it has no
# timeout option of its own (Kafka's tools give up on an unreachable cluster in about as long)
REACH_TIMEOUT_S = 10.0


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
        # librdkafka's own log lines (a connect failure every few ms while a broker is down)
        # only with --debug: a failure the command cannot get past is its one line on stderr
        "log_level": 7 if getattr(args, "debug", False) else 0,
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


def make_client(kind: Any, conf: dict[str, Any], reach_s: float | None = REACH_TIMEOUT_S) -> Any:
    """``kind(conf)``, with librdkafka's complaint about a setting turned into one line; then,
    unless ``reach_s`` is None, one Metadata request that must be answered within ``reach_s``
    seconds (``reach``)."""
    from confluent_kafka import KafkaException

    errors = _Errors()
    try:
        client = kind({"error_cb": errors, **conf})
    except KafkaException as exc:
        raise CliError(f"invalid client configuration: {exc.args[0].str()}") from None
    except (ValueError, TypeError) as exc:
        raise CliError(f"invalid client configuration: {exc}") from None
    if reach_s is not None:
        reach(client, str(conf.get("bootstrap.servers")), reach_s, errors)
    return client


class _Errors:
    """librdkafka's error callback: keeps the last error that names a cause (a refused
    connection, a name that does not resolve, a TLS or SASL failure) rather than the
    "N/N brokers are down" summary that follows it."""

    def __init__(self) -> None:
        self.cause: str | None = None

    def __call__(self, err: Any) -> None:
        from confluent_kafka import KafkaError

        if err.code() != KafkaError._ALL_BROKERS_DOWN or self.cause is None:
            # "host:port/bootstrap: Connect to ... failed: ... (after 0ms in state CONNECT)"
            self.cause = re.sub(r"^\S+/(bootstrap|\d+): | \(after \d+ms in state \w+[^)]*\)", "",
                                str(err.str()))


def reach(client: Any, servers: str, seconds: float, errors: _Errors | None = None) -> None:
    """Fails in one line, naming the servers and the cause, when no bootstrap server answers
    a Metadata request within ``seconds`` (librdkafka would retry for as long as asked)."""
    from confluent_kafka import KafkaException

    try:
        client.list_topics(timeout=seconds)
    except KafkaException as exc:
        client.poll(0)  # serves the error callback: what the connection attempts met
        cause = (errors.cause if errors is not None else None) or exc.args[0].str()
        raise CliError(f"cannot reach the bootstrap servers {servers} within {seconds:g} s: "
                       f"{cause}") from None


def timeout_s(ms: int | None, what: str) -> float:
    """A ``--timeout``-style option in ms, as seconds (REACH_TIMEOUT_S when not given)."""
    if ms is None:
        return REACH_TIMEOUT_S
    if ms <= 0:
        raise CliError(f"{what} must be greater than 0")
    return ms / 1000
