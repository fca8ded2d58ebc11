"""Produce CPU with metrics recording on vs off, in the same run.

An in-process broker (EmbeddedBroker) takes records from one confluent-kafka producer
(acks=1, 100-byte values) in two shapes: large batches (linger.ms=5) and 10-record batches
(linger.ms=0, batch.num.messages=10: ten times more requests per record, the worst case for
per-request timing); the figure is the CPU time of the broker's event-loop thread (where
every request is decoded, appended, timed and answered) per million records. Modes,
interleaved run by run so machine noise hits all of them alike:

* off: no recording at all (``broker.request_metrics`` and ``topic_stats`` are None, so the
  connection does not time requests and appends are not counted);
* on: the default: RequestMetrics per request, BrokerTopicStats per partition append;
* on+scrape: as on, with /metrics scraped every second by a thread (as Prometheus would;
  the collector runs on the broker's loop, so its cost is counted too).

Usage: python bench/metrics.py [records] [runs]   (defaults 300000 3)
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
import urllib.request
from typing import Any

import confluent_kafka as ck

from tidelog.testing import EmbeddedBroker

MODES = ("off", "on", "on+scrape")


def thread_cpu(thread: threading.Thread) -> float:
    assert thread.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


SHAPES = {
    "large batches": {"linger.ms": 5},
    "10-record batches": {"linger.ms": 0, "batch.num.messages": 10},
}


def run_once(mode: str, records: int, shape: dict[str, Any]) -> tuple[float, float]:
    """(broker loop CPU seconds per million records, wall seconds)."""
    config = {"http.listeners": "http://127.0.0.1:0"} if mode == "on+scrape" else {}
    with EmbeddedBroker(config) as eb:
        if mode == "off":

            async def metrics_off() -> None:
                eb.broker.request_metrics = None
                eb.broker.replica_manager.topic_stats = None

            eb.run(metrics_off())
        loop_thread: Any = eb._thread
        stop = threading.Event()
        scraper = None
        if mode == "on+scrape":

            def scrape() -> None:
                while not stop.wait(1.0):
                    urllib.request.urlopen(eb.http_url + "/metrics", timeout=10).read()

            scraper = threading.Thread(target=scrape, daemon=True)
            scraper.start()
        p = ck.Producer({"bootstrap.servers": eb.bootstrap_servers, "acks": 1,
                         "queue.buffering.max.messages": 1_000_000, **shape})  # fmt: skip
        value = b"v" * 100
        p.produce("bench", value=value)  # topic created, connections up before measuring
        p.flush(30)
        cpu0, wall0 = thread_cpu(loop_thread), time.perf_counter()
        for i in range(records):
            while True:
                try:
                    p.produce("bench", value=value)
                    break
                except BufferError:
                    p.poll(0.01)
            if i % 10000 == 0:
                p.poll(0)
        assert p.flush(120) == 0
        cpu, wall = thread_cpu(loop_thread) - cpu0, time.perf_counter() - wall0
        stop.set()
        if scraper is not None:
            scraper.join()
    return cpu / records * 1e6, wall


def main() -> None:
    records = int(sys.argv[1]) if len(sys.argv) > 1 else 300_000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    run_once("on", min(records, 50_000), SHAPES["large batches"])  # warm-up
    for shape_name, shape in SHAPES.items():
        n = records if shape_name == "large batches" else records // 5
        results: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
        for _ in range(runs):
            for mode in MODES:
                results[mode].append(run_once(mode, n, shape))
        off = statistics.median(c for c, _ in results["off"])
        print(f"{shape_name}: broker loop CPU per million 100-byte records, "
              f"{n} records x {runs} runs")
        for mode in MODES:
            cpus = [c for c, _ in results[mode]]
            rate = statistics.median(n / w for _, w in results[mode])
            med = statistics.median(cpus)
            print(f"  {mode:10s} median {med:6.2f} s  range {min(cpus):6.2f}-{max(cpus):6.2f} s"
                  f"  ratio to off {med / off:5.3f}  ({rate:,.0f} records/s)")


if __name__ == "__main__":
    main()
