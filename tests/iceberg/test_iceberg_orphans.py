"""Files that failed or lost commits leave, on a real broker with a real producer and the
embedded catalog: a commit whose outcome the catalog left unknown keeps its files when it
landed and loses them when it did not; files no commit names (a broker killed between its
Parquet write and its commit, whose markers went with it) go once older than
``iceberg.orphan.files.older.than.ms`` and not before; every acknowledged record is in the
table once throughout."""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from iceberg_support import (
    Acked,
    AheadClock,
    catalog,
    check_rows_once,
    create_topic,
    end_offsets,
    iceberg_props,
    passes_after,
    produce_avro,
    referenced_files,
    table_files,
    wait_for_offsets,
)
from pyiceberg.exceptions import CommitStateUnknownException
from pyiceberg.table import Table
from pyiceberg.table.update import AddSnapshotUpdate

from tidelog.testing import EmbeddedBroker

DAY_S = 86_400



def named(table: Table, commit_uuid: str) -> set[str]:
    return {f for f in table_files(table) if commit_uuid in os.path.basename(f)}


def commit_uuid_of(updates: tuple[Any, ...]) -> str | None:
    for u in updates:
        if isinstance(u, AddSnapshotUpdate) and u.snapshot.summary is not None:
            return u.snapshot.summary["tidelog.commit.uuid"]
    return None


def test_commit_of_unknown_outcome_keeps_its_files_if_it_landed_else_they_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    props = iceberg_props(**{"iceberg.target.lag.ms": "100",
                             "iceberg.maintenance.interval.ms": "300"})
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    acked: Acked = {}
    with EmbeddedBroker(props, log_dir=tmp_path / "logs") as broker:
        service = broker.iceberg
        assert service is not None and service.tables is not None
        cat = service.tables.catalog
        real = cat.commit_table
        faults = ["landed", "lost"]  # the next two commits of snapshots
        outcome: dict[str, str] = {}

        def commit_table(table: Table, requirements: Any, updates: Any) -> Any:
            commit = commit_uuid_of(updates)
            if commit is None or not faults:
                return real(table, requirements, updates)
            fault = faults.pop(0)
            outcome[fault] = commit
            if fault == "landed":  # the catalog took it, then the answer was lost
                real(table, requirements, updates)
            raise CommitStateUnknownException(f"injected: commit {fault}, answer lost")

        monkeypatch.setattr(cat, "commit_table", commit_table)
        create_topic(broker.bootstrap_servers, topic, 3,
                     **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        for r in range(3):
            acked.update(produce_avro(broker.bootstrap_servers, broker.schema_registry_url,
                                      topic, range(r * 50, (r + 1) * 50)))
            table = wait_for_offsets(broker.log_dir, topic, end_offsets(acked))
        assert set(outcome) == {"landed", "lost"}
        pending = broker.log_dir / ".iceberg" / "pending"
        passes_after(service, topic, 2)  # clean_pending ran: markers resolved
        assert not os.listdir(pending)
        table = catalog(broker.log_dir).load_table(f"kafka.{topic}")
        assert named(table, outcome["landed"])  # its files are the table's: kept
        assert named(table, outcome["landed"]) <= referenced_files(table)
        assert any(s.summary is not None
                   and s.summary["tidelog.commit.uuid"] == outcome["landed"]
                   for s in table.snapshots())
        assert not named(table, outcome["lost"])  # an orphan: gone
        data = {f for f in table_files(table) if f.endswith(".parquet")}
        assert data == {f for f in referenced_files(table) if f.endswith(".parquet")}
        check_rows_once(table.scan().to_arrow().to_pylist(), acked)


def _plant(table: Table, age_s: float, tag: str) -> set[str]:
    """The files a broker killed between its Parquet write and its commit leaves when its
    markers are gone with it: a data file (a copy of a real one), a manifest, a metadata
    file, none of them named by the table; ``age_s`` old."""
    root = Path(table.location().removeprefix("file://"))
    commit = f"{uuid.uuid4()}"
    # copies of files the table names (a file only on disk may be an orphan planted before,
    # which a maintenance pass may remove under the copy)
    named = sorted(referenced_files(table))
    some_data = next(f for f in named if f.endswith(".parquet"))
    some_manifest = next(f for f in named if f.endswith("-m0.avro"))
    planted = {str(root / "data" / f"00000-0-{commit}.parquet"),
               str(root / "metadata" / f"{commit}-m0.avro"),
               str(root / "metadata" / f"00999-{tag}-{commit}.metadata.json")}
    for path in planted:
        source = some_data if path.endswith(".parquet") else (
            some_manifest if path.endswith(".avro") else table.metadata_location)
        shutil.copyfile(source.removeprefix("file://"), path)
        then = time.time() - age_s
        os.utime(path, (then, then))
    return planted


def test_orphan_files_go_once_older_than_the_age_and_not_before(tmp_path: Path) -> None:
    props = iceberg_props(**{"iceberg.target.lag.ms": "100",
                             "iceberg.maintenance.interval.ms": "300"})
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    with EmbeddedBroker(props, log_dir=tmp_path / "logs") as broker:
        service = broker.iceberg
        assert service is not None
        assert service.orphan_age_ms == 3 * DAY_S * 1000  # Iceberg's older_than default
        create_topic(broker.bootstrap_servers, topic, 2,
                     **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        acked = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                             range(100))
        table = wait_for_offsets(broker.log_dir, topic, end_offsets(acked))
        old = _plant(table, 3 * DAY_S + 600, "old")
        young = _plant(table, 3 * DAY_S - 600, "young")
        passes_after(service, topic, 2)
        on_disk = table_files(catalog(broker.log_dir).load_table(f"kafka.{topic}"))
        assert not old & on_disk  # past the age, named by nothing: removed
        assert young <= on_disk  # within the age: a commit may still be on its way
        more = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                            range(100, 200))
        acked.update(more)
        table = wait_for_offsets(broker.log_dir, topic, end_offsets(acked))
        passes_after(service, topic, 1)
        table = catalog(broker.log_dir).load_table(f"kafka.{topic}")
        assert table_files(table) == referenced_files(table) | young  # nothing of the table's went
        check_rows_once(table.scan().to_arrow().to_pylist(), acked)


def test_maintenance_runs_beside_a_commit_in_flight_and_leaves_its_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flush held between its Parquet write and the catalog's commit while maintenance
    passes run on their own thread with the clock 10 days ahead (every file past the age,
    every snapshot but the newest past expiry): the commit's files stay, it lands when let
    go, and every record is in the table once."""
    props = iceberg_props(**{"iceberg.target.lag.ms": "100",
                             "iceberg.maintenance.interval.ms": "200"})
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    with EmbeddedBroker(props, log_dir=tmp_path / "logs") as broker:
        service = broker.iceberg
        assert service is not None and service.tables is not None
        create_topic(broker.bootstrap_servers, topic, 2,
                     **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        acked = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                             range(100))
        wait_for_offsets(broker.log_dir, topic, end_offsets(acked))
        cat = service.tables.catalog
        real = cat.commit_table
        held, go = threading.Event(), threading.Event()
        in_flight: list[str] = []

        def commit_table(table: Table, requirements: Any, updates: Any) -> Any:
            commit = commit_uuid_of(updates)
            if commit is not None and not in_flight and table.name()[-1] == topic:
                in_flight.append(commit)
                held.set()
                assert go.wait(60)
            return real(table, requirements, updates)

        monkeypatch.setattr(cat, "commit_table", commit_table)
        acked.update(produce_avro(broker.bootstrap_servers, broker.schema_registry_url,
                                  topic, range(100, 200), seed=2))
        assert held.wait(60)
        table = catalog(broker.log_dir).load_table(f"kafka.{topic}")
        files = named(table, in_flight[0])
        assert any(f.endswith(".parquet") for f in files)  # written, not yet committed
        service.clock = AheadClock(10 * DAY_S * 1000)
        passes_after(service, topic, 2)  # beside the held flush: not behind it
        assert files <= named(table, in_flight[0])  # nothing of the commit in flight went
        assert len(catalog(broker.log_dir).load_table(f"kafka.{topic}").snapshots()) == 1
        go.set()
        table = wait_for_offsets(broker.log_dir, topic, end_offsets(acked))
        assert any(s.summary is not None and s.summary["tidelog.commit.uuid"] == in_flight[0]
                   for s in table.snapshots())
        passes_after(service, topic, 1)
        table = catalog(broker.log_dir).load_table(f"kafka.{topic}")
        assert table_files(table) == referenced_files(table)
        check_rows_once(table.scan().to_arrow().to_pylist(), acked)


def test_pending_files_are_cleaned_beside_commits_without_touching_them(
        tmp_path: Path) -> None:
    """``clean_pending`` run over and over on another thread (as maintenance does) while
    commits go on: the commits that start in the middle of a pass keep every file, so every
    data file the table names is there and every row reads back."""
    import pyarrow as pa

    from tidelog.iceberg.columns import table_schema
    from tidelog.iceberg.tables import Tables

    (tmp_path / ".iceberg" / "warehouse").mkdir(parents=True)
    tables = Tables(catalog(tmp_path), "kafka", tmp_path / "pending")
    schema = table_schema(None)
    table = tables.create("races", schema, "()")
    from tidelog.iceberg.columns import arrow_schema

    target = arrow_schema(table.schema())
    stop = threading.Event()
    passes = 0

    def clean() -> None:
        nonlocal passes
        while not stop.is_set():
            tables.clean_pending()
            passes += 1

    cleaner = threading.Thread(target=clean)
    cleaner.start()
    try:
        rows = 0
        for i in range(40):
            kafka = pa.array([{"partition": 0, "offset": i, "timestamp": None,
                               "headers": [], "key": None}], target.field("kafka").type)
            data = pa.Table.from_arrays([kafka, pa.array([b"v"], pa.binary())],
                                        schema=target)
            table = tables.commit(table, data, {0: i} if i else {}, {0: i + 1}, {0: 0})
            rows += 1
    finally:
        stop.set()
        cleaner.join(30)
    assert passes > 40  # the passes ran beside the commits
    table = catalog(tmp_path).load_table("kafka.races")
    for path in table.inspect.all_files()["file_path"].to_pylist():
        assert os.path.exists(path.removeprefix("file://")), path
    assert table.scan().to_arrow().num_rows == rows


def test_the_next_metadata_file_stays_while_a_commit_is_in_flight(tmp_path: Path) -> None:
    """A commit writes its metadata file (the next version, named by no commit uuid) before
    the catalog points at it: a pass then, with every file past the age, keeps it while a
    commit is in flight, and removes it as a refused commit's once none is."""
    from tidelog.iceberg.columns import table_schema
    from tidelog.iceberg.orphans import Reachable, remove_orphan_files
    from tidelog.iceberg.tables import Tables

    (tmp_path / ".iceberg" / "warehouse").mkdir(parents=True)
    tables = Tables(catalog(tmp_path), "kafka", tmp_path / "pending")
    table = tables.create("next", table_schema(None), "()")
    current = Path(table.metadata_location.removeprefix("file://"))
    version = int(current.name.split("-", 1)[0])  # 00000-<uuid>.metadata.json
    written = current.with_name(f"{version + 1:05d}-{uuid.uuid4()}.metadata.json")
    shutil.copyfile(current, written)  # the commit's, the catalog not yet moved to it

    def load() -> Table:
        return catalog(tmp_path).load_table("kafka.next")

    now_ms = int(time.time() * 1000) + 10 * DAY_S * 1000
    remove_orphan_files(load(), load, now_ms, DAY_S * 1000, lambda: [str(uuid.uuid4())],
                        Reachable())
    assert written.exists() and current.exists()
    removed = remove_orphan_files(load(), load, now_ms, DAY_S * 1000, list, Reachable())
    assert not written.exists() and current.exists() and removed == 1
