"""A broker whose Iceberg catalog cannot be opened as it starts (here its SQLite file is a
directory: no database opens there, even for root) starts anyway: producers to an Iceberg
topic are acknowledged, translation pauses and says why, the lag counts every record, and
the retention floor keeps them all; once the catalog can be opened, the flushes open it
and every record is in the table once. Before, the broker's start failed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from iceberg_support import (
    check_rows_once,
    create_topic,
    end_offsets,
    iceberg_props,
    produce_avro,
    wait_for_offsets,
)

from tidelog.iceberg.opening_side import OpeningSide
from tidelog.testing import EmbeddedBroker


@pytest.mark.parametrize("process", ["false", "true"], ids=["thread", "process"])
def test_a_catalog_out_at_start_pauses_translation_not_the_broker(
        tmp_path: Path, process: str) -> None:
    blocked = tmp_path / ".iceberg" / "catalog.db"
    blocked.mkdir(parents=True)
    props = iceberg_props(**{"iceberg.translation.process": process})
    with EmbeddedBroker(props, log_dir=tmp_path) as b:
        service = b.iceberg
        assert service is not None and isinstance(service.side, OpeningSide)
        assert service.side.opened is None
        topic = "orders"
        create_topic(b.bootstrap_servers, topic, 2,
                     **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        acked = produce_avro(b.bootstrap_servers, b.schema_registry_url, topic, range(100))
        assert len(acked) == 100  # producers unaffected
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = service.topics.get(topic)
            if (state is not None and state.failing is not None
                    and sum(state.translator.lag().values()) == 100):
                break
            time.sleep(0.1)
        assert state is not None and state.failing is not None  # paused, and says why
        assert sum(state.translator.lag().values()) == 100
        assert [state.translator.floor(p)() for p in (0, 1)] == [0, 0]  # retention keeps all
        blocked.rmdir()  # the catalog can be opened now
        table = wait_for_offsets(tmp_path, topic, end_offsets(acked))
        check_rows_once(table.scan().to_arrow().to_pylist(), acked)
        assert service.side.opened is not None
        if service.worker is not None:
            assert service.worker.starts == 1  # the worker lived through the outage
