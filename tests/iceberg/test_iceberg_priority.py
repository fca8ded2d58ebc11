"""The translation and maintenance threads run at a lower OS priority than the broker's event
loop (``iceberg.translation.nice``, added to their nice value): what the broker decided,
read back from ``/proc/self/task/<tid>/stat``, with translation still committing records."""

from __future__ import annotations

import os
import sys
import threading
import uuid
from pathlib import Path

import pytest
from iceberg_support import (
    create_topic,
    end_offsets,
    iceberg_props,
    produce_avro,
    wait_for_offsets,
    wait_until,
)

from tidelog.config.core import ConfigError
from tidelog.config.iceberg_config import ICEBERG_CONFIG_DEF
from tidelog.iceberg.priority import MAX_NICE, lower_thread_priority
from tidelog.testing import EmbeddedBroker

pytestmark = pytest.mark.skipif(sys.platform != "linux",
                                reason="a thread has a nice value of its own on Linux only")


def nice_of(native_id: int) -> int:
    """The nice value of one of this process's threads (the 19th field of its stat)."""
    stat = Path(f"/proc/self/task/{native_id}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[16])


def own_nice() -> int:
    return nice_of(threading.get_native_id())


def test_lower_thread_priority_changes_the_calling_thread_only() -> None:
    got: list[int | None] = []
    seen: list[int] = []

    def run() -> None:
        got.append(lower_thread_priority(3))
        seen.append(nice_of(threading.get_native_id()))

    before = own_nice()
    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert got == [min(MAX_NICE, before + 3)] and seen == got
    assert own_nice() == before  # the caller (and so the process's other threads) kept it
    assert lower_thread_priority(0) is None and own_nice() == before


@pytest.mark.parametrize("value", ["-1", "20", "ten"])
def test_a_nice_increment_outside_0_to_19_is_refused(value: str) -> None:
    with pytest.raises(ConfigError):
        ICEBERG_CONFIG_DEF.parse({"iceberg.translation.nice": value})


@pytest.mark.parametrize("increment", [None, "0"])
def test_the_broker_lowers_its_translation_and_maintenance_threads(
        tmp_path: Path, increment: str | None) -> None:
    extra = {"iceberg.maintenance.interval.ms": "200"}
    if increment is not None:
        extra["iceberg.translation.nice"] = increment
    want = 10 if increment is None else int(increment)  # the default: 10
    topic = f"prio-{uuid.uuid4().hex[:6]}"
    with EmbeddedBroker(iceberg_props(**extra), log_dir=tmp_path / "logs") as broker:
        create_topic(broker.bootstrap_servers, topic, 2,
                     **{"tidelog.iceberg.mode": "value_schema_id_prefix"})
        acked = produce_avro(broker.bootstrap_servers, broker.schema_registry_url, topic,
                             range(40))
        wait_for_offsets(broker.log_dir, topic, end_offsets(acked))
        assert broker.iceberg is not None
        wait_until(lambda: broker.iceberg is not None
                   and broker.iceberg.topics[topic].maintained > 0, "a maintenance pass")
        base = os.getpriority(os.PRIO_PROCESS, 0)  # the process's (its main thread's)
        loop = broker._thread
        assert loop is not None and loop.native_id is not None
        assert nice_of(loop.native_id) == base  # the event loop keeps the broker's
        threads = broker.iceberg.threads()
        assert sorted(t.name.rsplit("_", 1)[0] for t in threads) == [
            "iceberg-maintenance", "iceberg-translation"]
        for t in threads:
            assert t.native_id is not None
            assert nice_of(t.native_id) == min(MAX_NICE, base + want), t.name
