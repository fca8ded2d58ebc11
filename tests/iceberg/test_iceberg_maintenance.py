"""Table maintenance on a real broker's translator: old metadata files deleted at each commit
(Iceberg's write.metadata.* properties), snapshots expired by age with the broker's clock
moved ahead (the newest kept, and with it the translator's offsets), manifests merged; a
restart resumes from the kept snapshot with every record once, and pyiceberg and Polars
still read the table."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from iceberg_support import (
    Acked,
    AheadClock,
    catalog,
    check_rows_once,
    create_topic,
    end_offsets,
    iceberg_props,
    produce_avro,
    table_offsets,
    wait_for_offsets,
)
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table

from tidelog.testing import EmbeddedBroker

DAY_MS = 86_400_000


def _metadata_files(table: Table) -> list[str]:
    meta = Path(table.location().removeprefix("file://")) / "metadata"
    return sorted(f for f in os.listdir(meta) if f.endswith(".metadata.json"))


def _set_properties(log_dir: Path, name: str, props: dict[str, str]) -> None:
    """A user's own table settings (retried: a flush's commit may go first)."""
    for _ in range(50):
        try:
            table = catalog(log_dir).load_table(f"kafka.{name}")
            with table.transaction() as txn:
                txn.set_properties(props)
            return
        except CommitFailedException:
            time.sleep(0.1)
    raise AssertionError("table properties not set")


def _produce_rounds(broker: EmbeddedBroker, topic: str, rounds: int, first: int,
                    acked: Acked) -> Table:
    """``rounds`` batches of records, each waited for in the table (one flush or more
    each)."""
    table = None
    for r in range(rounds):
        got = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                           range(first + r * 20, first + (r + 1) * 20))
        acked.update(got)
        table = wait_for_offsets(broker.log_dir, topic, end_offsets(acked))
    assert table is not None
    return table


def test_metadata_files_bounded_snapshots_expired_restart_resumes_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")
    props = iceberg_props(**{"iceberg.target.lag.ms": "100",
                             "iceberg.maintenance.interval.ms": "200"})
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    acked: Acked = {}
    with EmbeddedBroker(props, log_dir=tmp_path / "logs") as broker:
        create_topic(broker.bootstrap_servers, topic, 2,
                     **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        table = _produce_rounds(broker, topic, 1, 0, acked)
        have = table.properties  # what tidelog sets on the tables it creates
        assert have["write.metadata.delete-after-commit.enabled"] == "true"
        assert have["write.metadata.previous-versions-max"] == "100"
        assert have["commit.manifest-merge.enabled"] == "true"
        # a user's own settings are honoured: at most 5 previous metadata files, 3 snapshots
        _set_properties(broker.log_dir, topic, {"write.metadata.previous-versions-max": "5",
                                                "history.expire.min-snapshots-to-keep": "3",
                                                "commit.manifest.min-count-to-merge": "4"})
        table = _produce_rounds(broker, topic, 12, 1000, acked)
        assert len(table.snapshots()) >= 12  # not old yet: none expired
        # a commit writes its metadata file, then deletes those past the bound: a listing
        # between the two sees one more (a maintenance commit may be under way)
        deadline = time.monotonic() + 30
        while len(files := _metadata_files(table)) > 6 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(files) <= 6, files
        assert len(table.metadata.metadata_log) <= 5
        assert len(table.current_snapshot().manifests(table.io)) < 12  # type: ignore[union-attr]
        before = table.current_snapshot()
        assert broker.iceberg is not None
        broker.iceberg.clock = AheadClock(6 * DAY_MS)  # past the default 5 days
        meta = Path(table.location().removeprefix("file://")) / "metadata"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the expiry's commit, then its deletes
            table = catalog(broker.log_dir).load_table(f"kafka.{topic}")
            kept = {s.manifest_list.removeprefix("file://") for s in table.snapshots()}
            lists = {str(meta / f) for f in os.listdir(meta) if f.startswith("snap-")}
            if len(table.snapshots()) == 3 and lists == kept:
                break
            time.sleep(0.2)
        assert len(table.snapshots()) == 3, len(table.snapshots())
        assert table.current_snapshot() is not None and before is not None
        assert table.current_snapshot().snapshot_id == before.snapshot_id  # type: ignore[union-attr]
        assert table_offsets(table) == end_offsets(acked)
        assert lists == kept  # expired lists deleted
        check_rows_once(table.scan().to_arrow().to_pylist(), acked)
    with EmbeddedBroker(props, log_dir=tmp_path / "logs") as broker:  # restart
        table = _produce_rounds(broker, topic, 2, 5000, acked)
        check_rows_once(table.scan().to_arrow().to_pylist(), acked)

        import polars as pl

        assert pl.scan_iceberg(table).collect().height == len(acked)
