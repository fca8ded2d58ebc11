"""AlterReplicaLogDirs under produce load, the broker SIGKILLed mid-move and restarted: the
move finishes, and every acknowledged record is there exactly once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from serve_process import ServeProcess

ck = pytest.importorskip("confluent_kafka")

TOPIC = "moving"


class LoadProducer(threading.Thread):
    """An idempotent producer sending numbered records until stopped; keeps the acked ones."""

    def __init__(self, bootstrap: str, start: int) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.next = bootstrap, start
        self.acked: list[int] = []
        self.stop_flag = threading.Event()

    def run(self) -> None:
        p = ck.Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                         "linger.ms": 2, "message.timeout.ms": 5000, "log_level": 0})

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                self.acked.append(int(msg.value()))

        while not self.stop_flag.is_set():
            try:
                p.produce(TOPIC, b"%d" % self.next + b" " * 200, on_delivery=on_delivery)
                self.next += 1
            except BufferError:
                pass
            p.poll(0.0005)
        p.flush(10)


def raw_call(bootstrap: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
    from tidelog.client.kafka_client import KafkaClient

    with KafkaClient(bootstrap) as client:
        return client.any_connection().call(api_key, version, body)


def consume_all(bootstrap: str) -> list[int]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "mv-check",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([ck.TopicPartition(TOPIC, 0, 0)])
    out: list[int] = []
    lo, hi = c.get_watermark_offsets(ck.TopicPartition(TOPIC, 0), timeout=10)
    deadline = time.monotonic() + 60
    while len(out) < hi - lo and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error() is None:
                out.append(int(m.value()))
    c.close()
    return out


def partition_dir(d1: Path, d2: Path) -> list[Path]:
    return [p for d in (d1, d2) for p in d.glob(f"{TOPIC}-0*")]


def test_move_survives_a_kill_mid_move(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    overrides = {"log.dirs": f"{d1},{d2}", "num.partitions": "1",
                 "log.segment.bytes": str(1 << 20)}
    proc = ServeProcess(tmp_path / "unused", overrides).start()
    load = LoadProducer(proc.bootstrap_servers, 0)
    load.start()
    deadline = time.monotonic() + 60
    while len(load.acked) < 20000 and time.monotonic() < deadline:  # ~5 MB to move
        time.sleep(0.05)
    [current] = partition_dir(d1, d2)
    target = d2 if current.parent == d1 else d1
    resp = raw_call(proc.bootstrap_servers, 34, 1, {"dirs": [
        {"path": str(target), "topics": [{"name": TOPIC, "partitions": [0]}]}]})
    assert int(resp.results[0].partitions[0].error_code) == 0
    assert list(target.glob(f"{TOPIC}-0.*-future")), "the move did not start"
    proc.kill()  # mid-move: the future log has at most a few chunks
    load.stop_flag.set()
    load.join(30)
    acked_before = list(load.acked)

    proc2 = ServeProcess(tmp_path / "unused", overrides).start(port=proc.port)
    load2 = LoadProducer(proc2.bootstrap_servers, 10_000_000)
    load2.start()
    deadline = time.monotonic() + 120
    while not ((target / f"{TOPIC}-0").is_dir() and not list(target.glob("*-future"))):
        assert time.monotonic() < deadline, partition_dir(d1, d2)
        time.sleep(0.1)
    # the restart found the interrupted move and finished it
    assert any("Resuming the move" in ln or "Promoted the complete" in ln
               for ln in proc2.stderr_lines), "".join(proc2.stderr_lines[-20:])
    moved_at = len(load2.acked)  # appends keep landing in the moved log
    while len(load2.acked) < moved_at + 2000:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    load2.stop_flag.set()
    load2.join(30)
    got = consume_all(proc2.bootstrap_servers)
    assert proc2.stop() == 0
    counts = Counter(got)
    assert not [v for v, n in counts.items() if n > 1], "duplicated records"
    missing = set(acked_before + load2.acked) - set(counts)
    assert not missing, f"{len(missing)} acknowledged records lost"
    assert len(load2.acked) > 0
    errors = [line for line in proc2.stderr_lines if " ERROR " in line]
    assert not errors, errors[:5]
