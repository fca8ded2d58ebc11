"""Exactly once through crashes: a consume-transform-produce worker copies topic A to topic
B, offsets and output in one transaction per poll, while the broker (a ``tidelog serve``
process) and the worker are SIGKILLed again and again. B read under read_committed holds
every record of A exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from serve_process import ServeProcess
from txn_clients import read_all

WORKER = str(Path(__file__).with_name("txn_eos_worker.py"))
PARTITIONS = 3
RECORDS = 3000
CONFIG = {
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
    "num.partitions": str(PARTITIONS),
}


class Worker:
    def __init__(self, bootstrap: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, WORKER, bootstrap, "in", "out", "eos-group", "eos-tid",
             str(PARTITIONS)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.commits = 0
        self.done = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("committed"):
                self.commits += 1
            elif line.startswith("done"):
                self.done = True

    def wait_commits(self, n: int, timeout: float = 120) -> bool:
        deadline = time.monotonic() + timeout
        while self.commits < n and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # polling the worker's progress, not waiting for time to pass
        return self.commits >= n

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self._reader.join(10)  # every line the worker printed is counted


def _produce_input(bootstrap: str, first: int = 0) -> list[tuple[str, int, bytes]]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    out = []
    for i in range(first, first + RECORDS):
        value = f"record-{i}".encode()
        p.produce("in", value=value, partition=i % PARTITIONS)
        out.append(("out", i % PARTITIONS, value))
    assert p.flush(60) == 0
    return out


def test_consume_transform_produce_survives_broker_and_worker_kills(tmp_path: Path) -> None:
    broker = ServeProcess(tmp_path / "logs", dict(CONFIG)).start()
    port = broker.port
    bs = broker.bootstrap_servers
    try:
        expected = _produce_input(bs)
        kills = {"worker": 0, "broker": 0}
        # the faults in order; each is retried until it lands under a worker that has
        # committed, and a worker that finished the input first gets more input, so the
        # schedule never depends on the workload outlasting it
        schedule = ["worker", "broker"] * 3
        for _ in range(20):
            if not schedule:
                break
            worker = Worker(bs)
            if not worker.wait_commits(3):
                # a worker that exited early (its watchdog, see txn_eos_worker.py) or is
                # done: try again; the final run below must still finish the job
                worker.kill()
                if worker.done:
                    expected += _produce_input(bs, len(expected))
                continue
            if schedule.pop(0) == "worker":
                worker.kill()  # the worker dies mid-stream
                kills["worker"] += 1
            else:
                broker.kill()  # the broker dies under a running worker
                kills["broker"] += 1
                broker = ServeProcess(tmp_path / "logs", dict(CONFIG)).start(port)
                worker.wait_commits(worker.commits + 2)
                worker.kill()
        # run workers to the end (a worker stuck in a librdkafka bug exits; start another)
        done, deadline = False, time.monotonic() + 300
        while not done and time.monotonic() < deadline:
            final = Worker(bs)
            while not final.done and final.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            final.kill()
            done = final.done
        assert done, "no worker finished"
        print(f"faults {kills}, input records {len(expected)}")
        assert kills == {"worker": 3, "broker": 3}, kills  # every fault took effect
        tps = [("out", p) for p in range(PARTITIONS)]
        got = read_all("confluent", bs, tps, committed=True, expect=len(expected),
                       timeout=60)
        assert len(got) == len(expected) and sorted(got) == sorted(expected)
        everything = read_all("confluent", bs, tps, committed=False, expect=len(expected),
                              timeout=20)
        # aborted attempts left their records in the log: read_uncommitted sees more
        assert len(everything) >= len(expected)
    finally:
        broker.stop()


pytestmark = pytest.mark.timeout(600)
