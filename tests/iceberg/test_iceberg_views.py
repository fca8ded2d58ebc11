"""Where an operator sees a topic's table: the console's topic page (the broker's own view:
table, current snapshot, next offset per partition, lag) and ``tidelog topics --describe
--iceberg-config`` (the real CLI in a subprocess, reading the catalog named by the broker's
properties), both against what the table itself records."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from iceberg_support import (
    create_topic,
    end_offsets,
    iceberg_props,
    produce_avro,
    table_offsets,
    wait_for_offsets,
)

from tidelog.testing import EmbeddedBroker


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(iceberg_props(**{"http.listeners": "http://127.0.0.1:0"})) as b:
        yield b


def _page(b: EmbeddedBroker, path: str) -> str:
    with urllib.request.urlopen(b.http.urls[0] + path, timeout=30) as r:
        return str(r.read().decode())


def test_console_and_describe_show_the_table(broker: EmbeddedBroker, tmp_path: Path) -> None:
    topic = "viewed"
    create_topic(broker.bootstrap_servers, topic, 2,
                 **{"redpanda.iceberg.mode": "value_schema_id_prefix"})  # Redpanda's name
    acked = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                         range(300))
    table = wait_for_offsets(broker.log_dir, topic, end_offsets(acked))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    offsets = table_offsets(table)

    page = _page(broker, f"/topics/{topic}")
    assert f"kafka.{topic}" in page
    assert re.search(r'id="iceberg-snapshot">(\d+)<', page)
    shown = dict(re.findall(r"<tr><td>(\d+)</td><td class=\"num\">(\d+)</td>",
                            page.split('id="iceberg-partitions"')[1]))
    assert {int(p): int(o) for p, o in shown.items()} == offsets  # flushes stopped: caught up

    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={broker.log_dir}\niceberg.enabled=true\n")
    out = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "topics", "--describe", "--topic", topic,
         "--bootstrap-server", broker.bootstrap_servers, "--iceberg-config", str(props)],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    m = re.search(r"\tIcebergTable: kafka\.viewed\tMode: value_schema_id_prefix\t"
                  r"SnapshotId: (\d+)\tSnapshotTime: \S+", out.stdout)
    assert m, out.stdout
    newest = wait_for_offsets(broker.log_dir, topic, end_offsets(acked)).current_snapshot()
    assert newest is not None and int(m[1]) in {snapshot.snapshot_id, newest.snapshot_id}
    rows = dict(re.findall(r"Partition: (\d+)\t.*\tIcebergCommittedOffset: (\d+)\t"
                           r"IcebergLag: 0$", out.stdout, re.M))
    assert {int(p): int(o) for p, o in rows.items()} == end_offsets(acked)


def test_describe_without_the_table_yet(broker: EmbeddedBroker, tmp_path: Path) -> None:
    create_topic(broker.bootstrap_servers, "later", 1,
                 **{"tidelog.iceberg.mode": "key_value",
                    "tidelog.iceberg.target.lag.ms": "3600000"})
    props = tmp_path / "server.properties"
    props.write_text(f"log.dirs={broker.log_dir}\n")
    out = subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", "topics", "--describe", "--topic", "later",
         "--bootstrap-server", broker.bootstrap_servers, "--iceberg-config", str(props)],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "\tIcebergTable: kafka.later\tMode: key_value\tSnapshotId: none" in out.stdout
    assert "IcebergCommittedOffset: 0\tIcebergLag: 0" in out.stdout
