"""KafkaJS (the Node.js client, from the npm registry) against a real ``tidelog serve``: an
idempotent producer, a committed and an aborted transaction, a consumer group reading only
committed records in order, its committed offsets, DescribeConfigs with synonyms, and
DeleteRecords, each as the broker answered it. KafkaJS's own suite, which its npm package
does not ship, runs with compat/kafkajs/run.py (compat/FINDINGS.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.testing import EmbeddedBroker
from tidelog.testing.capability import require_capability

KAFKAJS = "kafkajs@2.2.4"  # the release compat/kafkajs/run.py runs the suite of
SCRIPT = Path(__file__).resolve().parent / "kafkajs" / "smoke.js"


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """KafkaJS installed once per machine (it has no dependencies of its own)."""
    require_capability("node", shutil.which("node") is not None and shutil.which("npm")
                       is not None, "Node.js and npm are not installed")
    cache = Path(os.environ.get("TIDELOG_COMPAT_CACHE",
                                Path(tempfile.gettempdir()) / "tidelog-compat-cache"))
    prefix = cache / KAFKAJS.replace("@", "-")
    if not (prefix / "node_modules" / "kafkajs" / "package.json").exists():
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix),
                        KAFKAJS], check=True, capture_output=True, timeout=300)
    return prefix / "node_modules"


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def test_kafkajs_produces_transacts_consumes_and_administers(
        node_modules: Path, broker: EmbeddedBroker) -> None:
    done = subprocess.run(["node", str(SCRIPT), broker.bootstrap_servers, "js-smoke", "js-g"],
                          env={**os.environ, "NODE_PATH": str(node_modules)},
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["created"] is True
    values = out["values"]
    assert sorted(values) == sorted([f"plain-{i}" for i in range(200)]
                                    + [f"commit-{j}" for j in range(10)])  # none aborted
    by_partition: dict[int, list[int]] = {}
    by_key: dict[int, list[int]] = {}
    for (partition, offset), value in zip(out["partitions"], values, strict=True):
        by_partition.setdefault(partition, []).append(offset)
        if value.startswith("plain-"):
            i = int(value.removeprefix("plain-"))
            by_key.setdefault(i % 7, []).append(i)
    for sent in by_key.values():  # one key's records in the order they were sent
        assert sent == sorted(sent)
    for offsets in by_partition.values():
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    committed = dict(out["committed"])
    for partition, offsets in by_partition.items():
        assert int(committed[partition]) > offsets[-1]  # the group's offsets were committed
    ends = {p: int(high) for p, _offset, high, _low in out["ends"]}
    assert sum(ends.values()) == 200 + 10 + 10 + 2  # the records, and two markers
    configs = {name: (value, source, synonyms) for name, value, source, synonyms
               in out["configs"]}
    assert configs["retention.ms"] == ("604800000", 5, [])  # Kafka lists no synonym here
    assert configs["compression.type"] == ("producer", 5, [["compression.type", "producer", 5]])
    after = {p: (int(low), int(high)) for p, low, high in out["afterDelete"]}
    assert after[0][0] == after[0][1] == ends[0]
