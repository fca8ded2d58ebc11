"""Produce->ack and produce->consume latency percentiles at a steady rate: tidelog (writer
thread and on the loop) and Tansu in the same run, alternating.

Per scenario (records/s, partitions) and broker: a fresh broker in a child process, the topic
created with that many partitions, then two child processes: a librdkafka consumer assigned
every partition, and a librdkafka producer (confluent-kafka; idempotent, acks=all,
linger.ms=0, 100 B values spread over the partitions) at the rate, paced, for --warmup then
--seconds. The producer keeps librdkafka's own per-record latency (produce() to the
acknowledgement) of the measured part; each value carries its send time (CLOCK_MONOTONIC,
shared by the processes), the consumer the time it got it. Printed: p50/p99/p99.9/max of
each, median [min .. max] over --runs, the broker's CPU time per record sent (user + system
of its process over the run, consumer included, the topic's creation not; and over the
measured part alone, without the warm-up's first appends and heap freeze), how long its main
thread (the event loop's) sat runnable waiting for a core per record sent (Linux schedstat:
the scheduler's share of the tail), the consumer's Fetch requests per second and records per Fetch while it got the
measured records (librdkafka's own count, its statistics: a broker that answers a Fetch
sooner gets more of them, each with fewer records) and the load average. ``--pacing spin``
paces as rdkafka_performance's ``-r`` does: poll until the next record is due, a second busy
process on the machine.

    .venv/bin/python bench/tail_latency.py [--runs 3] [--seconds 60] [--warmup 10]
        [--scenarios 5000x1,20000x1,5000x1000]
        [--brokers tidelog,kernel-slice,python-produce,python-take,loop,tansu,baseline,baseline-files,baseline+N]
        [--loads paced,rdkperf] [--beside quiet,busy] [--pacing sleep|spin]
        [--client socket.nagle.disable=true] [--other-src DIR] [--rdkafka-performance PATH]

Goal 4's form (issue 43): ``--brokers tidelog,baseline --no-consume --loads paced,rdkperf
--beside quiet,busy --scenarios 5000x1,5000x1000``. Each round runs every broker once, fresh,
with the same warm-up, in an order rotated round by round (ABBA for two brokers), so no
broker always runs first or last in a sitting whose load drifts. ``--loads``: ``paced``, the
confluent-kafka producer above; ``rdkperf``, librdkafka's own ``rdkafka_performance -P -r
RATE -a -1 -l`` (``--rdkafka-performance``, built from librdkafka's examples/), idempotence,
linger 0, its per-record delivery latencies with the warm-up's records dropped.
``--beside busy`` starts a CPU-bound process (a Python busy loop) before each broker's run
and stops it after. Printed per case: each broker's figures as median [min .. max] over the
rounds, then each tidelog's p99 and p99.9 over the baseline's of the same round, and in how
many rounds that ratio is <= 2.

``kernel-slice`` is tidelog with ``TIDELOG_LOOP_SLICE_US=0``: its loop's thread keeps the
kernel's scheduler slice, not serve's 100 us (server/sched_slice.py). ``other`` is a second
tidelog source tree (``--other-src DIR``, put on PYTHONPATH): the build before a change,
alternated with the current one in the same sitting. ``python-produce`` is tidelog with
``TIDELOG_PRODUCE_ONE=0``: the common Produce answered by its Python twin rather than the
native call (server/produce_one.py). ``python-take`` is tidelog with ``TIDELOG_TAKE_ONE=0``:
the native call's frame taken and answered by the connection's Python steps rather than
``take_one_now`` (server/connection_now.py).

``baseline`` is bench/baseline_broker.py (CRC check, offset patch, one write, answer: no
fetch, every topic with the scenario's partitions): produce->ack only, the floor this machine
and client give a Python broker under the same load. ``baseline-files`` is the same broker
writing a file per partition (``--file-per-partition``), as Kafka's layout does: with both,
the ratios over each show how much of a gap at 1,000 partitions is the layout's.
``baseline+N`` is the one-file floor spending N us more of its loop's CPU on each Produce
(its ``--spin-us``): what a broker's CPU per request alone does to the tails, beside
tidelog's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import broker as broker_bench
import rdkafka_load
from baseline import baseline_broker
from confluent_kafka.admin import AdminClient, NewTopic

import native

# The producer sleeps until each record is due: poll(t) waits whole milliseconds (under 1 ms it
# returns at once), so pacing with it spun a core at 100% and took it from the broker.
PRODUCE = r"""
import json, struct, sys, time
from confluent_kafka import Producer
bootstrap, topic, rate, seconds, warmup, parts = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
client, spin = json.loads(sys.argv[7]), sys.argv[8] == "spin"
lat, failed, measuring = [], [0], [False]
def dr(err, msg):
    if err is not None:
        failed[0] += 1
    elif measuring[0]:
        lat.append(msg.latency())
p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
              "linger.ms": 0, "on_delivery": dr, **client})
pad = b"v" * 91
start = time.monotonic()
end = start + warmup + seconds
i = 0
while True:
    now = time.monotonic()
    if now >= end:
        break
    measuring[0] = now >= start + warmup
    p.produce(topic, struct.pack(">?q", measuring[0], time.monotonic_ns()) + pad,
              partition=i % parts)
    i += 1
    p.poll(0)
    due = start + i / rate
    if spin:  # rdkafka_performance -r: poll until the next record is due (a busy core)
        while time.monotonic() < due:
            p.poll(0)
    elif (ahead := due - time.monotonic()) > 0:
        time.sleep(ahead)
p.flush(60)
print(json.dumps({"lat": [x * 1000 for x in lat], "failed": failed[0], "sent": i}))
"""

CONSUME = r"""
import json, struct, sys, time
from confluent_kafka import Consumer, TopicPartition
bootstrap, topic, parts, total = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
client = json.loads(sys.argv[5])
fetches = [0, None, None]  # librdkafka's count of Fetch requests sent; at the first and the
def stats(raw):            # last measured record
    fetches[0] = sum(b["req"].get("Fetch", 0) for b in json.loads(raw)["brokers"].values())
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tail", "enable.auto.commit": False,
              "fetch.wait.max.ms": 100, "statistics.interval.ms": 200, "stats_cb": stats,
              **client})
c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
print("ready", flush=True)
lat = []
end = time.monotonic() + total
while time.monotonic() < end:
    m = c.poll(0.1)  # consume(n, t) would hold each record until n or t: poll returns at once
    if m is not None and m.error() is None:
        now = time.monotonic_ns()
        measured, sent = struct.unpack_from(">?q", m.value())
        if measured:
            lat.append((now - sent) / 1e6)
            if fetches[1] is None:
                fetches[1] = (fetches[0], now)
            fetches[2] = (fetches[0], now)
c.close()
first, last = fetches[1] or (0, 0), fetches[2] or (0, 0)
print(json.dumps({"lat": lat, "fetches": last[0] - first[0], "seconds": (last[1] - first[1]) / 1e9}))
"""

Factory = Callable[[], AbstractContextManager[tuple[str, int]]]


def brokers(names: list[str], other_src: str | None = None) -> list[tuple[str, Factory]]:
    out: list[tuple[str, Factory]] = []
    for name in names:
        if name in ("writer", "tidelog"):  # tidelog: its defaults (the writer thread)
            out.append(("tidelog (writer thread)", lambda: broker_bench.tidelog_broker()))
        elif name == "other":
            if not other_src:
                raise SystemExit("broker 'other' needs --other-src DIR")
            out.append(("tidelog (--other-src)", lambda: broker_bench.tidelog_broker(
                env={"PYTHONPATH": other_src})))
        elif name == "kernel-slice":  # the loop's thread keeps the kernel's (sched_slice.py)
            out.append(("tidelog (kernel's slice)", lambda: broker_bench.tidelog_broker(
                env={"TIDELOG_LOOP_SLICE_US": "0"})))
        elif name == "python-produce":  # the common Produce's Python twin (produce_one.py)
            out.append(("tidelog (Python Produce)", lambda: broker_bench.tidelog_broker(
                env={"TIDELOG_PRODUCE_ONE": "0"})))
        elif name == "python-take":  # its frame taken by Python (connection_now.py)
            out.append(("tidelog (Python take)", lambda: broker_bench.tidelog_broker(
                env={"TIDELOG_TAKE_ONE": "0"})))
        elif name == "loop":
            out.append(("tidelog (on the loop)", lambda: broker_bench.tidelog_broker(
                overrides={"tidelog.log.append.writer.enable": "false"})))
        elif name == "tansu":
            tansu = native.tansu_path()
            if tansu is None:
                raise SystemExit("broker 'tansu': no Tansu binary found")
            out.append(("tansu", lambda t=tansu: broker_bench.tansu_broker(t)))
        elif name == "baseline":
            out.append((BASELINE, baseline_broker))
        elif name == "baseline-files":
            out.append((BASELINE_FILES, baseline_broker))  # (measure: per partition)
        elif name.startswith("baseline+") and name[9:].isdigit():
            label = f"baseline +{int(name[9:])} us/request"
            FLOORS[label] = (False, int(name[9:]))
            out.append((label, baseline_broker))
        else:
            raise SystemExit(f"unknown broker {name!r}: writer (or tidelog), other, "
                             "kernel-slice, python-produce, python-take, loop, tansu, baseline, baseline-files, "
                             "baseline+N")
    return out


BASELINE = "baseline (floor)"
BASELINE_FILES = "baseline, file/partition"  # (the floor with Kafka's layout of files)
# the minimal brokers by label: (a file per partition, us of CPU spent more per Produce);
# ``baseline+N`` is the floor made N us a request slower (its ``--spin-us``), compared with
# the floor as any broker is
FLOORS: dict[str, tuple[bool, int]] = {BASELINE: (False, 0), BASELINE_FILES: (True, 0)}


def quantiles(lat: list[float]) -> dict[str, float]:
    lat = sorted(lat)
    if not lat:
        return {"p50": 0.0, "p99": 0.0, "p99.9": 0.0, "max": 0.0}

    def q(x: float) -> float:
        return lat[min(len(lat) - 1, int(x * len(lat)))]

    return {"p50": q(0.5), "p99": q(0.99), "p99.9": q(0.999), "max": lat[-1]}


def one(bootstrap: str, topic: str, rate: float, parts: int, seconds: float, warmup: float,
        consume: bool = True, client: dict[str, str] | None = None,
        spin: bool = False, load: str = "paced", perf: str = "rdkafka_performance"
        ) -> tuple[dict[str, float], dict[str, float], int, int, tuple[float, float]]:
    """One run: (produce->ack quantiles, produce->consume quantiles, failed records, records
    sent, (the consumer's Fetch requests per second, records per Fetch) while it got the
    measured records, by librdkafka's own count); ``client`` adds librdkafka settings to the
    producer and the consumer; ``spin`` paces as rdkafka_performance's ``-r`` does (poll in a loop until the next record is due,
    keeping a core busy) instead of sleeping; ``load`` "rdkperf" produces with librdkafka's
    rdkafka_performance (the binary ``perf``) instead, and then nothing consumes."""
    if load == "rdkperf":
        lat, failed, sent = rdkafka_load.performance_latencies(
            perf, bootstrap, topic, int(rate), seconds, warmup, parts)
        return quantiles(lat), quantiles([]), failed, sent, (0.0, 0.0)
    settings = json.dumps(client or {})
    consumer = subprocess.Popen(
        [sys.executable, "-c", CONSUME if consume else "print('ready', flush=True)",
         bootstrap, topic, str(parts), str(seconds + warmup + 10), settings],
        stdout=subprocess.PIPE, text=True)
    assert consumer.stdout is not None
    consumer.stdout.readline()  # assigned
    produced = subprocess.run(
        [sys.executable, "-c", PRODUCE, bootstrap, topic, str(rate), str(seconds),
         str(warmup), str(parts), settings, "spin" if spin else "sleep"],
        capture_output=True, text=True)
    if produced.returncode != 0:
        consumer.kill()
        raise RuntimeError(f"the producer failed: {produced.stderr[-2000:]}")
    out, _ = consumer.communicate(timeout=seconds + warmup + 60)
    p = json.loads(produced.stdout.strip().splitlines()[-1])
    c = json.loads(out.strip().splitlines()[-1]) if consume else {"lat": []}
    fetched, spent = int(c.get("fetches", 0)), float(c.get("seconds", 0.0))
    fetching = (fetched / spent if spent > 0 else 0.0,
                len(c["lat"]) / fetched if fetched > 0 else 0.0)
    return (quantiles(p["lat"]), quantiles(c["lat"]), int(p["failed"]), int(p["sent"]),
            fetching)


def queued_seconds(pid: int) -> float:
    """How long the main thread of ``pid`` has been runnable but not running (Linux
    schedstat's run-queue delay); 0 where the kernel does not say."""
    try:
        with open(f"/proc/{pid}/task/{pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _create(bootstrap: str, topic: str, parts: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, parts, 1)]).values():
        f.result(60)


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} [{min(values):.2f} .. {max(values):.2f}]"


Result = tuple[dict[str, float], dict[str, float], int, float, float, tuple[float, float],
               float, float]


def measure(name: str, factory: Factory, rate: int, parts: int, args: argparse.Namespace,
            load: str, client: dict[str, str]) -> tuple[Result, float]:
    """One broker, fresh, under one load: (produce->ack quantiles, produce->consume
    quantiles, failed, broker CPU us/record, loop queued us/record, fetching, broker CPU
    and loop queued us/record over the measured part), load avg."""
    floor = FLOORS.get(name)
    with (baseline_broker(parts, *floor) if floor else factory()) as (bootstrap, pid):
        topic = f"tail-{time.monotonic_ns()}"
        if not floor:  # (the baseline has every topic) created outside the CPU measured
            _create(bootstrap, topic, parts)
        loadavg = os.getloadavg()[0]
        before, queued_before = native.cpu_seconds(pid), queued_seconds(pid)
        window = _SteadyWindow(pid, args.warmup, args.seconds)
        ack, consumed, failed, sent, fetch_rate = one(
            bootstrap, topic, rate, parts, args.seconds, args.warmup,
            not args.no_consume and not floor, client,
            spin=args.pacing == "spin", load=load, perf=args.rdkafka_performance)
        cpu = (native.cpu_seconds(pid) - before) / sent * 1e6
        queued = (queued_seconds(pid) - queued_before) / sent * 1e6
        steady, steady_queued = window.per_record(rate)
    return (ack, consumed, failed, cpu, queued, fetch_rate, steady, steady_queued), loadavg


class _SteadyWindow:
    """The broker's CPU over the measured part only: read by two timers, half a second
    after the warm-up's end and half a second before the run's (the load generator's own
    start-up shifts its clock a little against these), so the topic's first appends, the
    heap freeze after hosting it and the final flush are outside it."""

    GUARD_S = 0.5

    def __init__(self, pid: int, warmup: float, seconds: float) -> None:
        self._pid = pid
        self._span = seconds - 2 * self.GUARD_S
        self._reads: list[tuple[float, float]] = []
        self._timers = [threading.Timer(at, self._read) for at in (
            warmup + self.GUARD_S, warmup + seconds - self.GUARD_S)]
        for t in self._timers:
            t.daemon = True
            t.start()

    def _read(self) -> None:
        self._reads.append((native.cpu_seconds(self._pid), queued_seconds(self._pid)))

    def per_record(self, rate: float) -> tuple[float, float]:
        """us of broker CPU, and of its loop thread's run-queue wait, per record sent at
        ``rate`` inside the window (0 if unread)."""
        for t in self._timers:
            t.cancel()
        if len(self._reads) < 2 or self._span <= 0:
            return 0.0, 0.0
        (cpu0, q0), (cpu1, q1) = self._reads[:2]
        per = rate * self._span
        return (cpu1 - cpu0) / per * 1e6, (q1 - q0) / per * 1e6


@contextmanager
def second_process(on: bool) -> Iterator[None]:
    """Goal 4's "second CPU-bound process on the machine": a Python busy loop, started
    before the broker's run and stopped after it (nothing when ``on`` is false)."""
    if not on:
        yield
        return
    busy = subprocess.Popen([sys.executable, "-c", "while 1: pass"])
    try:
        yield
    finally:
        busy.kill()
        busy.wait()


def main() -> None:
    args = _parse()
    chosen = brokers(args.brokers.split(","), args.other_src)
    client = dict(kv.split("=", 1) for kv in args.client)
    scenarios = [tuple(int(x) for x in s.split("x")) for s in args.scenarios.split(",")]
    for rate, parts in scenarios:
        for load in args.loads.split(","):
            for beside in args.beside.split(","):
                rounds: list[dict[str, Result]] = []
                loads: list[float] = []
                for r in range(args.runs):
                    # rotated each round (ABBA for two): no broker always runs first
                    order = chosen[r % len(chosen):] + chosen[:r % len(chosen)]
                    got: dict[str, Result] = {}
                    for name, factory in order:
                        with second_process(beside == "busy"):
                            got[name], avg = measure(name, factory, rate, parts, args,
                                                     load, client)
                        loads.append(avg)
                    rounds.append(got)
                loads.append(os.getloadavg()[0])
                print(f"{rate:,} records/s of 100 B over {parts} partition(s), idempotent "
                      f"acks=all linger 0{''.join(f', {k}={v}' for k, v in client.items())}"
                      f", load generator {_LOADS[load]}, "
                      f"{'beside one CPU-bound process' if beside == 'busy' else 'quiet'}, "
                      f"{args.seconds:.0f} s after {args.warmup:.0f} s warm-up, {args.runs} "
                      f"rounds (brokers rotated); load average {fmt(loads).strip()}; ms, "
                      f"median [min .. max]")
                _print_rounds(rounds, [n for n, _ in chosen])
                sys.stdout.flush()


_LOADS = {"paced": "confluent-kafka paced", "rdkperf": "rdkafka_performance -r"}


def _print_rounds(rounds: list[dict[str, Result]], names: list[str]) -> None:
    for name in names:
        runs = [r[name] for r in rounds]
        failed = sum(r[2] for r in runs)
        for label, idx in (("produce->ack", 0), ("produce->consume", 1)):
            if idx == 1 and not any(r[1]["max"] for r in runs):
                continue  # not consumed
            cells = "  ".join(f"{k} {fmt([r[idx][k] for r in runs])}"  # type: ignore[index]
                              for k in ("p50", "p99", "p99.9", "max"))
            print(f"  {name:<24} {label:<17} {cells}" + (
                f"  broker CPU/record {fmt([r[3] for r in runs]).strip()} us (measured "
                f"part {fmt([r[6] for r in runs]).strip()}), loop "
                f"queued/record {fmt([r[4] for r in runs]).strip()} us (measured part "
                f"{fmt([r[7] for r in runs]).strip()})" if idx == 0 else "")
                + (f"  ({failed} failed)" if failed and idx == 0 else "")
                + (_fetch_cells([r[5] for r in runs]) if idx == 1 else ""))
    for floor in (BASELINE, BASELINE_FILES):  # (each broker over each floor before it)
        if floor not in names:
            continue
        for name in names:
            if name == floor or (floor == BASELINE_FILES and name == BASELINE):
                continue
            over: list[str] = []
            for k in ("p99", "p99.9"):
                ratios = [r[name][0][k] / max(r[floor][0][k], 1e-3) for r in rounds]
                within = sum(x <= 2 for x in ratios)
                over.append(f"{k} {fmt(ratios)} ({within}/{len(ratios)} rounds <= 2x)")
            print(f"  {name:<24} produce->ack / {floor} per round: " + "  ".join(over))


def _parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3, help="rounds; each runs every broker once")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--scenarios", default="5000x1,20000x1,5000x1000")
    ap.add_argument("--brokers", default="writer,loop,tansu")
    ap.add_argument("--loads", default="paced",
                    help="paced (confluent-kafka, --pacing), rdkperf (rdkafka_performance "
                         "-P -r RATE -a -1 -l, idempotence, linger 0): comma-separated")
    ap.add_argument("--beside", default="quiet",
                    help="quiet, busy (a CPU-bound process started and stopped with each "
                         "broker's run): comma-separated")
    ap.add_argument("--rdkafka-performance",
                    default=os.environ.get("RDKAFKA_PERFORMANCE", "rdkafka_performance"),
                    help="librdkafka's examples/rdkafka_performance (default "
                         "$RDKAFKA_PERFORMANCE, else on PATH)")
    ap.add_argument("--no-consume", action="store_true",
                    help="produce->ack only (no consumer loading the broker)")
    ap.add_argument("--pacing", choices=("sleep", "spin"), default="sleep",
                    help="sleep until each record is due, or poll in a loop as "
                         "rdkafka_performance -r does (a second busy process)")
    ap.add_argument("--other-src", help="a second tidelog source tree, run as broker "
                    "'other' (PYTHONPATH): two builds alternated in one sitting")
    ap.add_argument("--client", action="append", default=[], metavar="KEY=VALUE",
                    help="a librdkafka setting for the producer and the consumer "
                         "(e.g. socket.nagle.disable=true); repeatable")
    return ap.parse_args()


def _fetch_cells(rates: list[tuple[float, float]]) -> str:
    """The consumer's Fetch rate and records per Fetch (librdkafka's count): a broker that
    answers Fetches sooner gets more of them, each with fewer records."""
    if not any(r for r, _ in rates):
        return ""
    return (f"  consumer Fetches/s {fmt([r for r, _ in rates]).strip()}, records/Fetch "
            f"{fmt([n for _, n in rates]).strip()}")


if __name__ == "__main__":
    main()
