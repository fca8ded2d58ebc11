"""What a default ``tidelog serve`` imports: a one-broker start, answering its first client,
loads none of the libraries and subsystems it runs only when configured (ZooKeeper mode,
tiered storage, Iceberg, the Schema Registry, the HTTP listener, client telemetry, regex
subscriptions, compressed batches, the fault plan). Most of a start is imports, so one of
them coming back to the start-up path is a regression of the start time.

The broker runs in a fresh interpreter (``tidelog.cli.main.main(["serve", ...])``); once it
is ready a thread sends it an ApiVersions and a Metadata request over a real socket, then
reports ``sys.modules``. With the fault plan configured, the same report shows the fault
machinery loaded: the check sees an import when there is one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Loaded only by the feature that needs them (in brackets: what loads them).
NOT_AT_START = (
    "kazoo",  # zookeeper.connect
    "tidelog.server.cluster_node",
    "tidelog.server.controller",
    "tidelog.server.zk",
    "tidelog.server.replication.fetcher",
    "tidelog.protocol.inter_broker.leader_and_isr_v7",  # the controller's requests
    "tidelog.server.remote_log_manager",  # remote.log.storage.system.enable
    "tidelog.storage.remote.factory",
    "tidelog.storage.remote.index_cache",
    "tidelog.client.producer",
    "boto3",
    "obstore",
    "tidelog.iceberg.service",  # iceberg.enabled
    "pyiceberg",
    "pyarrow",
    "fastavro",
    "pyspark",
    "tidelog.schema_registry.listener",  # schema.registry.listeners
    "jsonschema",
    "avro",
    "confluent_kafka",
    "tidelog.http",  # http.listeners
    "aiohttp",
    "prometheus_client",
    "tidelog.server.telemetry.manager",  # the first telemetry request
    "google.protobuf",
    "opentelemetry",
    "re2",  # the first regex subscription
    "lz4",  # the first compressed batch
    "zstandard",
    "cramjam",
    "importlib.metadata",  # (the crc32c package's __init__ reads its version with it)
    "tidelog.server.faults",  # tidelog.fault.plan.file
    "tidelog.server.fault_file",
)

SCRIPT = r"""
import json, os, signal, socket, struct, sys, threading, time
from pathlib import Path

ready = Path(sys.argv[1])
extra = sys.argv[2:]


def request(sock, api_key, corr, body):
    client_id = b"imports"
    msg = struct.pack(">hhih", api_key, 0, corr, len(client_id)) + client_id + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    data = sock.recv(size, socket.MSG_WAITALL)
    assert struct.unpack(">i", data[:4])[0] == corr
    return data[4:]


def client():
    deadline = time.monotonic() + 120
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    host, port = ready.read_text().strip().rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        versions = request(sock, 18, 1, b"")  # ApiVersions v0
        metadata = request(sock, 3, 2, struct.pack(">i", 0))  # Metadata v0, all topics
    report = {"modules": sorted(sys.modules),
              "api_versions_error": struct.unpack(">h", versions[:2])[0],
              "brokers": struct.unpack(">i", metadata[:4])[0]}
    print("REPORT " + json.dumps(report), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)


threading.Thread(target=client, daemon=True).start()
from tidelog.cli.main import main

sys.exit(main(["serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
               "--override", f"log.dirs={ready.parent / 'logs'}",
               "--ready-file", str(ready), *extra]))
"""


def _serve_and_report(tmp_path: Path, *extra: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "ready"), *extra],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT ")), None)
    assert line is not None, proc.stderr[-3000:]
    report: dict[str, object] = json.loads(line.removeprefix("REPORT "))
    return report


def _loaded(modules: list[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


def test_default_serve_answers_without_the_optional_parts(tmp_path: Path) -> None:
    report = _serve_and_report(tmp_path)
    modules = report["modules"]
    assert isinstance(modules, list)
    # the report is a serving broker's: it answered both requests
    assert report["api_versions_error"] == 0
    assert report["brokers"] == 1
    assert "tidelog.server.broker" in modules and "tidelog.server.handlers.metadata" in modules
    loaded = [name for name in NOT_AT_START if _loaded(modules, name)]
    assert loaded == [], f"a default start imported {loaded}"


def test_the_check_sees_an_optional_part_when_configured(tmp_path: Path) -> None:
    plan = tmp_path / "faults.jsonl"
    plan.write_text("")
    report = _serve_and_report(tmp_path, "--override", f"tidelog.fault.plan.file={plan}")
    modules = report["modules"]
    assert isinstance(modules, list)
    assert report["api_versions_error"] == 0
    assert _loaded(modules, "tidelog.server.faults")
    assert _loaded(modules, "tidelog.server.fault_file")
