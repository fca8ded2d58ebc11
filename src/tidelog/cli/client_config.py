"""librdkafka client settings for the console tools, gathered as Kafka's tools gather theirs:
``--bootstrap-server``, a client properties file (``--command-config``, or Kafka's
``--producer.config`` / ``--consumer.config``) and ``--producer-property`` /
``--consumer-property`` ``K=V`` pairs, later ones winning. The file is read as Java reads it,
so the same ``client.properties`` (``security.protocol``, ``sasl.*``, ``ssl.*.location``)
serves Kafka's tools and these."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from tidelog.client.kafka_client import KafkaClient

C = TypeVar("C")  # a confluent-kafka client: Producer, Consumer, AdminClient

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
    if not getattr(args, "debug", False):
        # log_level 0 still lets librdkafka print its level-0 lines ("%0|...|FATAL|..."): the
        # error callback hears the same failure, and the command says it in its one line
        conf["logger"] = _SILENT
    if args.command_config is not None:
        # here, not at the top: tidelog.config is ~8 ms of every client command's start-up
        from tidelog.config.properties import read_properties_file

        try:
            conf.update(read_properties_file(args.command_config))
        except OSError as exc:
            raise CliError(f"cannot read {args.command_config}: {exc.strerror or exc}") from None
    conf.update(overrides)
    return conf


class _Silent:
    """librdkafka's ``logger`` (its log lines are served by poll as ``log(level, fmt, *args)``
    calls) that drops them."""

    def log(self, level: int, fmt: str, *args: object) -> None:
        pass


_SILENT = _Silent()


def make_client(kind: Callable[[dict[str, Any]], C], conf: dict[str, Any],
                reach_s: float | None = REACH_TIMEOUT_S, errors: ClientErrors | None = None) -> C:
    """``kind(conf)``, with librdkafka's complaint about a setting turned into one line; then,
    unless ``reach_s`` is None, one Metadata request that must be answered within ``reach_s``
    seconds (``reach``). ``errors`` hears librdkafka's error callback (``ClientErrors.failure``
    names a fatal error's cause)."""
    from confluent_kafka import KafkaException

    errors = errors if errors is not None else ClientErrors()
    try:
        client = kind({"error_cb": errors, **conf})
    except KafkaException as exc:
        raise CliError(f"invalid client configuration: {exc.args[0].str()}") from None
    except (ValueError, TypeError) as exc:
        raise CliError(f"invalid client configuration: {exc}") from None
    if reach_s is not None:
        reach(client, str(conf.get("bootstrap.servers")), reach_s, errors)
    return client


# librdkafka's prefix naming the broker handle, and its suffix saying how long the attempt took,
# which may itself hold parentheses: "(after 0ms in state CONNECT, 1 identical error(s)
# suppressed)"
_CONNECT_NOISE = re.compile(
    r"^\S+/(bootstrap|\d+): | \(after \d+ms in state \w+(?:[^()]|\([^()]*\))*\)"
)


class ClientErrors:
    """librdkafka's error callback: keeps the last error that names a cause (a refused
    connection, a name that does not resolve, a TLS or SASL failure) rather than the
    "N/N brokers are down" summary that follows it, and the reason of a fatal error (after
    which the client refuses every call with a bare "Local: Fatal error")."""

    def __init__(self) -> None:
        self.cause: str | None = None
        self.fatal: str | None = None

    def __call__(self, err: Any) -> None:
        from confluent_kafka import KafkaError

        if not callable(getattr(err, "fatal", None)):
            return
        if err.fatal() or err.code() == KafkaError._FATAL:
            self.fatal = self.fatal or fatal_reason(str(err.str()))
        elif err.code() != KafkaError._ALL_BROKERS_DOWN or self.cause is None:
            # "host:port/bootstrap: Connect to ... failed: ... (after 0ms in state CONNECT)"
            self.cause = _CONNECT_NOISE.sub("", str(err.str()))


    def failure(self, client: Any, exc: object) -> CliError | None:
        """The one line for ``exc`` raised by ``client`` when it is librdkafka's fatal error,
        else None. confluent-kafka raises it as a KafkaException (``_FATAL``: "Unable to
        produce message: Local: Fatal error"; or the error itself), or as the bare KafkaError
        (no Exception); the error callback that names the cause runs in poll, served here."""
        err: Any = exc.args[0] if isinstance(exc, Exception) and exc.args else exc
        if not (callable(getattr(err, "fatal", None)) and (err.fatal() or err.code() == -150)):
            return None
        for _ in range(10):  # the callback may be a moment behind the refused call
            if self.fatal is not None:
                break
            try:
                client.poll(0.1)
            except:  # noqa: E722 - the fatal error once more, maybe as a bare KafkaError
                self(sys.exc_info()[1])
        if self.fatal is None and err.fatal():
            self.fatal = fatal_reason(str(err.str()))
        return CliError(self.fatal or str(err.str()))


# librdkafka's reason when the idempotent producer gets no producer id: "[Fatal error: Broker:
# Cluster authorization failed: ]Failed to acquire idempotence PID from broker ...: Broker: ..."
_NO_PID = re.compile(r"Failed to acquire idempotence PID.*Cluster authorization failed")


def fatal_reason(reason: str) -> str:
    """librdkafka's fatal error reason, said as the command's one line."""
    if _NO_PID.search(reason):
        return ("Cluster authorization failed (the idempotent producer needs IdempotentWrite "
                "on the cluster or Write on a topic)")
    return reason.removeprefix("Fatal error: ")


def reach(client: Any, servers: str, seconds: float, errors: ClientErrors | None = None) -> None:
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


def protocol_client(args: argparse.Namespace) -> KafkaClient:
    """tidelog's own protocol client, for the requests librdkafka's binding does not offer,
    with the command's client properties (``security.protocol``, ``sasl.*``, ``ssl.*``)."""
    from tidelog.client.kafka_client import KafkaClient
    from tidelog.client.security import ClientSecurity

    props = {k: str(v) for k, v in client_config(args, {}, {}).items()
             if k.startswith(("security.", "sasl.", "ssl."))}
    return KafkaClient(args.bootstrap_server, security=ClientSecurity.from_properties(props))


def check_answer(answer: object) -> None:
    """An answer's ``error_code`` (of tidelog's own protocol client) as the command's one line:
    the broker's message and Kafka's name for the error."""
    from tidelog.protocol.errors import ErrorCode

    code = int(getattr(answer, "error_code", 0))
    if code:
        try:
            name = ErrorCode(code).name.upper()
        except ValueError:
            name = str(code)
        message = getattr(answer, "error_message", None)
        raise CliError(f"{message} ({name})" if message else name)


def wait(future: Any, seconds: float, what: str) -> Any:
    """``future.result(seconds)`` of an AdminClient call; no answer in time is the command's
    one line naming the request (the bare TimeoutError says nothing)."""
    from concurrent.futures import TimeoutError as Pending

    try:
        return future.result(seconds)
    except Pending:
        raise CliError(f"{what}: no answer from the cluster within {seconds:g} s") from None
