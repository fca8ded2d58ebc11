"""``tidelog perf produce | consume``: the counterparts of kafka-producer-perf-test.sh and
kafka-consumer-perf-test.sh (Kafka's ProducerPerformance and ConsumerPerformance), with their
options and their output lines, so figures read the same way.

``perf produce`` runs on one of two clients (``--client``). ``tidelog``, the default, sends
batches built once from a template and pipelined on tidelog's own connection
(tidelog.client.pipelined): no Python call per record and none of the heavy imports, so a
short run is not mostly start-up; a record's latency is its batch's, from when its first
record was due to the acknowledgement. ``librdkafka`` hands records to confluent-kafka a
thousand at a time (produce_batch where the client has it) and sums the delivery reports per
poll, latency from ``produce()`` to the delivery report as Kafka measures from ``send()`` to
the callback; it takes any librdkafka setting. Either prints a progress line every 5 s
(``N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency.``) and the
final line with the 50th/95th/99th/99.9th latency percentiles. ``perf consume`` (librdkafka)
prints Kafka's CSV header and one summary row (``--show-detailed-stats`` adds a row per
``--reporting-interval``).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tidelog.cli.client_config import (
    CliError,
    add_connection_args,
    client_config,
    make_client,
    pairs,
    timeout_s,
)
from tidelog.client.pipelined import BatchTemplate, PipelinedProducer, ProduceError, error_name

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError, Message, Producer

MB = 1024 * 1024


def register(subparsers: Any) -> None:
    perf = subparsers.add_parser("perf", help="producer / consumer performance tests")
    sub = perf.add_subparsers(dest="perf_command", metavar="produce|consume")
    sub.required = True
    p = sub.add_parser("produce", help="kafka-producer-perf-test.sh")
    add_connection_args(p, "--producer.config")
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", type=int, required=True)
    p.add_argument("--record-size", type=int, required=True, help="bytes per record value")
    p.add_argument("--throughput", type=float, default=-1, help="records/s cap (-1: no limit)")
    p.add_argument("--producer-props", nargs="*", default=[], metavar="K=V")
    p.add_argument("--reporting-interval", type=int, default=5000, metavar="MS")
    p.add_argument("--client", choices=("tidelog", "librdkafka"), default="tidelog",
                   help="tidelog: batches built once and pipelined on its own connection "
                   "(default); librdkafka: confluent-kafka's producer, any librdkafka setting")
    p.set_defaults(func=run_produce, uses_logging=False)  # prints its figures, logs nothing
    c = sub.add_parser("consume", help="kafka-consumer-perf-test.sh")
    add_connection_args(c, "--consumer.config")
    c.add_argument("--topic", required=True)
    c.add_argument("--messages", type=int, required=True)
    c.add_argument("--group", default=f"perf-consumer-{random.randrange(100000)}")
    c.add_argument("--timeout", type=int, default=10000, metavar="MS", help="max idle time")
    c.add_argument("--from-latest", action="store_true")
    c.add_argument("--show-detailed-stats", action="store_true")
    c.add_argument("--reporting-interval", type=int, default=5000, metavar="MS")
    c.add_argument("--hide-header", action="store_true")
    c.add_argument("--consumer-property", action="append", default=[], metavar="K=V")
    c.set_defaults(func=run_consume)


class Stats:
    """ProducerPerformance.Stats: windows for the progress lines, sampled latencies."""

    def __init__(self, num_records: int, interval_ms: int) -> None:
        self.start = self.window_start = time.monotonic()
        self.interval_s = interval_ms / 1000
        self.sampling = max(1, num_records // min(num_records, 500_000))
        self.latencies: list[int] = []
        self.count = self.bytes = self.total_latency = self.max_latency = 0
        self.w_count = self.w_bytes = self.w_latency = self.w_max = 0
        self.iteration = 0

    def record_many(self, latencies_s: list[float], size: int) -> None:
        """The delivery reports served since the last call (latencies in seconds), taken at
        once: sums over the list, every ``sampling``-th kept, one progress check."""
        if not latencies_s:
            return
        ms = [int(x * 1000) for x in latencies_s]
        self.latencies.extend(ms[(-self.iteration) % self.sampling :: self.sampling])
        self._add(len(ms), sum(ms), max(ms), size)

    def record_batch(self, latency_s: float, k: int, size: int) -> None:
        """``k`` records acknowledged together: ``record_many([latency_s] * k, size)``
        without the list."""
        ms = int(latency_s * 1000)
        # the samples record_many keeps: iterations i in [iteration, iteration + k) with
        # i % sampling == 0
        s = self.sampling
        self.latencies.extend([ms] * ((self.iteration + k - 1) // s - (self.iteration - 1) // s))
        self._add(k, k * ms, ms, size)

    def _add(self, n: int, total_ms: int, top_ms: int, size: int) -> None:
        """``n`` records of ``size`` bytes, their latencies summing to ``total_ms`` with
        ``top_ms`` the largest, into the totals and the window; a progress line when due."""
        self.count += n
        self.bytes += n * size
        self.total_latency += total_ms
        self.max_latency = max(self.max_latency, top_ms)
        self.w_count += n
        self.w_bytes += n * size
        self.w_latency += total_ms
        self.w_max = max(self.w_max, top_ms)
        self.iteration += n
        now = time.monotonic()
        if now - self.window_start >= self.interval_s:
            self._print_window(now)
            self.window_start = now
            self.w_count = self.w_bytes = self.w_latency = self.w_max = 0

    def _print_window(self, now: float) -> None:
        elapsed = max(now - self.window_start, 1e-9)
        rps = self.w_count / elapsed
        print(
            f"{self.w_count} records sent, {rps:.1f} records/sec "
            f"({self.w_bytes / elapsed / MB:.2f} MB/sec), "
            f"{self.w_latency / max(self.w_count, 1):.1f} ms avg latency, "
            f"{float(self.w_max):.1f} ms max latency.",
            flush=True,
        )

    def summary(self) -> str:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        rps = self.count / elapsed
        mbs = self.bytes / elapsed / MB
        p50, p95, p99, p999 = percentiles(sorted(self.latencies), 0.5, 0.95, 0.99, 0.999)
        return (
            f"{self.count} records sent, {rps:.1f} records/sec ({mbs:.2f} MB/sec), "
            f"{self.total_latency / max(self.count, 1):.2f} ms avg latency, "
            f"{float(self.max_latency):.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, "
            f"{p99} ms 99th, {p999} ms 99.9th."
        )


def percentiles(ordered: list[int], *ps: float) -> list[int]:
    """ProducerPerformance.percentiles: the sample at index ``int(p * size)``."""
    if not ordered:
        return [0 for _ in ps]
    return [ordered[min(int(p * len(ordered)), len(ordered) - 1)] for p in ps]


BATCH = 1000  # records handed to librdkafka per call


def run_produce(args: argparse.Namespace) -> int:
    conf = client_config(args, {"client.id": "perf-producer-client"}, {})
    conf.update(pairs(args.producer_props, "--producer-props"))
    payload = random.Random(0).randbytes(args.record_size)
    if args.client == "tidelog":
        return _produce_tidelog(args, conf, payload)
    return _produce_librdkafka(args, conf, payload)


# librdkafka's defaults for the settings the tidelog client takes (as --client librdkafka
# runs with them), but Kafka's max.in.flight.requests.per.connection (librdkafka's is 10^6)
TIDELOG_DEFAULTS = {
    "acks": "-1",
    "linger.ms": "5",
    "batch.size": "1000000",
    "batch.num.messages": "10000",
    "max.in.flight.requests.per.connection": "5",
    "request.timeout.ms": "30000",
    "enable.idempotence": "false",
}
_ALIASES = {
    "request.required.acks": "acks",
    "queue.buffering.max.ms": "linger.ms",
    "max.in.flight": "max.in.flight.requests.per.connection",
}
_TAKEN_AS_IS = {"bootstrap.servers", "client.id", "log_level", "logger"}


def tidelog_settings(conf: dict[str, Any]) -> dict[str, str]:
    """The tidelog client's settings from a librdkafka-style configuration: its defaults,
    overridden by the (aliased) keys it knows; any other key is an error naming
    ``--client librdkafka``, which takes every librdkafka setting."""
    out = dict(TIDELOG_DEFAULTS)
    for key, value in conf.items():
        name = _ALIASES.get(key, key)
        if name in out:
            out[name] = str(value).strip().lower()
        elif key == "security.protocol" and str(value).upper() == "PLAINTEXT":
            continue
        elif key not in _TAKEN_AS_IS:
            raise CliError(f"the tidelog client does not take {key}; use --client librdkafka "
                           "for librdkafka's settings")  # fmt: skip
    if out["acks"] == "all":
        out["acks"] = "-1"
    if out["acks"] not in ("-1", "0", "1"):
        raise CliError(f"acks={out['acks']}: expected all, -1, 0 or 1")
    if out["enable.idempotence"] not in ("true", "false"):
        raise CliError(f"enable.idempotence={out['enable.idempotence']}: expected true or false")
    if out["enable.idempotence"] == "true" and out["acks"] != "-1":
        raise CliError("enable.idempotence=true requires acks=all")
    for key in ("linger.ms", "batch.size", "batch.num.messages",
                "max.in.flight.requests.per.connection", "request.timeout.ms"):  # fmt: skip
        if not out[key].isdigit():
            raise CliError(f"{key}={out[key]}: expected a non-negative integer")
    return out


def _produce_tidelog(args: argparse.Namespace, conf: dict[str, Any], payload: bytes) -> int:
    settings = tidelog_settings(conf)
    template = BatchTemplate(payload, max(1, int(settings["batch.num.messages"])),
                             int(settings["batch.size"]))  # fmt: skip
    stats = Stats(args.num_records, args.reporting_interval)
    try:
        producer = PipelinedProducer(
            str(conf["bootstrap.servers"]), args.topic, acks=int(settings["acks"]),
            request_timeout_ms=int(settings["request.timeout.ms"]),
            max_in_flight=int(settings["max.in.flight.requests.per.connection"]),
            client_id=str(conf.get("client.id", "perf-producer-client")),
            idempotent=settings["enable.idempotence"] == "true",
        )  # fmt: skip
    except ProduceError as e:
        raise CliError(f"cannot reach the bootstrap servers {conf['bootstrap.servers']}: {e}"
                       if e.code == -1 else str(e)) from None
    except ValueError as e:
        raise CliError(f"{e}") from None
    failures: dict[str, int] = {}

    def take() -> None:
        for sent in producer.done:
            if sent.error:
                what = error_name(sent.error) + (f": {sent.message}" if sent.message else "")
                failures[what] = failures.get(what, 0) + sent.records
            else:
                stats.record_batch(sent.acked - sent.created, sent.records, args.record_size)
        producer.done.clear()

    try:
        _drive(producer, template, args.num_records, args.throughput,
               int(settings["linger.ms"]) / 1000, take)  # fmt: skip
    except ProduceError as e:
        raise CliError(f"{e}") from None
    finally:
        producer.close()
    print(stats.summary())
    for what, n in failures.items():
        print(f"tidelog perf produce: {n} records failed: {what}", file=sys.stderr)
    return 1 if failures else 0


def _drive(producer: PipelinedProducer, template: BatchTemplate, n: int, throughput: float,
           linger_s: float, take: Callable[[], None]) -> None:
    """Record ``i`` is due at ``start + i / throughput`` (at once without a cap, as the
    ThroughputThrottler lets it go); a batch goes when it is full, when its first record
    has waited ``linger_s``, or with the last record. One sticky partition per batch."""
    parts = producer.partitions
    rng = random.Random()
    partition = rng.choice(parts)
    start = time.monotonic()
    sent = 0
    while sent < n:
        now = time.monotonic()
        due = n if throughput <= 0 else min(n, int((now - start) * throughput) + 1)
        first_due = now if throughput <= 0 else start + sent / throughput
        ready = due - sent
        if ready and (ready >= template.max_records or due == n or now >= first_due + linger_s):
            k = min(ready, template.max_records)
            producer.send(partition, template, k, first_due)
            sent += k
            take()
            if len(parts) > 1:  # the sticky partitioner moves on after each batch
                partition = rng.choice([p for p in parts if p != partition])
            continue
        if ready:  # wait for the batch to fill or to have lingered enough
            wake = min(first_due + linger_s, start + (sent + template.max_records) / throughput)
        else:
            wake = start + sent / throughput
        producer.poll(max(wake - now, 0.0))
        take()
    producer.flush()
    take()


def _produce_librdkafka(args: argparse.Namespace, conf: dict[str, Any], payload: bytes) -> int:
    from confluent_kafka import KafkaError, Producer

    stats = Stats(args.num_records, args.reporting_interval)
    failed = [0]
    delivered: list[float] = []
    keep = delivered.append

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        # librdkafka times each message from produce() to its acknowledgement, as Kafka's
        # tool times send() to the callback; the figures are summed per poll, not here
        if err is None:
            keep(msg.latency() or 0.0)
        else:
            failed[0] += 1

    producer = make_client(Producer, {**conf, "on_delivery": on_delivery})
    # with a throughput cap, chunks of about a millisecond's worth of records
    chunk = BATCH if args.throughput <= 0 else int(max(1, min(BATCH, args.throughput / 1000)))
    produce_chunk = _batch_producer(producer, args.topic, payload, failed, KafkaError._QUEUE_FULL)
    start = time.monotonic()
    sent = 0
    while sent < args.num_records:
        k = min(chunk, args.num_records - sent)
        produce_chunk(k)
        sent += k
        producer.poll(0)
        stats.record_many(delivered, args.record_size)
        delivered.clear()
        if args.throughput > 0:  # ThroughputThrottler: sleep back to the target rate
            due = start + sent / args.throughput
            while (ahead := due - time.monotonic()) > 0:
                producer.poll(ahead)  # returns early when it serves a delivery report
    producer.flush()
    stats.record_many(delivered, args.record_size)
    print(stats.summary())
    if failed[0]:
        print(f"tidelog perf produce: {failed[0]} records failed", file=sys.stderr)
        return 1
    return 0


def _batch_producer(producer: Producer, topic: str, payload: bytes, failed: list[int],
                    queue_full: int) -> Callable[[int], None]:
    """A function handing ``k`` records to librdkafka: one produce_batch call where the
    client has it (a full local queue: serve delivery reports, then the rest), else one
    produce() per record."""
    if not hasattr(producer, "produce_batch"):
        def each(k: int) -> None:
            for _ in range(k):
                _when_room(producer, topic, payload)
        return each

    full_chunk: list[dict[str, Any]] = []

    def batch(k: int) -> None:
        nonlocal full_chunk
        while k:
            if len(full_chunk) != k:  # the same dicts serve every chunk until one fails
                full_chunk = [{"value": payload} for _ in range(k)]
            msgs = full_chunk
            queued = producer.produce_batch(topic, msgs)
            if queued < k:
                full_chunk = []  # failed ones carry an _error now
            full = sum(1 for m in msgs[queued:]
                       if (e := m.get("_error")) is not None and e.code() == queue_full)
            failed[0] += k - queued - full
            k = full
            if k:
                producer.poll(0.05)
    return batch


def _when_room(producer: Producer, topic: str, payload: bytes) -> None:
    while True:
        try:
            producer.produce(topic, payload)
            return
        except BufferError:  # the local queue is full: serve delivery reports, then retry
            producer.poll(0.05)


def run_consume(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer

    defaults = {
        "group.id": args.group,
        "client.id": "perf-consumer-client",
        "auto.offset.reset": "latest" if args.from_latest else "earliest",
        "enable.auto.commit": True,
    }
    overrides = pairs(args.consumer_property, "--consumer-property")
    consumer = make_client(Consumer, client_config(args, defaults, overrides),
                           timeout_s(args.timeout, "--timeout"))
    joined: list[float] = []
    start_wall, start = time.time(), time.monotonic()
    consumer.subscribe([args.topic], on_assign=lambda c, ps: joined.append(time.monotonic()))
    if not args.hide_header:
        extra = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
        first = "time, threadId" if args.show_detailed_stats else "start.time, end.time"
        print(f"{first}, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec{extra}")
    n, nbytes = _consume_messages(consumer, args)
    end = time.monotonic()
    consumer.close()
    elapsed = max(end - start, 1e-9)
    join_ms = int(((joined[0] if joined else start) - start) * 1000)
    fetch_s = max(elapsed - join_ms / 1000, 1e-9)
    mb = nbytes / MB
    if not args.show_detailed_stats:
        print(
            f"{_date(start_wall)}, {_date(start_wall + elapsed)}, {mb:.4f}, {mb / elapsed:.4f}, "
            f"{n}, {n / elapsed:.4f}, {join_ms}, {int(fetch_s * 1000)}, {mb / fetch_s:.4f}, "
            f"{n / fetch_s:.4f}"
        )
    return 0


def _consume_messages(consumer: Consumer, args: argparse.Namespace) -> tuple[int, int]:
    """Consume up to ``--messages`` (or until ``--timeout`` passes with none), printing the
    detailed stats lines when asked; the records and bytes consumed."""
    n = nbytes = 0
    last_seen = last_report = time.monotonic()
    last_n = last_bytes = 0
    while n < args.messages:
        msgs = consumer.consume(min(10_000, args.messages - n), 0.1)
        now = time.monotonic()
        for m in msgs:
            if m.error() is None:
                n += 1
                nbytes += len(m.value() or b"") + len(m.key() or b"")
        if msgs:
            last_seen = now
        elif (now - last_seen) * 1000 > args.timeout:
            print(
                f"WARNING: Exiting before consuming the expected number of messages: timeout "
                f"({args.timeout} ms) exceeded. You can use the --timeout option to increase "
                "the timeout."
            )
            break
        if args.show_detailed_stats and (now - last_report) * 1000 >= args.reporting_interval:
            dt = now - last_report
            mb = (nbytes - last_bytes) / MB
            print(
                f"{_date(time.time())}, 0, {nbytes / MB:.4f}, {mb / dt:.4f}, {n}, "
                f"{(n - last_n) / dt:.4f}, 0, {int(dt * 1000)}, {mb / dt:.4f}, "
                f"{(n - last_n) / dt:.4f}"
            )
            last_report, last_n, last_bytes = now, n, nbytes
    return n, nbytes


def _date(ts: float) -> str:
    """Kafka's default --date-format, yyyy-MM-dd HH:mm:ss:SSS."""
    from datetime import datetime  # consume's only: not in produce's start-up

    d = datetime.fromtimestamp(ts)
    return d.strftime("%Y-%m-%d %H:%M:%S:") + f"{d.microsecond // 1000:03d}"
