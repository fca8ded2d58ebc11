"""/healthz and /readyz for process managers; readiness follows the log dirs."""

from __future__ import annotations

import json

from http_support import HTTP, get, sample, scrape, wait_for

from tidelog.testing import EmbeddedBroker


def _ready(base: str) -> tuple[int, str] | None:
    status, body = get(base + "/readyz")
    return (status, body) if status == 200 else None


def test_healthy_and_ready(tmp_path):
    with EmbeddedBroker(HTTP, log_dir=tmp_path) as eb:
        assert get(eb.http_url + "/healthz") == (200, "ok\n")
        # __consumer_offsets' partitions load after the broker has started (as in Kafka, the
        # groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile): ready once they have
        status, body = wait_for(lambda: _ready(eb.http_url), "/readyz to answer 200")
        ready = json.loads(body)
        assert status == 200 and ready["ready"] is True
        assert ready["checks"] == {"logs_loaded": True, "groups_loaded": True,
                                   "log_dirs_online": True, "no_fatal_error": True}  # fmt: skip


def test_offline_log_dir_makes_the_broker_unready(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    config = {**HTTP, "log.dirs": f"{a},{b}"}
    with EmbeddedBroker(config, log_dir=tmp_path) as eb:

        async def fail_dir() -> None:
            logs = eb.broker.replica_manager.logs
            path = next(d.path for d in logs.dirs if d.path.name == "b")
            logs.failure_channel.maybe_add_offline_log_dir(path, "test: disk pulled")

        eb.run(fail_dir())
        status, body = get(eb.http_url + "/readyz")
        ready = json.loads(body)
        assert status == 503 and ready["ready"] is False
        assert ready["checks"]["log_dirs_online"] is False
        assert [p.endswith("b") for p in ready["offline_log_dirs"]] == [True]
        assert "disk pulled" in next(iter(ready["offline_log_dirs"].values()))
        # still alive and serving the other dir
        assert get(eb.http_url + "/healthz")[0] == 200
        s = scrape(eb.http_url)
        assert sample(s, "kafka_log_logmanager_offlinelogdirectorycount") == 1
        offline = [k for k, v in s.items()
                   if k[0] == "kafka_log_logmanager_logdirectoryoffline" and v == 1]  # fmt: skip
        assert len(offline) == 1 and dict(offline[0][1])["logDirectory"].endswith("b")


def test_http_listener_is_off_by_default():
    with EmbeddedBroker() as eb:
        assert eb.http is None and eb.http_url == ""


def test_loading_consumer_offsets_makes_the_broker_unready():
    with EmbeddedBroker(HTTP) as eb:
        import confluent_kafka

        p = confluent_kafka.Producer({"bootstrap.servers": eb.bootstrap_servers})
        p.produce("t", value=b"x")
        assert p.flush(30) == 0
        c = confluent_kafka.Consumer({"bootstrap.servers": eb.bootstrap_servers,
                                      "group.id": "g", "enable.auto.commit": False})  # fmt: skip
        c.assign([confluent_kafka.TopicPartition("t", 0, 0)])
        c.commit(offsets=[confluent_kafka.TopicPartition("t", 0, 0)], asynchronous=False)
        c.close()
        # the coordinator started on that first group request loads in the background
        wait_for(lambda: get(eb.http_url + "/readyz")[0] == 200, "__consumer_offsets loaded")

        async def loading(on: bool) -> None:  # as while replaying __consumer_offsets
            manager = eb.broker.group_coordinator.manager
            (manager.partitions.loading.add if on else manager.partitions.loading.discard)(7)

        eb.run(loading(True))
        status, body = get(eb.http_url + "/readyz")
        ready = json.loads(body)
        assert status == 503 and ready["loading_offsets_partitions"] == [7]
        eb.run(loading(False))
        assert get(eb.http_url + "/readyz")[0] == 200
