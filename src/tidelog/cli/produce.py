"""``tidelog produce``: one record per stdin line, the counterpart of kafka-console-producer.sh,
on librdkafka (confluent-kafka's Producer) as Kafka's tool runs on Kafka's producer.

Records are batched by the client (``linger.ms`` from ``--timeout``, 1000 ms as in Kafka's
tool), so a line typed at a terminal is sent within that time, not when a batch fills.
End of input or Ctrl-C flushes everything read so far before exiting (Ctrl-C exits 130 after
the flush). The line reader takes Kafka's ``--property`` settings (``parse.key``,
``key.separator``, ``parse.headers``, ``headers.delimiter``, ``headers.separator``,
``headers.key.separator``, ``null.marker``, ``ignore.error``); where Kafka's tool stops at a
line it cannot parse, this one reports it on stderr with its line number and sends the rest
(exit 1 at the end). A producer to a topic that does not exist yet creates it through
Metadata, as kcat and Kafka's producer do when the broker allows auto-creation.

Piped input (not a terminal, no ``--sync``) is read as it arrives, every whole line that is
there at once, and handed to librdkafka in one ``produce_batch`` call per read (records with
headers one by one: librdkafka's batch call takes none); delivery reports come back for
failures only (``delivery.report.only.error``), so a record that is acknowledged costs no
Python call.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

from tidelog.cli.client_config import (
    ClientErrors,
    CliError,
    add_connection_args,
    client_config,
    pairs,
)
from tidelog.cli.progress import Progress
from tidelog.cli.value_format import add_value_format_args, value_serializer

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer

    from tidelog.cli.produce_reason import Refused

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_QUEUE_FULL = -184  # librdkafka's RD_KAFKA_RESP_ERR__QUEUE_FULL (KafkaError._QUEUE_FULL)
# refusals of the producer rather than of a record (no Write/IdempotentWrite/TransactionalId
# ACL, librdkafka's fatal error): the command stops and says so once, not once per record
_DENIED = {29: "TOPIC_AUTHORIZATION_FAILED", 31: "CLUSTER_AUTHORIZATION_FAILED",
           53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", -150: "_FATAL",
           -152: "_PURGE_QUEUE", -151: "_PURGE_INFLIGHT"}  # purged: after a fatal error


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("produce", help="produce stdin lines to a topic")
    add_connection_args(p, "--producer.config")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="target partition (default: by key hash)")
    p.add_argument(
        "--property",
        action="append",
        default=[],
        metavar="K=V",
        help="line reader setting: parse.key, key.separator, parse.headers, ...",
    )
    p.add_argument("--producer-property", action="append", default=[], metavar="K=V")
    p.add_argument("--sync", action="store_true", help="wait for each record's acknowledgement")
    p.add_argument("--key-separator", help="shorthand for parse.key=true key.separator=SEP")
    p.add_argument(
        "--request-required-acks",
        "--acks",
        dest="acks",
        default="-1",
        choices=("-1", "0", "1", "all"),
    )
    p.add_argument("--compression-codec", "--compression", dest="codec", choices=CODECS)
    p.add_argument(
        "--timeout", type=int, default=1000, metavar="MS", help="linger.ms (default 1000)"
    )
    p.add_argument("--request-timeout-ms", type=int, metavar="MS",
                   help="the ack timeout of the producer requests (request.timeout.ms, 1500 as in "
                   "Kafka's tool) and the longest wait for the cluster's first answer (else 10 s)")
    p.add_argument("--batch-size", type=int, help="records per batch (batch.num.messages)")
    p.add_argument(
        "--no-idempotence",
        dest="idempotent",
        action="store_false",
        help="send without a producer id (idempotent by default with acks=all)",
    )
    p.add_argument(
        "--header", action="append", default=[], metavar="K=V", help="add to every record"
    )
    add_value_format_args(p, producing=True)
    p.set_defaults(func=run)


class LineError(ValueError):
    """A line the reader cannot parse (Kafka's LineMessageReader message)."""


@dataclass
class LineReader:
    """Kafka's LineMessageReader: ``[headers<delimiter>][key<separator>]value`` per line."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_marker: bytes | None = None
    ignore_error: bool = False
    extra_headers: list[tuple[str, bytes]] = field(default_factory=list)

    @classmethod
    def from_properties(cls, props: dict[str, str], extra: list[tuple[str, bytes]]) -> LineReader:
        def flag(name: str) -> bool:
            return props.get(name, "false").strip().lower() == "true"

        def sep(name: str, default: bytes) -> bytes:
            return props[name].encode() if name in props else default

        marker = props.get("null.marker")
        return cls(
            parse_key=flag("parse.key"),
            key_separator=sep("key.separator", b"\t"),
            parse_headers=flag("parse.headers"),
            headers_delimiter=sep("headers.delimiter", b"\t"),
            headers_separator=sep("headers.separator", b","),
            headers_key_separator=sep("headers.key.separator", b":"),
            null_marker=marker.encode() if marker is not None else None,
            ignore_error=flag("ignore.error"),
            extra_headers=extra,
        )

    def _cut(
        self, on: bool, line: bytes, start: int, sep: bytes, what: str, n: int
    ) -> bytes | None:
        if not on:
            return None
        i = line.find(sep, start)
        if i < 0:
            if self.ignore_error:
                return None
            text = line.decode("utf-8", "replace")
            raise LineError(f"No {what} found on line number {n}: '{text}'")
        return line[start:i]

    @property
    def plain(self) -> bool:
        """Each line is its record's value as it is (no key, headers or null marker)."""
        return not (self.parse_key or self.parse_headers or self.extra_headers
                    or self.null_marker is not None)  # fmt: skip

    def _null(self, b: bytes | None) -> bytes | None:
        return None if b is None or b == self.null_marker else b

    def parse(self, line: bytes, n: int) -> tuple[bytes | None, bytes | None, list[Any]]:
        """(key, value, headers) of line number ``n`` (without its line terminator)."""
        raw_headers = self._cut(
            self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter", n
        )
        start = 0 if raw_headers is None else len(raw_headers) + len(self.headers_delimiter)
        key = self._cut(self.parse_key, line, start, self.key_separator, "key separator", n)
        start += 0 if key is None else len(key) + len(self.key_separator)
        headers: list[Any] = list(self.extra_headers)
        if raw_headers is not None and raw_headers != self.null_marker:
            headers += self._headers(raw_headers, n)
        return self._null(key), self._null(line[start:]), headers

    def _headers(self, raw: bytes, n: int) -> list[tuple[str, bytes | None]]:
        out: list[tuple[str, bytes | None]] = []
        for pair in raw.split(self.headers_separator):
            i = pair.find(self.headers_key_separator)
            if i < 0:
                if not self.ignore_error:
                    raise LineError(
                        f"No header key separator found in pair '{pair.decode()}' "
                        f"on line number {n}"
                    )
                out.append((pair.decode(), None))
                continue
            value = pair[i + len(self.headers_key_separator) :]
            out.append((pair[:i].decode(), self._null(value)))
        return out


def producer_config(args: argparse.Namespace) -> dict[str, Any]:
    acks = "all" if args.acks in ("-1", "all") else args.acks
    defaults: dict[str, Any] = {
        "linger.ms": args.timeout,
        "acks": acks,
        # Kafka's producers are idempotent by default (with acks=all) and hash keys with
        # murmur2; librdkafka's defaults differ, so say Kafka's explicitly.
        "enable.idempotence": args.idempotent and acks == "all",
        "partitioner": "murmur2_random",
        "client.id": "console-producer",
        # only failures come back: an acknowledged record costs no Python call
        "delivery.report.only.error": True,
        "request.timeout.ms": args.request_timeout_ms or 1500,
    }
    if args.codec:
        defaults["compression.type"] = args.codec
    if args.batch_size:
        defaults["batch.num.messages"] = args.batch_size
    return client_config(args, defaults, pairs(args.producer_property, "--producer-property"))


class _Delivery:
    """Delivery reports: counts the failures and prints the first few, as Kafka's
    ErrorLoggingCallback."""

    def __init__(self, topic: str) -> None:
        self.topic, self.failed = topic, 0
        self.refused: Refused | None = None  # the first record the broker refused as invalid
        self.denied: KafkaError | None = None  # the first _DENIED error: the command's one line

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            from tidelog.cli.produce_reason import EXPLAINED, refused

            if self.refused is None and err.code() in EXPLAINED:
                self.refused = refused(msg)
            self.report(err, msg.key(), msg.value())

    def report(self, err: KafkaError, key: bytes | None, value: bytes | None) -> None:
        self.failed += 1
        if err.code() in _DENIED:
            self.denied = self.denied or err
        elif self.failed <= 5:
            print(
                f"Error when sending message to topic {self.topic} with key: "
                f"{_show(key)}, value: {len(value or b'')} bytes with error: {err.str()}",
                file=sys.stderr,
            )


def _show(key: bytes | None) -> str:
    return "null" if key is None else f"{len(key)} bytes"


def _send(producer: Producer, args: argparse.Namespace, rec: tuple[Any, Any, Any]) -> None:
    key, value, headers = rec
    kw: dict[str, Any] = {"key": key, "value": value}
    if headers:
        kw["headers"] = headers
    if args.partition is not None:
        kw["partition"] = args.partition
    while True:
        try:
            producer.produce(args.topic, **kw)
            break
        except BufferError:  # local queue full: serve delivery reports, then retry
            producer.poll(0.01)  # successes send no report to end the poll early
    producer.poll(0)
    if args.sync:
        producer.flush()


def _send_many(producer: Producer, args: argparse.Namespace, msgs: list[dict[str, Any]],
               delivery: _Delivery) -> None:
    """Records as produce_batch's message dicts, in one call (a full local queue: serve
    delivery reports, then the rest again)."""
    kw = {} if args.partition is None else {"partition": args.partition}
    while msgs:
        if producer.produce_batch(args.topic, msgs, **kw) == len(msgs):
            break
        retry = []
        for m in msgs:
            err = m.get("_error")
            if err is None:
                continue
            if err.code() == _QUEUE_FULL:
                retry.append({"key": m.get("key"), "value": m["value"]})
            else:
                delivery.report(err, m.get("key"), m["value"])
        msgs = retry
        if msgs:  # no report wakes this poll (successes send none): a short one
            producer.poll(0.01)
    producer.poll(0)


def _chunks(stdin: BinaryIO) -> Iterator[list[bytes]]:
    """The whole lines of a pipe or file as they arrive: each read takes what is there (up to
    64 KiB), so a line written to a pipe is sent at once, not when a buffer fills."""
    read = getattr(stdin, "read1", stdin.read)
    rest = b""
    while chunk := read(1 << 16):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        if lines:
            yield [line.rstrip(b"\r") for line in lines]
    if rest:
        yield [rest.rstrip(b"\r")]


def _read_lines(stdin: BinaryIO, prompt: bool) -> Any:
    n = 0
    while True:
        if prompt:  # Kafka's tool prompts with '>' when it runs at a terminal
            sys.stdout.write(">")
            sys.stdout.flush()
        raw = stdin.readline()
        if not raw:
            return
        n += 1
        yield n, raw.rstrip(b"\n").rstrip(b"\r")


def _produce_input(producer: Producer, args: argparse.Namespace, lines: _Lines, delivery: _Delivery,
                   progress: Progress, prompt: bool) -> None:
    """Sends stdin's lines until its end or until the producer is denied."""
    if prompt or args.sync:  # a line at a time: typed, or each acknowledged alone
        for _, line in _read_lines(sys.stdin.buffer, prompt):
            for rec in lines.parse([line]):
                _send(producer, args, rec)
            progress.update(lines.n)
            if delivery.denied is not None:
                return
    elif reader_has_headers(lines.reader):  # produce_batch takes no headers
        for chunk in _chunks(sys.stdin.buffer):
            for rec in lines.parse(chunk):
                _send(producer, args, rec)
            progress.update(lines.n)
            if delivery.denied is not None:
                return
    else:
        for chunk in _chunks(sys.stdin.buffer):
            _send_many(producer, args, lines.messages(chunk), delivery)
            progress.update(lines.n)
            if delivery.denied is not None:
                return


def reader_has_headers(reader: LineReader) -> bool:
    return bool(reader.parse_headers or reader.extra_headers)


def run(args: argparse.Namespace) -> int:
    from confluent_kafka import Producer

    from tidelog.cli.client_config import make_client, timeout_s

    extra = [(k, v.encode()) for k, v in pairs(args.header, "--header").items()]
    props = pairs(args.property, "--property")
    if args.key_separator is not None:
        props.update({"parse.key": "true", "key.separator": args.key_separator})
    reader = LineReader.from_properties(props, extra)
    encode = value_serializer(args)  # --value-format avro|json|protobuf
    delivery = _Delivery(args.topic)
    errors = ClientErrors()
    producer = make_client(Producer, {**producer_config(args), "on_delivery": delivery},
                           timeout_s(args.request_timeout_ms, "--request-timeout-ms"), errors)
    interrupted = False
    prompt = sys.stdin.isatty() and sys.stdout.isatty()
    # a long piped input shows how far it got (at a terminal's stderr only)
    progress = Progress(f"Producing to {args.topic}", unit="lines")
    progress.enabled &= not prompt
    lines = _Lines(reader, encode)
    try:
        try:
            _produce_input(producer, args, lines, delivery, progress, prompt)
        except KeyboardInterrupt:
            interrupted = True  # flush what was read: Ctrl-C loses no line already typed
        progress.close()
        rc = _finish(producer, delivery, lines.bad, interrupted, errors)
    except:  # noqa: E722 - librdkafka's fatal error, raised as a KafkaError: no Exception
        progress.close()
        failure = errors.failure(producer, sys.exc_info()[1])
        if failure is None:
            raise
        raise failure from None
    if delivery.refused is not None:  # librdkafka keeps the broker's message to itself
        from tidelog.cli.produce_reason import broker_reason

        reason = broker_reason(producer_config(args), delivery.refused)
        print(f"tidelog produce: the broker's reason: {reason}", file=sys.stderr)
    return rc


class _Lines:
    """Numbered input lines into (key, value, headers) records; a line that cannot be
    parsed is reported with its number, counted and skipped."""

    def __init__(self, reader: LineReader, encode: Any) -> None:
        self.reader, self.encode = reader, encode
        self.plain = reader.plain and encode is None
        self.n = self.bad = 0

    def messages(self, lines: list[bytes]) -> list[dict[str, Any]]:
        """produce_batch's message dicts of records without headers."""
        if self.plain:  # the line is the value: no call per line
            self.n += len(lines)
            return [{"value": line} for line in lines]
        return [{"key": k, "value": v} for k, v, _ in self.parse(lines)]

    def parse(self, lines: list[bytes]) -> list[tuple[Any, Any, Any]]:
        out = []
        for line in lines:
            self.n += 1
            try:
                rec = self.reader.parse(line, self.n)
                if self.encode is not None:
                    rec = (rec[0], _encoded(self.encode, rec[1], self.n), rec[2])
            except LineError as exc:
                self.bad += 1
                print(f"tidelog produce: {exc} (line skipped)", file=sys.stderr)
                continue
            out.append(rec)
        return out


def _encoded(encode: Any, value: bytes | None, n: int) -> bytes | None:
    from tidelog.cli.value_format import NotJsonError

    try:
        encoded: bytes | None = encode(value)
        return encoded
    except NotJsonError as exc:
        raise LineError(f"line {n}: not JSON: {exc}") from None
    except Exception as exc:
        raise LineError(f"line {n}: value does not fit the schema: {exc}") from exc


def _finish(producer: Producer, delivery: _Delivery, bad: int, interrupted: bool,
            errors: ClientErrors) -> int:
    try:
        left = producer.flush(60)
    except KeyboardInterrupt:  # a second Ctrl-C abandons the flush
        left = len(producer)
    if delivery.denied is not None:  # one line: the cause, and what it cost
        err = delivery.denied
        cause = errors.fatal or f"{err.str().removeprefix('Broker: ')} ({_DENIED[err.code()]})"
        raise CliError(f"{cause}: {delivery.failed + left} records not produced to "
                       f"{delivery.topic}")
    if left:
        print(f"tidelog produce: {left} records not acknowledged", file=sys.stderr)
    if delivery.failed:
        print(f"tidelog produce: {delivery.failed} records failed", file=sys.stderr)
    if bad:
        print(f"tidelog produce: {bad} lines skipped", file=sys.stderr)
    if interrupted:
        return 130
    return 1 if left or delivery.failed or bad else 0
