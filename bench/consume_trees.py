"""Consume throughput of tidelog trees side by side, and Tansu, alternating in one sitting:
whether a change of consume figures between sittings is the machine's load or the code, and
what a consumed record costs each broker.

Each tree is a ``src`` directory of a checkout (``git worktree add DIR COMMIT``, its native
core built there with ``setup.py build_ext --inplace``) served as ``tidelog serve`` with
that directory on PYTHONPATH. Each run starts every broker in turn (fresh log dir; the order
reversed every other run), produces the records with bench/broker.py's producer (acks=1,
linger.ms=5, one partition), reads a few records of another topic with the same consumer
settings and commits them (the first consumer's one-time costs -- the group coordinator's
topic of 50 partitions, first-use imports -- stay out of the figure), then times one
consumer reading them back (one partition from the beginning), taking the broker's CPU over
the read: the on-CPU nanoseconds of every thread of the process
(/proc/PID/task/*/schedstat), and the client's (this process, all threads).

Clients (``--client``): ``ctypes`` (default) is bench/rdkafka_load.py's consumer,
librdkafka with no Python per record (up to 10,000 messages a call), so that the rate is
the brokers' and librdkafka's own; ``python`` is confluent-kafka's Consumer (a Python
Message per record, ~1 us of client CPU each: one consumer then reads ~100,000 records/s of
100 B from any broker, the figure measuring the client).

Printed per run, then per size: each broker's rate, its CPU and the client's per record,
and the client's busiest thread (librdkafka's ``rdk:brokerN``, which reads and parses the
answers): its CPU per record and the share of the read it spent on a CPU or waiting for
one (near 100%, that thread was never idle and the client, not the broker, set the rate);
then each tree against Tansu, each pair of trees, and with ``--ideal`` each tree against
the ideal servers, median [min .. max] over the runs.

Consumer shapes (``--shape``): ``big`` (fetch.max.bytes 50 MiB, max.partition.fetch.bytes
10 MiB: responses larger than the socket's send buffer), ``default`` (librdkafka's defaults:
1 MiB per partition), ``committed`` (``big`` with isolation.level=read_committed;
librdkafka's default is read_committed, the ``big`` shape reads read_uncommitted).

``--ideal`` adds two brokers to every run: bench/ideal_fetch_broker.py serving the bytes
of the first tree's log (produced once before the runs: the same records, batched by the
same producer, byte for byte what tidelog serves), each Fetch a precomputed slice with no
per-record work -- ``ideal`` whole batches up to the consumer's limit, ``ideal-cut`` the
limit's bytes with the last batch cut as Kafka's ``LogSegment.read`` does. Its rate is
what the consumer itself can take: the ceiling of any broker with this client.

``--trace`` (ctypes client) prints after each read where its time went, Fetch by Fetch
(bench/fetch_trace.py): fetches per second and per MiB, bytes and records per answer, the
the sum of the round trips and the client's time outside them; for a tidelog tree also the
broker's own Fetch RequestMetrics over the read (its HTTP listener: the last Fetch's long
poll is in them) and the producer's batches as the log keeps them.

    .venv/bin/python bench/consume_trees.py --tree now=src --tree then=../old/src
        [--runs 4] [--sizes 100,1024] [--scale 5] [--shape big] [--client ctypes]
        [--no-tansu] [--ideal] [--trace]
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import broker as bb
import confluent_kafka as ck
import fetch_trace
import rdkafka_load

COUNTS = {100: 200_000, 1024: 50_000}
SHAPES: dict[str, dict[str, str | int]] = {
    "big": {"isolation.level": "read_uncommitted"},
    "default": {"fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 1048576},
    "committed": {"isolation.level": "read_committed"},
}


def cpu_seconds(pid: int) -> dict[str, float]:
    """On-CPU seconds of every live thread of ``pid``, by thread id (ns resolution, unlike
    /proc's ticks)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[task.name] = int((task / "schedstat").read_text().split()[0]) / 1e9
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return out


def cpu_since(pid: int, before: dict[str, float]) -> float:
    """``pid``'s CPU seconds since ``before``, over the threads alive now: a thread that
    ended meanwhile (an earlier connection's, in a server of a thread per connection) takes
    its whole time out of a plain sum, and is left out instead."""
    return sum(t - before.get(tid, 0.0) for tid, t in cpu_seconds(pid).items())


IDEAL = {"ideal": "whole", "ideal-cut": "kafka"}  # broker name: its --cut


def factory(name: str, trees: dict[str, str], http: str | None = None,
            ideal_log: Path | None = None) -> AbstractContextManager[tuple[str, int]]:
    """The broker ``name``: Tansu, an ideal fetch server of ``ideal_log``'s partitions, or
    ``tidelog serve`` of that tree (with its HTTP listener at ``http``, a base URL, when
    given)."""
    if name == "tansu":
        return bb.tansu_broker()
    if name in IDEAL and ideal_log is not None:
        return ideal_broker(IDEAL[name], ideal_log, next(iter(trees.values())))
    return bb.tidelog_broker(env={"PYTHONPATH": str(Path(trees[name]).resolve())},
                             overrides={"http.listeners": http} if http else None)


@contextmanager
def ideal_broker(cut: str, log: Path, src: str, extra: tuple[str, ...] = ()
                 ) -> Iterator[tuple[str, int]]:
    """bench/ideal_fetch_broker.py serving every ``TOPIC-0`` directory under ``log``
    (tidelog's codec from ``src``): (bootstrap, pid)."""
    port = bb.free_port()
    topics = [f"{d.name.removesuffix('-0')}={d}" for d in sorted(log.iterdir())]
    cmd = [sys.executable, str(Path(__file__).with_name("ideal_fetch_broker.py")),
           "--port", str(port), "--cut", cut, *extra] + [a for t in topics for a in ("--topic", t)]
    proc = subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(Path(src).resolve())})
    try:
        bb.wait_port(port, proc)
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(30)


def ideal_log(src: str, sizes: dict[int, int], into: Path) -> None:
    """``consume-SIZE`` produced into ``tidelog serve`` of ``src`` as each run produces it;
    its partition directory (the .log files, flushed by then: acks=1) copied to ``into``."""
    log_dirs = tempfile.mkdtemp(prefix="consume-ideal-")
    os.environ["BENCH_DIR"] = log_dirs
    try:
        with bb.tidelog_broker(env={"PYTHONPATH": str(Path(src).resolve())}) as (bootstrap, _):
            for size, n in sizes.items():
                bb.produce(bootstrap, f"consume-{size}", n, size)
                for part in Path(log_dirs).glob(f"*/consume-{size}-0"):
                    shutil.copytree(part, into / part.name, ignore=shutil.ignore_patterns(
                        "*.index", "*.timeindex"))
    finally:
        shutil.rmtree(log_dirs, ignore_errors=True)


def ratios(a: Sequence[tuple[float, ...]], b: Sequence[tuple[float, ...]], i: int) -> str:
    r = [x[i] / y[i] for x, y in zip(a, b, strict=True) if y[i]]
    if not r:
        return "-"
    return f"{statistics.median(r):.2f}x [{min(r):.2f} .. {max(r):.2f}]"


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.2f} [{min(values):,.2f} .. {max(values):,.2f}]"


def warm_up(bootstrap: str, topic: str, size: int, shape: dict[str, str | int]) -> None:
    """A consumer of the benchmark's group reads a few records of ``topic`` and commits
    them, waiting for the group coordinator: the first consumer's one-time work (the
    coordinator's topic made, its partitions loaded) is done before the clock starts."""
    bb.produce(bootstrap, topic, 10, size)
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                     "enable.auto.commit": False, **bb.CONSUMER, **shape})
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got: list[ck.Message] = []
    deadline = time.monotonic() + 60
    while len(got) < 11 and time.monotonic() < deadline:
        got += [m for m in c.consume(11, 1) if m.error() is None]
    c.commit(asynchronous=False)
    c.close()


def timed_read(client: str, bootstrap: str, topic: str, n: int,
               shape: dict[str, str | int], trace: bool = False
               ) -> tuple[float, float, list[str], tuple[str, float, float]]:
    """Seconds for one consumer to read ``n`` records of partition 0 from the beginning,
    the client's CPU seconds (this process, all threads) over them, and librdkafka's
    fetch lines with ``trace``: ``python`` is confluent-kafka's Consumer (a Python Message
    per record), ``ctypes`` the same librdkafka with no Python per record
    (bench/rdkafka_load.py), whose busiest thread over the read is returned too (name, CPU
    and run-queue seconds)."""
    if client == "python":
        p0 = time.process_time()
        return bb.consume(bootstrap, topic, n, shape), time.process_time() - p0, [], ("", 0, 0)
    c = rdkafka_load.Consumer(bootstrap, topic, config={**bb.CONSUMER, **shape}, trace=trace)
    try:
        secs = c.consume(n)
    finally:
        c.close()
    if c.records != n:
        raise RuntimeError(f"read {c.records} records, produced {n}")
    return secs, c.cpu, c.log, c.busiest


Traces = dict[tuple[str, int], list[fetch_trace.Totals]]
# (broker, size): per run (records/s, broker CPU us per record, client CPU us per record,
# the client's busiest thread: its CPU us per record, its share of the read on a CPU or
# waiting for one -- near 1, that thread was never idle: the client was the bottleneck)
Got = dict[tuple[str, int], list[tuple[float, float, float, float, float]]]


def one_broker(name: str, trees: dict[str, str], sizes: dict[int, int],
               shape: dict[str, str | int], run: int, client: str,
               got: Got, traces: Traces | None = None, ideal: Path | None = None) -> None:
    """One broker's reads of every size (an ideal server's log was produced before)."""
    trace = traces is not None
    tidelog = name in trees
    http = f"http://127.0.0.1:{bb.free_port()}" if trace and tidelog else None
    log_dirs = tempfile.mkdtemp(prefix="consume-trees-")  # tidelog's log.dirs go in here
    os.environ["BENCH_DIR"] = log_dirs
    try:
        with factory(name, trees, http, ideal) as (bootstrap, pid):
            for size, n in sizes.items():
                topic = f"consume-{size}"
                if name not in IDEAL:
                    bb.produce(bootstrap, topic, n, size)
                    warm_up(bootstrap, f"warm-{size}", size, shape)
                before = fetch_trace.fetch_metrics(http) if http else {}
                c0 = cpu_seconds(pid)
                secs, client_cpu, log, (thread, busy, waits) = timed_read(
                    client, bootstrap, topic, n + 1, shape, trace)
                per = cpu_since(pid, c0) / (n + 1) * 1e6
                mine = client_cpu / (n + 1) * 1e6
                busy_us, share = busy / (n + 1) * 1e6, (busy + waits) / secs
                got.setdefault((name, size), []).append(((n + 1) / secs, per, mine, busy_us,
                                                         share))
                print(f"run {run} {name:<8} {size:>5} B {(n + 1) / secs:>10,.0f} rec/s "
                      f"broker CPU {per:.3f} us/record (client {mine:.3f}; {thread} "
                      f"{busy_us:.3f}, on or waiting for a CPU {share:.0%} of the read), "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
                if traces is not None:
                    t = fetch_trace.totals(fetch_trace.answers(log), secs, (n + 1) * size)
                    if t is not None:
                        traces.setdefault((name, size), []).append(t)
                    print_trace(t, topic, Path(log_dirs),
                                (before, fetch_trace.fetch_metrics(http)) if http else None)
    finally:
        shutil.rmtree(log_dirs, ignore_errors=True)


def print_trace(t: fetch_trace.Totals | None, topic: str, log_dirs: Path,
                metrics: tuple[dict[str, float], dict[str, float]] | None) -> None:
    """The traced read's Fetches (client side), the broker's view, the log's batches."""
    print(f"    client: {t.line() if t is not None else 'no answer with records'}")
    if metrics is None:
        return
    print(f"    broker: {fetch_trace.broker_side(*metrics)}")
    for d in log_dirs.iterdir():
        batches, records = fetch_trace.log_batches(d, topic)
        if batches:
            print(f"    log: {batches} batches, {records / batches:,.0f} records each")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=SRC")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--sizes", default="100,1024")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="records per size times this (1: 200,000 of 100 B, 50,000 of 1 KiB)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="big")
    ap.add_argument("--client", choices=["ctypes", "python"], default="ctypes")
    ap.add_argument("--no-tansu", action="store_true")
    ap.add_argument("--ideal", action="store_true",
                    help="add the ideal fetch servers (bench/ideal_fetch_broker.py)")
    ap.add_argument("--trace", action="store_true",
                    help="print where each read's time went, Fetch by Fetch (ctypes client)")
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    sizes = {int(s): int(COUNTS.get(int(s), 50_000) * args.scale)
             for s in args.sizes.split(",")}
    names = list(trees) + ([] if args.no_tansu else ["tansu"]) + (list(IDEAL) * args.ideal)
    got: Got = {}
    traces: Traces | None = {} if args.trace else None
    loads = []
    ideal = Path(tempfile.mkdtemp(prefix="consume-ideal-log-")) if args.ideal else None
    try:
        if ideal is not None:
            ideal_log(next(iter(trees.values())), sizes, ideal)
            for d in sorted(ideal.iterdir()):
                batches, records = fetch_trace.log_batches(ideal, d.name.removesuffix("-0"))
                print(f"ideal log {d.name}: {batches} batches, {records / batches:,.0f} "
                      "records each", flush=True)
        for run in range(args.runs):
            for name in names if run % 2 == 0 else names[::-1]:
                loads.append(os.getloadavg()[0])
                one_broker(name, trees, sizes, SHAPES[args.shape], run, args.client, got,
                           traces, ideal)
    finally:
        if ideal is not None:
            shutil.rmtree(ideal, ignore_errors=True)
    print(f"\nshape {args.shape}, client {args.client}, load {min(loads):.1f} .. {max(loads):.1f}")
    for size in sizes:
        report(size, names, list(trees), got, traces)


def report(size: int, names: list[str], trees: list[str], got: Got,
           traces: Traces | None) -> None:
    """Per broker its rate, broker and client CPU per record; the pairs' ratios."""
    print(f"\n{size} B, rate, broker and client CPU per record, median [min .. max]:")
    for name in names:
        g = got[(name, size)]
        print(f"  {name}: {spread([x[0] for x in g])} rec/s, broker "
              f"{spread([x[1] for x in g])} us/record, client {spread([x[2] for x in g])}, "
              f"its busiest thread {spread([x[3] for x in g])} (busy "
              f"{spread([x[4] for x in g])} of the read)")
    pairs = list(itertools.combinations(trees, 2))
    if "tansu" in names:
        pairs += [(n, "tansu") for n in names if n != "tansu"]
    pairs += [(t, i) for i in IDEAL if i in names for t in trees]
    if all(i in names for i in IDEAL):
        pairs.append(("ideal-cut", "ideal"))
    for a, b in pairs:
        x, y = got[(a, size)], got[(b, size)]
        print(f"  {a} / {b}: rate {ratios(x, y, 0)}, broker CPU {ratios(x, y, 1)}, "
              f"client CPU {ratios(x, y, 2)}")
    for name in names:
        traced = (traces or {}).get((name, size))
        if traced:
            print(f"  {name} traced, medians: {fetch_trace.medians(traced)}")


if __name__ == "__main__":
    main()
