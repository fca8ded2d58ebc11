"""The embedded broker API and the ``tidelog_broker`` pytest fixture users put in their tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient

from tidelog.testing import EmbeddedBroker


def test_fixture_serves_real_clients(tidelog_broker: EmbeddedBroker) -> None:
    bs = tidelog_broker.bootstrap_servers
    assert bs.startswith("127.0.0.1:") and tidelog_broker.port > 0
    p = ck.Producer({"bootstrap.servers": bs})
    p.produce("fixture-topic", b"hello", b"k", partition=0)
    assert p.flush(10) == 0
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": "g", "enable.auto.commit": False})
    c.assign([ck.TopicPartition("fixture-topic", 0, ck.OFFSET_BEGINNING)])
    msgs = c.consume(1, 10)
    c.close()
    assert [(m.key(), m.value()) for m in msgs] == [(b"k", b"hello")]


def test_context_manager_removes_its_temp_dir_and_keeps_a_given_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with EmbeddedBroker() as b:
        own = b.log_dir
        assert (own / "meta.properties").exists()
    assert not own.exists()
    with EmbeddedBroker(log_dir=tmp_path) as b:
        assert b.log_dir == tmp_path
    assert (tmp_path / "meta.properties").exists()


def test_factory_with_config_overrides(tidelog_broker_factory) -> None:  # type: ignore[no-untyped-def]
    b = tidelog_broker_factory({"num.partitions": "3"})
    from tidelog.client.kafka_client import KafkaClient

    with KafkaClient(b.bootstrap_servers) as kc:
        md = kc.metadata(["auto3"], auto_create=True)
    assert sorted(md.topics["auto3"]) == [0, 1, 2]


def test_two_brokers_side_by_side(tidelog_broker: EmbeddedBroker) -> None:
    with EmbeddedBroker() as other:
        assert other.port != tidelog_broker.port


def test_describe_log_dirs_reports_partition_sizes(tidelog_broker: EmbeddedBroker) -> None:
    from broker_wire import Wire, produce_body

    from tidelog.records import build_batch

    batch = build_batch([(1_700_000_000_000, None, b"x" * 500)])
    with Wire(tidelog_broker) as w:
        w.call(
            3,
            12,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        w.call(0, 9, body=produce_body(9, "logdirs", {0: batch}))
        resp = w.call(35, 4, topics=None)
    [result] = resp.results  # type: ignore[attr-defined]
    assert result.error_code == 0 and result.log_dir == str(tidelog_broker.log_dir.resolve())
    sizes = {
        (t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions
    }
    assert sizes[("logdirs", 0)] == len(batch)
    assert result.total_bytes > 0 and 0 <= result.usable_bytes <= result.total_bytes


def test_restart_keeps_port_and_data() -> None:
    with EmbeddedBroker() as b:
        bs = b.bootstrap_servers
        p = ck.Producer({"bootstrap.servers": bs})
        p.produce("restart-me", b"before", partition=0)
        assert p.flush(10) == 0
        b.restart()
        assert b.bootstrap_servers == bs
        p.produce("restart-me", b"after", partition=0)  # the same producer reconnects
        assert p.flush(30) == 0
        c = ck.Consumer({"bootstrap.servers": bs, "group.id": "g", "enable.auto.commit": False})
        c.assign([ck.TopicPartition("restart-me", 0, ck.OFFSET_BEGINNING)])
        msgs = c.consume(2, 10)
        c.close()
    assert [m.value() for m in msgs] == [b"before", b"after"]


def test_each_test_gets_a_fresh_broker(tidelog_broker: EmbeddedBroker) -> None:
    """fixture-topic, created by the first test of this module, is not here: no state leaks."""
    admin = AdminClient({"bootstrap.servers": tidelog_broker.bootstrap_servers})
    assert "fixture-topic" not in admin.list_topics(timeout=10).topics



_SESSION_BROKERS: list[EmbeddedBroker] = []


@pytest.mark.parametrize("nth", [1, 2])
def test_session_broker_is_shared(tidelog_broker_session: EmbeddedBroker, nth: int) -> None:
    _SESSION_BROKERS.append(tidelog_broker_session)
    assert all(b is tidelog_broker_session for b in _SESSION_BROKERS)
    assert tidelog_broker_session.port > 0


def test_fixtures_are_listed_with_their_docstrings(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--fixtures", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    ).stdout
    assert "tidelog_broker -- " in out and "A fresh in-process Kafka-compatible broker" in out
    assert "tidelog_broker_session [session scope]" in out
    assert "One in-process broker for the whole test session" in out
    assert "tidelog_broker_factory -- " in out
