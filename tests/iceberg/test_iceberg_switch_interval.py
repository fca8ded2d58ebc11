"""The interpreter's switch interval while translation runs: at most the translation's while
any flush or maintenance pass runs, on any thread, and back to what it was after the last."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from iceberg_support import create_topic, iceberg_props, produce_avro

from tidelog.iceberg.switch_interval import TRANSLATING, SwitchInterval
from tidelog.testing import EmbeddedBroker

DEFAULT = 0.005


@pytest.fixture(autouse=True)
def default_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(DEFAULT)
    yield
    sys.setswitchinterval(before)


def test_overlapping_holders_on_threads_keep_it_short_until_the_last_leaves() -> None:
    shared = SwitchInterval(0.0005)
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, float] = {}

    def first() -> None:
        with shared:
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with shared:
            second_in.set()
            first_out.wait(10)
            seen["after the first left"] = sys.getswitchinterval()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen["after the first left"] == pytest.approx(0.0005)
    assert sys.getswitchinterval() == pytest.approx(DEFAULT)


def test_an_interval_set_by_someone_else_meanwhile_stays() -> None:
    shared = SwitchInterval(0.0005)
    with shared:
        sys.setswitchinterval(0.002)  # e.g. a stall watchdog starting
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_a_shorter_interval_is_left_alone() -> None:
    sys.setswitchinterval(0.0001)
    with SwitchInterval(0.0005):
        assert sys.getswitchinterval() == pytest.approx(0.0001)
    assert sys.getswitchinterval() == pytest.approx(0.0001)


def test_a_flush_and_its_commit_run_with_the_short_interval(tmp_path: Path) -> None:
    """A real flush on the translation thread: its commit sees the translation's interval,
    and once it is done the default is back."""
    with EmbeddedBroker(iceberg_props(), log_dir=tmp_path) as b:
        topic = f"si-{uuid.uuid4().hex[:6]}"
        create_topic(b.bootstrap_servers, topic, 1, **{
            "tidelog.iceberg.mode": "value_schema_id_prefix",
            "tidelog.iceberg.target.lag.ms": "3600000"})  # flushed here only
        assert b.iceberg is not None
        service = b.iceberg
        deadline = time.monotonic() + 30
        while topic not in service.topics and time.monotonic() < deadline:
            time.sleep(0.05)
        translator = service.topics[topic].translator
        during: list[float] = []
        commit = translator.tables.commit

        def recording(*args, **kwargs):  # type: ignore[no-untyped-def]
            during.append(sys.getswitchinterval())
            return commit(*args, **kwargs)

        translator.tables.commit = recording  # type: ignore[method-assign]
        produce_avro(b.bootstrap_servers, b.schema_registry_url, topic, range(5))
        assert b.run(service.flush_topic(topic), timeout=60).rows == 5
        assert during == [pytest.approx(TRANSLATING.seconds)]
        assert sys.getswitchinterval() == pytest.approx(DEFAULT)
