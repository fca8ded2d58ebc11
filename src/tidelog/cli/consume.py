"""``tidelog consume``: print a topic's records, the counterpart of kafka-console-consumer.sh,
on librdkafka (confluent-kafka's Consumer) as Kafka's tool runs on Kafka's consumer.

With ``--group`` it is a real group member: it joins, gets a share of the partitions
(two ``tidelog consume --group g`` processes split a topic between them), resumes from the
group's committed offsets (else ``--from-beginning`` / latest) and commits what it printed.
Without a group it reads the partitions of ``--topic`` directly (Kafka's tool invents a
throwaway group ``console-consumer-NNNNN``; reading without joining shows the same records
and leaves no group behind); ``--include REGEX`` subscribes to a pattern, in such a
throwaway group when none is given. Output is Kafka's DefaultMessageFormatter (``--property print.key=true`` ...)
and ends with "Processed a total of N messages" on stderr.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.cli.client_config import (
    CliError,
    add_connection_args,
    client_config,
    make_client,
    pairs,
    timeout_s,
)
from tidelog.cli.value_format import add_value_format_args, value_deserializer

if TYPE_CHECKING:
    from confluent_kafka import Consumer


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("consume", help="print records of a topic")
    add_connection_args(p, "--consumer.config")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic")
    which.add_argument("--include", metavar="REGEX", help="consume every topic matching this")
    p.add_argument("--partition", type=int)
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true")
    start.add_argument("--offset", help="earliest, latest or an offset (needs --partition)")
    start.add_argument("--timestamp", type=int, help="start at the first record at/after this ms")
    p.add_argument("--group", help="consume as a member of this consumer group")
    p.add_argument("--max-messages", type=int)
    p.add_argument("--timeout-ms", type=int, help="exit when no record arrived for this long")
    p.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="K=V",
        help="formatter setting: print.key, print.timestamp, print.offset, print.partition, "
        "print.headers, print.value, key.separator, line.separator, headers.separator",
    )
    p.add_argument("--consumer-property", action="append", default=[], metavar="K=V")
    p.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
    )
    for name in ("key", "offset", "timestamp", "headers", "partition"):
        p.add_argument(f"--print-{name}", action="store_true", help=f"print.{name}=true")
    p.add_argument("--key-separator", help="key.separator (default tab)")
    add_value_format_args(p, producing=False)
    p.set_defaults(func=run)


@dataclass
class Formatter:
    """Kafka's DefaultMessageFormatter, field for field and in its order."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"
    # --value-format: framed values decoded to JSON through the registry
    decode_value: Callable[[bytes | None], bytes | None] | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Formatter:
        props = pairs(args.property, "--property")
        for name in ("key", "offset", "timestamp", "headers", "partition"):
            if getattr(args, f"print_{name}"):
                props[f"print.{name}"] = "true"
        if args.key_separator is not None:
            props["key.separator"] = args.key_separator

        def flag(name: str, default: bool = False) -> bool:
            return props.get(name, str(default)).strip().lower() == "true"

        def text(name: str, default: bytes) -> bytes:
            return _unescape(props[name]).encode() if name in props else default

        return cls(
            print_timestamp=flag("print.timestamp"),
            print_partition=flag("print.partition"),
            print_offset=flag("print.offset"),
            print_headers=flag("print.headers"),
            print_key=flag("print.key"),
            print_value=flag("print.value", True),
            key_separator=text("key.separator", b"\t"),
            line_separator=text("line.separator", b"\n"),
            headers_separator=text("headers.separator", b","),
            null_literal=text("null.literal", b"null"),
        )

    def _b(self, data: bytes | None) -> bytes:
        return self.null_literal if data is None else data

    def format(self, msg: Any) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            kind, ts = msg.timestamp()
            fields.append(
                _TIMESTAMP_TYPES[kind].encode() + b":%d" % ts if kind else b"NO_TIMESTAMP"
            )
        if self.print_partition:
            fields.append(b"Partition:%d" % msg.partition())
        if self.print_offset:
            fields.append(b"Offset:%d" % msg.offset())
        if self.print_headers:
            hs = msg.headers() or []
            fields.append(
                self.headers_separator.join(k.encode() + b":" + self._b(v) for k, v in hs)
                or b"NO_HEADERS"
            )
        if self.print_key:
            fields.append(self._b(msg.key()))
        if self.print_value:
            value = msg.value()
            fields.append(self._b(value if self.decode_value is None else self.decode_value(value)))
        return self.key_separator.join(fields) + self.line_separator


_TIMESTAMP_TYPES = {1: "CreateTime", 2: "LogAppendTime"}


def _unescape(s: str) -> str:
    """``\\t`` / ``\\n`` typed on a shell command line mean the control characters."""
    return s.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r")


def consumer_config(args: argparse.Namespace) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "group.id": args.group or f"console-consumer-{random.randrange(100000)}",
        "client.id": "console-consumer",
        "isolation.level": args.isolation_level,
        "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        # commit only what was printed: offsets are stored by hand after each record
        "enable.auto.offset.store": False,
        "enable.auto.commit": bool(args.group),
        "enable.partition.eof": False,
    }
    return client_config(args, defaults, pairs(args.consumer_property, "--consumer-property"))


def _start(consumer: Consumer, args: argparse.Namespace, assigned: list[float]) -> None:
    """Subscribe (with a group) or assign the partitions at their start offsets; ``assigned``
    gets the time the consumer got its partitions (a group's first assignment, or now)."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    if args.group or args.include is not None:
        # a pattern needs group subscription (librdkafka matches topics as they appear); Kafka's
        # tool always subscribes, with a throwaway group when none is given
        consumer.subscribe([args.topic] if args.include is None else [f"^{args.include}"],
                           on_assign=lambda c, ps: assigned.append(time.monotonic()))
        return
    parts = [args.partition] if args.partition is not None else _partitions(consumer, args)
    if args.offset is not None:
        named = {"earliest": OFFSET_BEGINNING, "latest": OFFSET_END}
        offset = named.get(args.offset) or int(args.offset)
        start = [TopicPartition(args.topic, p, offset) for p in parts]
    elif args.timestamp is not None:
        wanted = [TopicPartition(args.topic, p, args.timestamp) for p in parts]
        start = consumer.offsets_for_times(wanted, 10)
    else:
        offset = OFFSET_BEGINNING if args.from_beginning else OFFSET_END
        start = [TopicPartition(args.topic, p, offset) for p in parts]
    consumer.assign(start)
    assigned.append(time.monotonic())


def check_options(args: argparse.Namespace) -> None:
    """Kafka's ConsoleConsumerOptions checks, before anything is asked of the cluster."""
    if args.offset is not None and args.partition is None:
        raise CliError("The partition is required when offset is specified.")
    if args.group and args.partition is not None:
        raise CliError("Options group and partition cannot be specified together.")
    if args.include is not None and args.partition is not None:
        raise CliError("The topic is required when partition is specified.")
    if args.offset is not None and args.offset not in ("earliest", "latest"):
        try:
            int(args.offset)
        except ValueError:
            raise CliError(f"--offset: expected earliest, latest or a number, got "
                           f"{args.offset!r}") from None


def _partitions(consumer: Consumer, args: argparse.Namespace) -> list[int]:
    """The topic's partitions, waiting (up to --timeout-ms) for a topic not created yet."""
    deadline = time.monotonic() + (args.timeout_ms if args.timeout_ms is not None else 1e9) / 1000
    warned = False
    while True:
        topic = consumer.list_topics(args.topic, timeout=10).topics.get(args.topic)
        if topic is not None and topic.error is None and topic.partitions:
            return sorted(topic.partitions)
        if topic is not None and topic.error is not None and topic.error.code() not in _NOT_YET:
            # no Describe/Read on the topic (TOPIC_AUTHORIZATION_FAILED): no waiting helps
            raise CliError(f"{args.topic}: {topic.error.str()} ({topic.error.name()})")
        if not warned:
            print(
                f"tidelog consume: topic {args.topic} does not exist yet "
                f"(UNKNOWN_TOPIC_OR_PARTITION); waiting for it",
                file=sys.stderr,
            )
            warned = True
        if time.monotonic() >= deadline:
            return []
        time.sleep(0.5)  # a person is waiting for a producer to create the topic


# Metadata's topic errors that a producer creating the topic ends
_NOT_YET = {3, 5}  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE
# consumer errors that end the command: TOPIC_/CLUSTER_AUTHORIZATION_FAILED, a failed SASL
# authentication (GROUP_AUTHORIZATION_FAILED too when the group is the user's: the throwaway
# group of an assign-only consumer is librdkafka's own side errand)
_DENIED = {29, 31, -169}
# not said: the end of a partition; the throwaway group's coordinator refusing an assign-only
# consumer (librdkafka looks the group up though it commits nothing)
_UNSAID = {-191, 30}  # _PARTITION_EOF, GROUP_AUTHORIZATION_FAILED

# A group member waits this long for its first assignment before --timeout-ms starts
ASSIGNMENT_WAIT_S = 60.0


def _loop(consumer: Consumer, args: argparse.Namespace, fmt: Formatter, counter: list[int],
          assigned: list[float]) -> None:
    """Prints records until --max-messages, or until none came for --timeout-ms counted, as
    in Kafka's console consumer, from when the consumer has its partitions: a group's join
    (its initial rebalance delay is 3 s) does not use up the idle time."""
    out = sys.stdout.buffer
    started = time.monotonic()
    idle_since: float | None = None
    warned: set[int] = set()
    while args.max_messages is None or counter[0] < args.max_messages:
        msg = consumer.poll(0.2)
        if idle_since is None and assigned:
            idle_since = assigned[0]
        if msg is None:
            if args.timeout_ms is None:
                continue
            if idle_since is None:  # no assignment yet: the idle clock has not started
                if time.monotonic() - started >= ASSIGNMENT_WAIT_S + args.timeout_ms / 1000:
                    raise CliError(f"group {args.group or '(console)'}: no partitions assigned within "
                                   f"{ASSIGNMENT_WAIT_S:g} s")
                continue
            if (time.monotonic() - idle_since) * 1000 >= args.timeout_ms:
                return
            continue
        err = msg.error()
        if err is not None:
            if err.fatal() or err.code() in _DENIED or (args.group and err.code() == 30):
                # librdkafka retries a denial for ever; Kafka's consumer throws it from poll
                raise CliError(f"{args.topic or args.include}: {err.str()} ({err.name()})")
            # transient (a missing topic, a broker down): Kafka's consumer keeps waiting too;
            # say it once per kind so the person at the terminal knows why nothing comes
            if err.code() not in warned and err.code() not in _UNSAID:
                warned.add(err.code())
                print(f"tidelog consume: {args.topic or args.include}: {err.str()}", file=sys.stderr)
            continue
        counter[0] += 1  # counted before it is printed, as Kafka's console consumer does: a
        out.write(fmt.format(msg))  # Ctrl-C after the line is out never leaves it uncounted
        out.flush()
        idle_since = time.monotonic()
        if args.group:
            consumer.store_offsets(msg)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer

    check_options(args)
    fmt = Formatter.from_args(args)
    fmt.decode_value = value_deserializer(args)
    # an unreachable cluster ends the command within --timeout-ms (at least 1 s), else 10 s
    reach_ms = None if args.timeout_ms is None else max(args.timeout_ms, 1000)
    consumer = make_client(Consumer, consumer_config(args), timeout_s(reach_ms, "--timeout-ms"))
    counter = [0]
    rc = 0
    try:
        assigned: list[float] = []
        _start(consumer, args, assigned)
        _loop(consumer, args, fmt, counter, assigned)
    except KeyboardInterrupt:
        rc = 130
    except Exception:  # the command's one line says why: no count after it
        consumer.close()
        raise
    try:
        consumer.close()  # leaves the group and commits the stored offsets
    finally:
        print(f"Processed a total of {counter[0]} messages", file=sys.stderr)
    return rc
