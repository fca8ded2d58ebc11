"""KIP-405/958 remote metrics on /metrics: a tiered broker fed by librdkafka reports the
bytes and requests it copied, its remote log size and copy lag, per topic and in total."""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest

from tidelog.testing import EmbeddedBroker

from .harness import broker_props, tiered_topic_configs

ck = pytest.importorskip("confluent_kafka")


def _scrape(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("kafka_server_brokertopicmetrics_remote"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_remote_metrics_on_the_metrics_endpoint(tmp_path: Path) -> None:
    (tmp_path / "remote").mkdir()
    props = {**broker_props(tmp_path / "logs", tmp_path / "remote"),
             "remote.log.manager.task.interval.ms": "50",
             "http.listeners": "http://127.0.0.1:0"}
    props.pop("log.dirs")
    with EmbeddedBroker(props, log_dir=tmp_path / "logs") as b:
        admin = ck.admin.AdminClient({"bootstrap.servers": b.bootstrap_servers})
        topic = ck.admin.NewTopic("tiered", 1, 1, config=tiered_topic_configs())
        admin.create_topics([topic])["tiered"].result(30)
        producer = ck.Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
        for _ in range(30):
            producer.produce("tiered", value=b"v" * 200)
            producer.flush(10)
        rlm = b.broker.remote_log_manager
        deadline = time.monotonic() + 30
        while rlm.metrics.all_topics.remote_copy_requests < 3:
            assert time.monotonic() < deadline, "nothing copied"
            time.sleep(0.05)
        # the remote size gauge is set by the expiration step of the pass after a copy
        m = _scrape(b.http_url)
        while m.get('kafka_server_brokertopicmetrics_remotelogsizebytes{topic="tiered"}', 0) <= 0:
            assert time.monotonic() < deadline, "remote log size never reported"
            time.sleep(0.05)
            m = _scrape(b.http_url)
    copied = m['kafka_server_brokertopicmetrics_remotecopybytes_total{topic="tiered"}']
    assert copied > 0
    assert m["kafka_server_brokertopicmetrics_remotecopybytes_total"] >= copied
    assert m['kafka_server_brokertopicmetrics_remotecopyrequests_total{topic="tiered"}'] >= 3
    assert m['kafka_server_brokertopicmetrics_remotecopyerrors_total{topic="tiered"}'] == 0
    assert 'kafka_server_brokertopicmetrics_remotecopylagsegments{topic="tiered"}' in m
    assert m['kafka_server_brokertopicmetrics_remotelogsizebytes{topic="tiered"}'] > 0
