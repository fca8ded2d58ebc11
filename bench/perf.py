"""``tidelog perf produce`` next to kcat producing the same load to the same broker.

Both run with the same settings (acks=1, linger.ms=5, no compression, librdkafka's batch
limits), against one ``tidelog serve`` child process, each run into a fresh one-partition
topic, alternating run by run:

* ``tidelog perf produce`` (the ``tidelog`` console script, as a person runs it; its default
  client, or ``--client librdkafka`` with ``CLIENT=librdkafka``): its own final line
  (records/s, MB/s, latency percentiles, as kafka-producer-perf-test.sh prints it) and the
  wall time of the whole process;
* ``kcat -P -l FILE``: the wall time of the whole process producing the same number of
  records of the same size (kcat prints no figures of its own).

Wall time includes process start-up (Python's interpreter and imports, ~40-60 ms; kcat's a
few ms), so the ratio is the one a person sees running either tool; the tidelog figure from
its own line excludes start-up. One warm-up run of each, then RUNS measured pairs; medians
and min-max ranges are printed with the load average.

Run: .venv/bin/python bench/perf.py [RECORDS] [RECORD_SIZE] [RUNS]
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker import tidelog_broker

SETTINGS = {"acks": "1", "linger.ms": "5"}
SUMMARY = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\).*?"
                     r"(\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th")


CLIENT = os.environ.get("CLIENT", "tidelog")


def tidelog_command() -> list[str]:
    """The console script beside this interpreter, else the module."""
    script = Path(sys.executable).with_name("tidelog")
    return [str(script)] if script.exists() else [sys.executable, "-m", "tidelog.cli.main"]


def run_tidelog(bootstrap: str, topic: str, n: int, size: int) -> tuple[float, str]:
    props = [f"{k}={v}" for k, v in SETTINGS.items()]
    cmd = [*tidelog_command(), "perf", "produce", "--bootstrap-server", bootstrap, "--topic",
           topic, "--num-records", str(n), "--record-size", str(size), "--throughput", "-1",
           "--client", CLIENT, "--producer-props", *props]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - t0, out.strip().splitlines()[-1]


def run_kcat(bootstrap: str, topic: str, payload_file: str) -> float:
    cmd = ["kcat", "-b", bootstrap, "-t", topic, "-P", "-l", payload_file]
    for k, v in SETTINGS.items():
        cmd += ["-X", f"{k}={v}"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def span(values: list[float], fmt: str = ",.0f") -> str:
    """Median and min-max range."""
    return (f"{statistics.median(values):{fmt}} ({min(values):{fmt}} - {max(values):{fmt}})")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    if shutil.which("kcat") is None:
        print("kcat not found: the kcat baseline is skipped (apt-get install kcat)")
    tmp = tempfile.mkdtemp(prefix="tidelog-perf-")
    payload = os.path.join(tmp, "lines")
    with open(payload, "wb") as f:  # kcat -l: one record per line, `size` bytes each
        f.write((b"x" * size + b"\n") * n)
    wall_t: list[float] = []
    wall_k: list[float] = []
    own: list[tuple[float, ...]] = []
    load_before = os.getloadavg()[0]
    try:
        with tidelog_broker() as (bootstrap, _pid):
            for i in range(runs + 1):  # run 0 is the warm-up; odd runs start with kcat
                if i % 2 and shutil.which("kcat"):
                    wall_k.append(n / run_kcat(bootstrap, f"perf-k-{i}", payload))
                secs, line = run_tidelog(bootstrap, f"perf-t-{i}", n, size)
                m = SUMMARY.search(line)
                assert m is not None, line
                wall_t.append(n / secs)
                own.append(tuple(float(g) for g in m.groups()[1:]))
                if i % 2 == 0 and shutil.which("kcat"):
                    wall_k.append(n / run_kcat(bootstrap, f"perf-k-{i}", payload))
                if i == runs:
                    print(f"last tidelog perf produce line:\n  {line}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    del wall_t[0], own[0]
    if wall_k:
        del wall_k[0]
    load_after = os.getloadavg()[0]
    print(f"\n{n:,} records of {size} B, acks=1, linger.ms=5, one partition, {runs} runs "
          f"alternating, --client {CLIENT}; load average {load_before:.2f} before, "
          f"{load_after:.2f} after; median (min - max)")
    print(f"  tidelog perf produce (own line)  {span([o[0] for o in own])} rec/s  "
          f"{span([o[1] for o in own], '.2f')} MB/s  p50 {span([o[2] for o in own])} ms  "
          f"p99 {span([o[4] for o in own])} ms")
    print(f"  tidelog perf produce (wall)      {span(wall_t)} rec/s")
    if wall_k:
        print(f"  kcat -P (wall, baseline)         {span(wall_k)} rec/s")
        ratios = [t / k for t, k in zip(wall_t, wall_k, strict=True)]
        print(f"  ratio tidelog/kcat (wall)        {span(ratios, '.2f')}x")


if __name__ == "__main__":
    main()
