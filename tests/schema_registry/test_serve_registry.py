"""``tidelog serve`` with ``schema.registry.listeners``: a separate broker process serves the
registry; stopped with SIGTERM and started again on the same log dir and ports, it answers
with the same ids and versions, read back from ``_schemas``."""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from registry_support import call

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from serve_process import ServeProcess


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if call(url, "GET", "/subjects")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"no registry at {url}")


def test_serve_keeps_schemas_across_a_restart(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    proc = ServeProcess(tmp_path, {"schema.registry.listeners": url}).start()
    port = proc.port
    try:
        _wait_ready(url)
        client = SchemaRegistryClient({"url": url})
        ids = [
            client.register_schema(f"s{i}", Schema(json.dumps(
                {"type": "record", "name": f"R{i}", "fields": [{"name": "a", "type": "int"}]}
            ), "AVRO"))
            for i in range(3)
        ]
        assert ids == [1, 2, 3]
    finally:
        assert proc.stop() == 0
    again = ServeProcess(tmp_path, {"schema.registry.listeners": url}).start(port)
    try:
        _wait_ready(url)
        status, subjects, _ = call(url, "GET", "/subjects")
        assert (status, subjects) == (200, ["s0", "s1", "s2"])
        client = SchemaRegistryClient({"url": url})
        assert [client.get_latest_version(f"s{i}").schema_id for i in range(3)] == ids
    finally:
        assert again.stop() == 0
