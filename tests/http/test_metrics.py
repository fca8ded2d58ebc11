"""/metrics scraped with prometheus_client's parser while real clients produce and consume:
the Kafka-named counters move by exactly what was sent and read."""

from __future__ import annotations

import re

import confluent_kafka
import kafka
import pytest
from confluent_kafka.admin import AclOperation
from http_acls import TOPIC_OPERATIONS, grant_console, secured
from http_support import HTTP, get, post, sample, scrape, wait_for

from tidelog.client.kafka_client import KafkaClient
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

TOPIC = "metered"


@pytest.fixture
def broker():
    with EmbeddedBroker({**HTTP, "num.partitions": "2"}) as eb:
        yield eb


def _produce(eb: EmbeddedBroker, n: int, start: int = 0) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": eb.bootstrap_servers, "linger.ms": 5})
    for i in range(start, start + n):
        p.produce(TOPIC, key=b"k%d" % i, value=b"value-%d" % i, partition=i % 2)
    assert p.flush(30) == 0


def _log_bytes(eb: EmbeddedBroker, partitions: list[int] | None = None) -> int:
    async def size() -> int:
        rm = eb.broker.replica_manager
        return sum(rm.get_log(TopicPartition(TOPIC, p)).size_in_bytes
                   for p in (partitions or [0, 1]))  # fmt: skip

    return int(eb.run(size()))


def _consume_all_and_commit(eb: EmbeddedBroker, commits: dict[int, int]) -> list[bytes]:
    """kafka-python reads both partitions (assign: no rebalance), then commits ``commits``
    (partition -> offset) for the group ``metered-readers``."""
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=eb.bootstrap_servers, auto_offset_reset="earliest",
        enable_auto_commit=False, group_id="metered-readers", consumer_timeout_ms=200,
    )  # fmt: skip
    try:
        consumer.assign([kafka.TopicPartition(TOPIC, 0), kafka.TopicPartition(TOPIC, 1)])
        got: list[bytes] = []
        wait_for(lambda: got.extend(m.value for m in consumer) or len(got) >= 300, "300 records")
        consumer.commit({kafka.TopicPartition(TOPIC, p): kafka.OffsetAndMetadata(o, "", -1)
                         for p, o in commits.items()})  # fmt: skip
        return got
    finally:
        consumer.close()


def _fetch_once(eb: EmbeddedBroker, partition: int) -> bytes:
    """One Fetch from offset 0 with our own client: the raw record bytes sent."""
    client = KafkaClient(eb.bootstrap_servers)
    try:
        tp = TopicPartition(TOPIC, partition)
        return client.fetch({tp: 0})[tp].records
    finally:
        client.close()


def test_produce_moves_counters_by_exactly_what_was_sent(broker):
    base = broker.http_url
    before = scrape(base)
    assert sample(before, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 0
    _produce(broker, 300)
    after = scrape(base)
    msgs = "kafka_server_brokertopicmetrics_messagesin_total"
    assert sample(after, msgs, topic=TOPIC) == 300
    assert sample(after, msgs) - sample(before, msgs) == 300  # the all-topics series
    # batches are stored byte for byte: bytes in == what the log holds
    stored = _log_bytes(broker)
    assert sample(after, "kafka_server_brokertopicmetrics_bytesin_total", topic=TOPIC) == stored
    for p in range(2):
        assert sample(after, "kafka_log_log_logendoffset", topic=TOPIC, partition=str(p)) == 150
        assert sample(after, "kafka_log_log_numlogsegments", topic=TOPIC, partition=str(p)) == 1
    assert sample(after, "kafka_log_log_size", topic=TOPIC, partition="0") > 0
    produces = sample(after, "kafka_server_brokertopicmetrics_totalproducerequests_total",
                      topic=TOPIC)  # fmt: skip
    assert produces >= 2  # one per partition per produce request
    produce_count = sample(after, "kafka_network_requestmetrics_totaltimems_count",
                           request="Produce")  # fmt: skip
    rate = sum(v for (name, labels), v in after.items()
               if name == "kafka_network_requestmetrics_requests_total"
               and ("request", "Produce") in labels)  # fmt: skip
    assert produce_count == rate > 0
    assert sample(after, "kafka_network_requestmetrics_totaltimems", request="Produce",
                  quantile="0.99") > 0  # fmt: skip


def test_consume_moves_bytes_out_and_lag_by_exactly_what_was_read(broker):
    base = broker.http_url
    _produce(broker, 300)
    stored = _log_bytes(broker)
    msgs = "kafka_server_brokertopicmetrics_messagesin_total"
    assert len(_consume_all_and_commit(broker, {0: 150, 1: 100})) == 300
    read = scrape(base)
    out = "kafka_server_brokertopicmetrics_bytesout_total"
    # a client may fetch the same bytes twice (kafka-python does under load): at least once
    assert sample(read, out, topic=TOPIC) >= stored
    # exactly: one Fetch of partition 0 from offset 0 sends that partition's whole log
    got_back = _fetch_once(broker, 0)
    assert sample(scrape(base), out, topic=TOPIC) - sample(read, out, topic=TOPIC) == len(
        got_back) == _log_bytes(broker, partitions=[0])  # fmt: skip
    fetches = [v for (n, lb), v in read.items()
               if n == "kafka_network_requestmetrics_requests_total"
               and ("request", "FetchConsumer") in lb]  # fmt: skip
    assert sum(fetches) == sample(read, "kafka_network_requestmetrics_totaltimems_count",
                                  request="Fetch") > 0  # fmt: skip
    group = "metered-readers"
    assert sample(read, "kafka_consumergroup_lag", consumergroup=group, topic=TOPIC,
                  partition="0") == 0  # fmt: skip
    assert sample(read, "kafka_consumergroup_lag", consumergroup=group, topic=TOPIC,
                  partition="1") == 50  # fmt: skip
    assert sample(read, "kafka_consumergroup_current_offset", consumergroup=group, topic=TOPIC,
                  partition="1") == 100  # fmt: skip
    assert sample(read, "kafka_consumergroup_group_lag_seconds", group=group, topic=TOPIC,
                  partition="1") >= 0  # fmt: skip

    # a second round moves the counters by exactly the new records
    _produce(broker, 40, start=300)
    again = scrape(base)
    assert sample(again, msgs, topic=TOPIC) - sample(read, msgs, topic=TOPIC) == 40
    assert sample(again, "kafka_consumergroup_lag", consumergroup=group, topic=TOPIC,
                  partition="1") == 70  # fmt: skip


def test_broker_gauges_and_process_metrics(broker):
    _produce(broker, 10)
    s = scrape(broker.http_url)
    assert sample(s, "kafka_server_replicamanager_partitioncount") == 2
    assert sample(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert sample(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert sample(s, "kafka_log_logmanager_offlinelogdirectorycount") == 0
    assert sample(s, "kafka_server_delayedoperationpurgatory_purgatorysize",
                  delayedOperation="Fetch") == 0  # fmt: skip
    # confluent-kafka's producer is idempotent-capable but not idempotent by default
    assert sample(s, "kafka_server_replicamanager_produceridcount") == 0
    assert sample(s, "process_resident_memory_bytes") > 0
    assert sample(s, "process_open_fds") > 0
    assert ("process_cpu_seconds_total", ()) in s


def test_idempotent_producer_counts_one_producer_id(broker):
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                  "enable.idempotence": True})  # fmt: skip
    for i in range(5):
        p.produce(TOPIC, value=b"%d" % i, partition=0)
    assert p.flush(30) == 0
    s = scrape(broker.http_url)
    assert sample(s, "kafka_server_replicamanager_produceridcount") == 1
    assert sample(s, "kafka_server_brokertopicmetrics_messagesin_total", topic=TOPIC) == 5


def test_connections_per_listener(broker):
    import socket

    base = scrape(broker.http_url)
    name = "kafka_server_socket_server_metrics_connection_count"
    before = sample(base, name, listener="PLAINTEXT", networkProcessor="0")
    socks = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(3)]
    try:
        wait_for(lambda: sample(scrape(broker.http_url), name, listener="PLAINTEXT",
                                networkProcessor="0") == before + 3, "3 more connections")  # fmt: skip
    finally:
        for s in socks:
            s.close()


def test_long_poll_counts_as_remote_time_and_flushes_are_timed(broker):
    s0 = scrape(broker.http_url)
    flushes = "kafka_log_logflushstats_logflushrateandtimems_count"
    # flush.messages=1: every append is flushed (Kafka's LogFlushStats times each flush)
    import confluent_kafka.admin as ka

    admin = ka.AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topic = ka.NewTopic("flushed", 1, 1, config={"flush.messages": "1"})
    admin.create_topics([topic])["flushed"].result(30)
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers,
                                  "linger.ms": 0})  # fmt: skip
    for i in range(3):
        p.produce("flushed", value=b"%d" % i)
        assert p.flush(30) == 0
    wait_for(lambda: sample(scrape(broker.http_url), flushes) >= sample(s0, flushes) + 3,
             "three timed flushes")  # fmt: skip
    # a Fetch at the log end waits in the purgatory for its max_wait_ms: the broker answers
    # no sooner (TotalTimeMs grows by at least the wait: a lower bound, which a loaded
    # machine only lengthens), and the wait is counted as RemoteTimeMs, not local time
    def fetch_times() -> tuple[float, float]:
        s = scrape(broker.http_url)
        return (sample(s, "kafka_network_requestmetrics_totaltimems_sum", request="Fetch"),
                sample(s, "kafka_network_requestmetrics_remotetimems_sum", request="Fetch"))

    total_before, remote_before = fetch_times()
    client = KafkaClient(broker.bootstrap_servers)
    try:
        tp = TopicPartition("flushed", 0)
        assert client.fetch({tp: 3}, max_wait_ms=200)[tp].records == b""  # nothing after 3
    finally:
        client.close()
    total, remote = fetch_times()
    # libuv's timers (uvloop) count whole milliseconds from a cached loop time, so the
    # the purgatory's 200 ms expiry counts from the loop's cached time (uvloop reads the clock
    # once per iteration), so it can fire before 200 ms of perf_counter time pass: by as long
    # as the loop's iteration ran before the Fetch parked (milliseconds on a loaded machine)
    assert total - total_before >= 200 - 25
    assert remote - remote_before >= (total - total_before) / 2


def test_admin_actions_ask_the_authorizer():
    """Kafka's StandardAuthorizer with ACLs made by an AdminClient: the console's principal may
    CREATE "allowed" and do everything but CREATE on "denied"; only "allowed" is created."""
    with EmbeddedBroker(secured({"http.console.admin.enable": "true"})) as eb:
        grant_console(eb, "allowed", [AclOperation.CREATE])
        grant_console(eb, "denied", [op for op in TOPIC_OPERATIONS if op != AclOperation.CREATE])
        token = re.search(r'name="csrf" value="([^"]+)"', get(eb.http_url + "/topics")[1])
        assert token is not None
        status, body = post(eb.http_url + "/admin/topics",
                            {"csrf": token.group(1), "name": "denied"})  # fmt: skip
        assert status == 403 and "CREATE" in body and "ACLs" in body
        assert eb.broker.replica_manager.topic("denied") is None
        status, body = post(eb.http_url + "/admin/topics",
                            {"csrf": token.group(1), "name": "allowed"})  # fmt: skip
        assert status == 200 and "Topic allowed" in body
        assert eb.broker.replica_manager.topic("allowed") is not None


def test_time_lag_is_the_age_of_the_first_unconsumed_record(broker):
    import time

    old = int(time.time() * 1000) - 600_000  # produced "ten minutes ago" (CreateTime)
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})
    p.produce("aged", value=b"old", partition=0, timestamp=old)
    assert p.flush(30) == 0
    p.produce("aged", value=b"new", partition=0)
    assert p.flush(30) == 0
    c = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers,
                                  "group.id": "aged-readers"})  # fmt: skip
    c.commit(offsets=[confluent_kafka.TopicPartition("aged", 0, 0)], asynchronous=False)
    c.close()
    s = scrape(broker.http_url)
    labels = {"group": "aged-readers", "topic": "aged", "partition": "0"}
    assert 600 <= sample(s, "kafka_consumergroup_group_lag_seconds", **labels) < 700
    assert sample(s, "kafka_consumergroup_lag", consumergroup="aged-readers", topic="aged",
                  partition="0") == 2  # fmt: skip


def test_connections_are_counted_per_listener():
    import socket

    config = {**HTTP, "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
              "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"}  # fmt: skip
    with EmbeddedBroker(config) as eb:
        port = eb.broker.bound_ports["INTERNAL"]
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        name = "kafka_server_socket_server_metrics_connection_count"
        try:
            def counts() -> tuple[float, float]:
                s = scrape(eb.http_url)
                return (sample(s, name, listener="INTERNAL", networkProcessor="0"),
                        sample(s, name, listener="PLAINTEXT", networkProcessor="0"))  # fmt: skip

            wait_for(lambda: counts() == (2, 0), "two connections on INTERNAL, none on PLAINTEXT")
        finally:
            for s in socks:
                s.close()
