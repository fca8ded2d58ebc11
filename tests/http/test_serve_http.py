"""``tidelog serve`` with ``http.listeners``: a separate process serves /healthz, /readyz and
/metrics beside the Kafka listener, stops cleanly on SIGTERM, and refuses a bad URL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import confluent_kafka
from http_support import get, sample, scrape, wait_for

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from serve_process import ServeProcess


def _http_url(proc: ServeProcess) -> str:
    def found() -> str:
        for line in list(proc.stderr_lines):
            if "HTTP listener on " in line:
                return line.split("HTTP listener on ", 1)[1].split()[0].rstrip(",")
        return ""

    return wait_for(found, "the HTTP listener's log line")


def test_serve_exposes_health_and_metrics(tmp_path):
    proc = ServeProcess(tmp_path, {"http.listeners": "http://127.0.0.1:0"}).start()
    try:
        base = _http_url(proc)
        assert get(base + "/healthz") == (200, "ok\n")
        assert get(base + "/readyz")[0] == 200
        errors: list[object] = []
        p = confluent_kafka.Producer({"bootstrap.servers": proc.bootstrap_servers})
        for i in range(25):
            p.produce("served", value=b"%d" % i, on_delivery=lambda e, _m: errors.append(e))
        assert p.flush(30) == 0 and errors == [None] * 25
        s = scrape(base)
        assert sample(s, "kafka_server_brokertopicmetrics_messagesin_total", topic="served") == 25
        assert sample(s, "process_resident_memory_bytes") > 0
    finally:
        assert proc.stop() == 0


def test_serve_refuses_a_bad_http_listener(tmp_path):
    cmd = [sys.executable, "-m", "tidelog.cli.main", "serve", "--override",
           "listeners=PLAINTEXT://127.0.0.1:0", "--override", f"log.dirs={tmp_path}",
           "--override", "http.listeners=https://127.0.0.1:9644"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "http.listeners" in done.stderr and "expected http://host:port" in done.stderr
