"""bench/baseline_broker.py, goal 4's floor in bench/tail_latency.py: with
``--file-per-partition`` each partition's batches go to a file of its own in Kafka's layout,
made when a Metadata request first names the topic, their base offsets from 0 on, their
bytes the producer's (CRC-checked); without it, every partition's batches go to one file.
With ``--spin-us`` it answers each Produce no sooner than that."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import broker as bb

from tidelog.records.batch import iter_batches

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "baseline_broker.py"
PARTITIONS = 4
PER_PARTITION = 10


def _serve(tmp: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    port = bb.free_port()
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--port", str(port),
                             "--file", str(tmp / "00000000000000000000.log"),
                             "--partitions", str(PARTITIONS), *extra])
    bb.wait_port(port, proc)
    return proc, f"127.0.0.1:{port}"


def _produce(bootstrap: str, before_produce: Callable[[], None] | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 0})
    p.list_topics("t", timeout=10)  # the client's Metadata naming the topic
    if before_produce is not None:
        before_produce()
    failed: list[object] = []
    for i in range(PER_PARTITION):
        for part in range(PARTITIONS):
            p.produce("t", f"{part}-{i}".encode(), partition=part,
                      on_delivery=lambda err, _msg: err is not None and failed.append(err))
            p.poll(0)
    assert p.flush(30) == 0
    assert failed == []


def _batches(data: bytes) -> list[tuple[int, list[bytes]]]:
    """Each batch of a .log file's bytes: (its base offset, its records' values)."""
    return [(batch.base_offset, [r.value or b"" for r in batch])
            for batch in iter_batches(data)]  # (CRC-checked)


def test_a_file_per_partition_made_at_metadata(tmp_path: Path) -> None:
    proc, bootstrap = _serve(tmp_path, "--file-per-partition")
    files = [tmp_path / f"t-{part}" / "00000000000000000000.log" for part in range(PARTITIONS)]

    def made_empty() -> None:  # after the Metadata, before any produce
        assert [f.stat().st_size for f in files] == [0] * PARTITIONS

    try:
        _produce(bootstrap, made_empty)
    finally:
        proc.terminate()
        proc.wait(30)
    assert not (tmp_path / "00000000000000000000.log").exists()
    for part, f in enumerate(files):
        batches = _batches(f.read_bytes())
        assert [v for _, vs in batches for v in vs] == [
            f"{part}-{i}".encode() for i in range(PER_PARTITION)]
        # each batch's base offset the partition's next: 0 on, one counter per partition
        counts = [len(vs) for _, vs in batches]
        assert [b for b, _ in batches] == [sum(counts[:k]) for k in range(len(counts))]


def test_one_file_for_every_partition(tmp_path: Path) -> None:
    proc, bootstrap = _serve(tmp_path)
    try:
        _produce(bootstrap)
    finally:
        proc.terminate()
        proc.wait(30)
    assert not any(p.is_dir() for p in tmp_path.iterdir())
    batches = _batches((tmp_path / "00000000000000000000.log").read_bytes())
    assert sorted(v for _, vs in batches for v in vs) == sorted(f"{part}-{i}".encode() for part in range(PARTITIONS)
                                    for i in range(PER_PARTITION))


def test_spin_holds_each_produce_answer(tmp_path: Path) -> None:
    proc, bootstrap = _serve(tmp_path, "--spin-us", "20000")
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 0})
    took: list[float] = []
    done: list[object] = []
    try:
        p.list_topics("t", timeout=10)
        for i in range(5):  # one record in flight at a time: one Produce each
            sent = time.monotonic()
            p.produce("t", b"v", partition=i % PARTITIONS,
                      on_delivery=lambda err, _msg: done.append(err))
            assert p.flush(30) == 0 and done == [None] * (i + 1)
            took.append(time.monotonic() - sent)
    finally:
        proc.terminate()
        proc.wait(30)
    assert min(took) >= 0.02  # every answer waited for its 20 ms spin
    batches = _batches((tmp_path / "00000000000000000000.log").read_bytes())
    assert [v for _, vs in batches for v in vs] == [b"v"] * 5
