"""The produce phase of bench/iceberg.py: one librdkafka producer into an Iceberg topic and into
a plain topic, in rounds of one run of each (the order alternating: ABBA), the ratio paired
per round.

What a run's rate measures on a shared machine: the timed producer (a Python loop calling
librdkafka) is the bottleneck, and it gets the CPU share its scheduling group gets. With
Linux's autogroups (``/proc/sys/kernel/sched_autogroup_enabled``) each session is a group:
the bench's process (the broker), its producer process and the translation worker are one
session, so one group, whose share against the other sessions' is fixed whatever the nice
values inside it; nice orders only the threads within it. So each run also prints, from
``/proc``, the time the producer's and the broker's threads ran and waited on a run queue
(``schedstat``): a round whose runs waited more is one the machine held back, not the
broker.

Before the rounds, one untimed run of each kind (the same warm-up for both: the producer's
process, librdkafka, the broker's first Iceberg flush and its imports)."""

from __future__ import annotations

import multiprocessing
import os
import statistics
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.pool import Pool
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.metrics.histogram import LatencyHistogram
from tidelog.metrics.loop_lag import LOOP_LAG
from tidelog.testing import EmbeddedBroker


def create(bootstrap: str, topic: str, partitions: int, iceberg: bool, lag_ms: int,
           mode: str = "value_schema_id_prefix") -> None:
    configs = {"tidelog.iceberg.mode": mode,
               "tidelog.iceberg.target.lag.ms": str(lag_ms)} if iceberg else {}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(30)


def produce(bootstrap: str, topic: str, values: list[bytes], rate: float = 0) -> float:
    """records/s acknowledged (``rate`` > 0: paced to that many records/s)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    t0 = time.perf_counter()
    for i, v in enumerate(values):
        if rate and i % 100 == 0:
            ahead = t0 + i / rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
        while True:
            try:
                p.produce(topic, key=str(i).encode(), value=v)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    p.flush(120)
    return len(values) / (time.perf_counter() - t0)


class Producers:
    """Where the timed produce runs: a process of its own (spawned once; the values are
    sent to it with each run, outside its timing) or this one."""

    def __init__(self, in_process: bool, own_session: bool = False) -> None:
        self.pool: Pool | None = None if in_process else multiprocessing.get_context(
            "spawn").Pool(1, initializer=os.setsid if own_session else None)

    @property
    def pid(self) -> int:
        """The producers' process (this one when they run in it)."""
        if self.pool is None:
            return os.getpid()
        pid: int = self.pool.apply(os.getpid)
        return pid

    def produce(self, bootstrap: str, topic: str, values: list[bytes], rate: float = 0
                ) -> float:
        if self.pool is None:
            return produce(bootstrap, topic, values, rate)
        got: float = self.pool.apply(produce, (bootstrap, topic, values, rate))
        return got

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool.join()


def schedstat(pid: int, main_only: bool = False) -> tuple[float, float]:
    """Seconds the threads of ``pid`` (or only its main thread) have run on a CPU and waited
    on a run queue (Linux ``/proc/PID/task/TID/schedstat``; threads that ended are not
    counted)."""
    run = wait = 0
    tasks = [Path(f"/proc/{pid}/task/{pid}")] if main_only else Path(
        f"/proc/{pid}/task").iterdir()
    for task in tasks:
        try:
            fields = (task / "schedstat").read_text().split()
        except OSError:
            continue  # ended meanwhile
        run += int(fields[0])
        wait += int(fields[1])
    return run / 1e9, wait / 1e9


def autogroup(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/autogroup").read_text().split()[0]
    except OSError:
        return "-"


def drain(b: EmbeddedBroker, timeout: float = 600) -> None:
    """Wait until translation has caught up with every topic (the produce phase leaves
    Iceberg topics behind it)."""
    assert b.iceberg is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lags = b.iceberg.lag()
        if all(sum(per.values()) == 0 for per in lags.values()):
            return
        time.sleep(0.5)


class TranslationClock:
    """CPU seconds and nice value of the translation: its thread, or its worker process."""

    def __init__(self, b: EmbeddedBroker) -> None:
        assert b.iceberg is not None
        self.worker = b.iceberg.worker
        self.clock = None if self.worker is not None else thread_clock("iceberg-translation")

    def _stat(self) -> list[str]:
        assert self.worker is not None
        stat = Path(f"/proc/{self.worker.pid}/stat").read_text()
        return stat[stat.rindex(")") + 2:].split()

    def seconds(self) -> float:
        if self.clock is not None:
            return time.clock_gettime(self.clock)
        assert self.worker is not None and self.worker.pid is not None
        return schedstat(self.worker.pid)[0]  # its threads, in ns (/proc's stat: ticks of
        # 10 ms, a sixth of a flush)

    def nice(self) -> str:
        if self.clock is not None:
            return f"thread {thread_nice('iceberg-translation')}"
        return f"worker process {self._stat()[16]}"

    def pid(self) -> int | None:
        return self.worker.pid if self.worker is not None else None


def thread_clock(prefix: str) -> int:
    """The CPU clock of this process's (first) thread named ``prefix``...."""
    for t in threading.enumerate():
        if t.name.startswith(prefix) and t.ident is not None:
            return time.pthread_getcpuclockid(t.ident)
    raise LookupError(prefix)


def thread_nice(prefix: str) -> str:
    """The nice value of this process's threads named ``prefix``... (Linux: from
    /proc/self/task/TID/stat, its 19th field), or ``-`` where there are none."""
    out = []
    for t in threading.enumerate():
        if t.name.startswith(prefix) and t.native_id is not None:
            stat = Path(f"/proc/self/task/{t.native_id}/stat").read_text()
            out.append(stat[stat.rindex(")") + 2:].split()[16])
    return ",".join(out) or "-"


def fmt_s(xs: Sequence[float]) -> str:
    return f"{statistics.median(xs):.2f} [{min(xs):.2f} .. {max(xs):.2f}]"


def ratio_range(xs: Sequence[float]) -> str:
    return f"{statistics.median(xs):.2f}x [{min(xs):.2f} .. {max(xs):.2f}]"


@dataclass
class Run:
    """One timed produce run."""

    rate: float  # records/s acknowledged
    wall_s: float  # the run's time
    load: float  # the machine's 1-minute load average at its start
    producer_run: float  # the producer process's threads: CPU seconds
    producer_wait: float  # and seconds runnable on a run queue, not running
    loop_wait: float  # the producer's loop (its main thread): seconds on a run queue
    broker_run: float  # the broker's process (the bench's)
    broker_wait: float
    loop_us: float  # the broker's event loop thread: CPU us per record
    translation_s: float = 0.0  # the translation's CPU during the run (thread or worker)
    flushes: int = 0  # flushes that ended during it
    behind: int = 0  # records not in the table at its end
    caught_up_s: float = 0.0  # how long after its end they were


@dataclass
class Rounds:
    iceberg: list[Run] = field(default_factory=list)
    plain: list[Run] = field(default_factory=list)
    lateness: dict[bool, LatencyHistogram] = field(default_factory=lambda: {
        True: LatencyHistogram(), False: LatencyHistogram()})

    def ratios(self) -> list[float]:
        return [a.rate / c.rate for a, c in zip(self.iceberg, self.plain, strict=True)]


class ProducePhase:
    """Rounds of an Iceberg-topic run and a plain-topic run (ABBA); after an Iceberg run the
    translation catches up before the next run starts (its backlog's flushes would
    otherwise compete with the plain run)."""

    def __init__(self, b: EmbeddedBroker, producers: Producers) -> None:
        assert b.iceberg is not None and b._thread is not None
        assert b._thread.ident is not None
        self.b = b
        self.producers = producers
        self.producer_pid = producers.pid
        self.loop_clock = time.pthread_getcpuclockid(b._thread.ident)
        self.loop_name = b._thread.name
        self.translation: TranslationClock | None = None

    def run_once(self, values: list[bytes], iceberg: bool, out: Rounds | None) -> None:
        b = self.b
        assert b.iceberg is not None
        topic = f"p-{uuid.uuid4().hex[:6]}"
        create(b.bootstrap_servers, topic, 6, iceberg, 1000)
        if self.translation is None:
            self.translation = TranslationClock(b)  # (the worker: started by now)
        p0, b0 = schedstat(self.producer_pid), schedstat(os.getpid())
        m0 = schedstat(self.producer_pid, main_only=True)[1]
        l0, t0 = time.clock_gettime(self.loop_clock), self.translation.seconds()
        late0 = list(LOOP_LAG.counts)
        load = os.getloadavg()[0]
        rate = self.producers.produce(b.bootstrap_servers, topic, values)
        p1, b1 = schedstat(self.producer_pid), schedstat(os.getpid())
        m1 = schedstat(self.producer_pid, main_only=True)[1]
        run = Run(rate, len(values) / rate, load, p1[0] - p0[0], p1[1] - p0[1], m1 - m0,
                  b1[0] - b0[0], b1[1] - b0[1],
                  (time.clock_gettime(self.loop_clock) - l0) / len(values) * 1e6)
        if iceberg:
            run.translation_s = self.translation.seconds() - t0
            state = b.iceberg.topics.get(topic)
            run.flushes = state.translator.flushes if state else 0
            done = state.translator.committed if state else {}
            run.behind = len(values) - sum(done.values())
            d0 = time.monotonic()
            drain(b)
            run.caught_up_s = time.monotonic() - d0
        if out is None:
            return
        for k, (n1, n0) in enumerate(zip(LOOP_LAG.counts, late0, strict=True)):
            out.lateness[iceberg].counts[k] += n1 - n0
        (out.iceberg if iceberg else out.plain).append(run)

    def rounds(self, values: list[bytes], rounds: int, warm: list[bytes]) -> Rounds:
        self.run_once(warm, True, None)  # the same untimed warm-up for both kinds
        self.run_once(warm, False, None)
        out = Rounds()
        for r in range(rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            for iceberg in order:
                self.run_once(values, iceberg, out)
            print_round(r, order[0], out.iceberg[-1], out.plain[-1])
        return out

    def report(self, out: Rounds) -> None:
        assert self.translation is not None
        ice, plain = out.iceberg, out.plain
        ratios = out.ratios()
        print(f"produce iceberg topic records/s {rng_range([r.rate for r in ice])}")
        print(f"produce plain topic   records/s {rng_range([r.rate for r in plain])}")
        print(f"iceberg / plain produce, paired per round: {ratio_range(ratios)}; "
              f">= 0.8x in {sum(x >= 0.8 for x in ratios)} rounds of {len(ratios)}")
        print("the same over the time the producer's loop did not wait on a run queue "
              "(a diagnostic of the machine): " + ratio_range(
                  [unqueued(a) / unqueued(c) for a, c in zip(ice, plain, strict=True)]))
        for name, runs in (("iceberg", ice), ("plain", plain)):
            print(f"{name} runs: producer CPU / wall {fmt_s([utilisation(r) for r in runs])}"
                  f", producer run-queue wait / wall {fmt_s([waits(r) for r in runs])}"
                  f", broker CPU s {fmt_s([r.broker_run for r in runs])}, event loop CPU us "
                  f"per record {fmt_s([r.loop_us for r in runs])}")
        print(f"of an iceberg run, the translation {fmt_s([r.translation_s for r in ice])} "
              f"CPU s, {rng_range([r.flushes for r in ice])} flushes ended; records not in "
              f"the table at its end {rng_range([r.behind for r in ice])}, in it "
              f"{fmt_s([r.caught_up_s for r in ice])} s later")
        worker = self.translation.pid()
        print(f"nice value of the translation {self.translation.nice()}, of the event loop's "
              f"{thread_nice(self.loop_name)}; autogroups: broker {autogroup(os.getpid())}, "
              f"producer {autogroup(self.producer_pid)}, worker "
              f"{autogroup(worker) if worker else '-'}")
        print("event loop lateness (its lag probe, all runs) ms p50 / p99 / p99.9: " + "; ".join(
            f"{name} {h.quantile_ms(0.5):.1f} / {h.quantile_ms(0.99):.1f} / "
            f"{h.quantile_ms(0.999):.1f}" for name, h in (("iceberg topic", out.lateness[True]),
                                                           ("plain topic", out.lateness[False]))))


def utilisation(r: Run) -> float:
    """The producer's CPU seconds per second of its run (cores it used)."""
    return r.producer_run / r.wall_s


def unqueued(r: Run) -> float:
    """records/s over the run's time less the time the producer's loop waited on a run
    queue: what the run's rate would have been had the loop never waited for a CPU. A
    diagnostic of the machine, not the issue's figure: it also takes away any wait the
    translation's own CPU caused."""
    return r.rate * r.wall_s / max(r.wall_s - r.loop_wait, 1e-9)


def waits(r: Run) -> float:
    """The producer's seconds on a run queue per second of its run."""
    return r.producer_wait / r.wall_s


def rng_range(xs: Sequence[float]) -> str:
    return f"{statistics.median(xs):,.0f} [{min(xs):,.0f} .. {max(xs):,.0f}]"


def print_round(r: int, iceberg_first: bool, ice: Run, plain: Run) -> None:
    print(f"  round {r + 1} ({'iceberg' if iceberg_first else 'plain'} first, load "
          f"{ice.load:.1f} / {plain.load:.1f}): {ice.rate:,.0f} / {plain.rate:,.0f} records/s "
          f"= {ice.rate / plain.rate:.2f}x; producer CPU {ice.producer_run:.2f} / "
          f"{plain.producer_run:.2f} s, waited {ice.producer_wait:.2f} / "
          f"{plain.producer_wait:.2f} s (its loop {ice.loop_wait:.2f} / {plain.loop_wait:.2f}"
          f" s: {unqueued(ice) / unqueued(plain):.2f}x unqueued); broker CPU {ice.broker_run:.2f} / "
          f"{plain.broker_run:.2f} s, waited {ice.broker_wait:.2f} / {plain.broker_wait:.2f} s;"
          f" translation CPU {ice.translation_s:.2f} s, {ice.flushes} flushes", flush=True)
