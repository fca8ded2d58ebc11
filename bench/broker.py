"""End-to-end broker throughput: one confluent-kafka producer (acks=1, linger.ms=5), then one
consumer reading everything back, against ``tidelog serve`` and against Tansu (a Rust
Kafka-compatible broker, memory storage) started in the same run; plus the client-only
ceiling: the rate of ``Producer.produce()`` calls with no broker round trip at all.

Usage: python bench/broker.py [records_100B] [records_1KiB]   (defaults 200000 50000)
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import confluent_kafka as ck

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)  # readiness polling of a foreign process, not a timing wait
    raise RuntimeError(f"port {port} not open after {timeout}s")


@contextmanager
def tidelog_broker(env: dict[str, str] | None = None,
                   overrides: dict[str, str] | None = None) -> Iterator[tuple[str, int]]:
    """``tidelog serve`` in a child process: (bootstrap, pid); ``env`` adds variables,
    ``overrides`` broker configs."""
    port = free_port()
    d = tempfile.mkdtemp(prefix="tidelog-bench-", dir=os.environ.get("BENCH_DIR"))
    cmd = [
        sys.executable,
        "-m",
        "tidelog.cli.main",
        "--log-level",
        "WARNING",
        "serve",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override",
        f"log.dirs={d}",
    ]
    for k, v in (overrides or {}).items():
        cmd += ["--override", f"{k}={v}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})
    try:
        wait_port(port, proc)
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(d, ignore_errors=True)


def tansu_binary(path: str | None = None) -> str:
    """$TANSU or ../shared/bin/tansu beside the repository: the binary, or a script that
    prints the binary's path."""
    path = path or os.environ.get("TANSU") or str(ROOT.parent / "shared" / "bin" / "tansu")
    with open(path, "rb") as f:
        if f.read(4) == b"\x7fELF":
            return path
    return subprocess.run([path], capture_output=True, text=True, check=True).stdout.strip()


@contextmanager
def tansu_broker(path: str | None = None) -> Iterator[tuple[str, int]]:
    """Tansu with memory storage in a child process: (bootstrap, pid)."""
    binary = tansu_binary(path)
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port, proc)
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(30)


def produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    value = os.urandom(size // 2).hex().encode()[:size]
    p = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
            "batch.size": 1_000_000,
        }
    )
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    # warm-up: metadata + connection outside the timed region
    p.produce(topic, value, partition=0)
    p.flush(30)
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.001)
    p.flush(120)
    dt = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first {errors[0]}")
    return dt


CONSUMER = {"fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 10485760}


def consume(bootstrap: str, topic: str, n: int, config: dict[str, str | int] | None = None
            ) -> float:
    """Seconds to read ``n`` records of partition 0 from the beginning; ``config`` adds to
    (or replaces) CONSUMER, librdkafka's settings."""
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            **CONSUMER,
            **(config or {}),
        }
    )
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got = 0
    t0 = time.perf_counter()
    while got < n:
        msgs = c.consume(min(10000, n - got), 10)
        if not msgs:
            raise RuntimeError(f"consumer stalled after {got} of {n}")
        got += sum(1 for m in msgs if m.error() is None)
    dt = time.perf_counter() - t0
    c.close()
    return dt


def client_ceiling(n: int, size: int) -> float:
    """produce() calls into librdkafka's queue; the broker address refuses connections."""
    value = os.urandom(size // 2).hex().encode()[:size]
    p = ck.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{free_port()}",
            "queue.buffering.max.messages": max(n + 10, 100000),
            "queue.buffering.max.kbytes": 2097151,
            "log_level": 0,
        }
    )
    t0 = time.perf_counter()
    for _ in range(n):
        p.produce("t", value, partition=0)
    dt = time.perf_counter() - t0
    p.purge()
    return dt


def _time_to_line(cmd: list[str], marker: str, env: dict[str, str] | None = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    for line in proc.stderr:
        if marker in line:
            break
    dt = time.perf_counter() - t0
    proc.terminate()
    proc.wait(30)
    return dt


EMBEDDED = """
import sys, time
t = time.perf_counter()
from tidelog.testing import EmbeddedBroker
b = EmbeddedBroker().start()
print(f"ready {time.perf_counter() - t:.3f}", file=sys.stderr, flush=True)
b.stop()
"""


def startup_figures() -> None:
    """Cold start, spawn -> listening (best of 3), next to a bare interpreter. Measured with
    a bytecode cache (as after ``pip install``, which compiles .pyc) in a private
    PYTHONPYCACHEPREFIX, and without one (this sandbox sets PYTHONDONTWRITEBYTECODE=1, so
    every run compiles every module from source)."""
    d = tempfile.mkdtemp(prefix="tidelog-start-")
    cache = tempfile.mkdtemp(prefix="tidelog-pyc-")
    serve = [
        sys.executable,
        "-m",
        "tidelog.cli.main",
        "serve",
        "--override",
        "listeners=PLAINTEXT://127.0.0.1:0",
        "--override",
        f"log.dirs={d}",
    ]
    bare = [sys.executable, "-c", "import sys; print('up', file=sys.stderr, flush=True)"]
    embedded = [sys.executable, "-c", EMBEDDED]
    cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = cache
    no_cache = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    _time_to_line(embedded, "ready", cached)  # fills the bytecode cache
    _time_to_line(serve, "listening on", cached)
    print("\ncold start, spawn -> listening (best of 3):")
    for label, env in (("with .pyc cache", cached), ("no .pyc cache", no_cache)):
        figures = {
            "python -c (baseline)": min(_time_to_line(bare, "up", env) for _ in range(3)),
            "tidelog serve": min(_time_to_line(serve, "listening on", env) for _ in range(3)),
            "EmbeddedBroker (new process)": min(
                _time_to_line(embedded, "ready", env) for _ in range(3)
            ),
        }
        for name, secs in figures.items():
            print(f"  {label:<16} {name:<30} {secs * 1000:7.0f} ms")
    shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)


def row(name: str, n: int, size: int, secs: float) -> tuple[float, float]:
    rps = n / secs
    mbs = n * size / secs / 1e6
    print(f"  {name:<24} {rps:>12,.0f} rec/s {mbs:>9.1f} MB/s")
    return rps, mbs


def main() -> None:
    startup_figures()
    if os.environ.get("BENCH_STARTUP_ONLY"):
        return
    counts = {
        100: int(sys.argv[1]) if len(sys.argv) > 1 else 200_000,
        1024: int(sys.argv[2]) if len(sys.argv) > 2 else 50_000,
    }
    results: dict[tuple[str, int], tuple[float, float]] = {}
    brokers: list[tuple[str, Callable[[], Any]]] = [("tidelog", tidelog_broker)]
    try:
        tansu_binary()
        brokers.append(("tansu", tansu_broker))
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"Tansu baseline skipped: no Tansu ({exc}); set $TANSU to its binary or locator")
    for name, factory in brokers:
        with factory() as (bootstrap, _pid):
            for size, n in counts.items():
                topic = f"bench-{size}"
                results[(name, size)] = (
                    produce(bootstrap, topic, n, size),
                    consume(bootstrap, topic, n + 1),
                )
    for size, n in counts.items():
        print(f"\n{n:,} records of {size} B, acks=1, linger.ms=5, one partition")
        print(" produce:")
        for i, what in enumerate(("produce", "consume")):
            if i:
                print(f" {what}:")
            t_rps, _ = row("tidelog", n, size, results[("tidelog", size)][i])
            if ("tansu", size) in results:
                b_rps, _ = row("tansu (baseline)", n, size, results[("tansu", size)][i])
                print(f"  ratio tidelog/tansu      {t_rps / b_rps:.2f}x")
        print(" client-only ceiling:")
        row("produce() no broker", n, size, client_ceiling(n, size))


if __name__ == "__main__":
    main()
