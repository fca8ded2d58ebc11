"""``tidelog perf produce`` on its default client (batches built once from a template,
pipelined on tidelog's own connection) against a real broker: every record lands once at
consecutive offsets with the tool's payload, a refused batch ends the run non-zero with
Kafka's error name, acks=0 and idempotence work, and the throttle holds. Also: the template's
batches are valid v2 batches, per-batch statistics equal per-record ones, and the command
imports only what it needs."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable

import confluent_kafka as ck
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tidelog.cli.perf import Stats
from tidelog.client.kafka_client import KafkaClient, TopicPartition
from tidelog.client.pipelined import BatchTemplate
from tidelog.records import RecordBatch
from tidelog.testing import EmbeddedBroker, EmbeddedCluster

TIDELOG = [sys.executable, "-m", "tidelog.cli.main"]
FINAL = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg "
                   r"latency, [\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, "
                   r"\d+ ms 99.9th\.$")  # fmt: skip


def perf(bootstrap: str, topic: str, n: int, size: int, *props: str,
         throughput: int = -1, client: str = "tidelog") -> subprocess.CompletedProcess[str]:
    cmd = [*TIDELOG, "perf", "produce", "--bootstrap-server", bootstrap, "--topic", topic,
           "--num-records", str(n), "--record-size", str(size), "--throughput",
           str(throughput), "--client", client, "--producer-props", *props]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def create(bootstrap: str, topic: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic].result(30)


def read_back(bootstrap: str, topic: str, partitions: int = 1) -> dict[int, list[ck.Message]]:
    """Every record of the topic, by partition, read by librdkafka up to the high watermark."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "verify",
                     "enable.auto.commit": False})  # fmt: skip
    out: dict[int, list[ck.Message]] = {}
    try:
        for p in range(partitions):
            tp = ck.TopicPartition(topic, p, 0)
            _, high = c.get_watermark_offsets(tp, timeout=10)
            c.assign([tp])
            got: list[ck.Message] = []
            while len(got) < high:
                got += [m for m in c.consume(high - len(got), 5) if m.error() is None]
            out[p] = got
    finally:
        c.close()
    return out


def test_every_record_lands_once_at_consecutive_offsets(tidelog_broker: EmbeddedBroker) -> None:
    bs = tidelog_broker.bootstrap_servers
    create(bs, "perf-three", 3)
    n, size = 5_017, 37  # batches of 100 records and a short last one, over three partitions
    r = perf(bs, "perf-three", n, size, "acks=all", "batch.num.messages=100")
    assert r.returncode == 0, r.stderr
    m = FINAL.match(r.stdout.splitlines()[-1])
    assert m is not None and int(m.group(1)) == n, r.stdout
    by_partition = read_back(bs, "perf-three", 3)
    assert sum(len(v) for v in by_partition.values()) == n
    assert sum(1 for v in by_partition.values() if v) >= 2  # the sticky partition moved
    payload = random.Random(0).randbytes(size)  # the tool's one value, as Kafka's tool has
    for msgs in by_partition.values():
        assert [m.offset() for m in msgs] == list(range(len(msgs)))
        assert all(m.value() == payload and m.key() is None for m in msgs)


def test_a_refused_batch_exits_non_zero_with_kafkas_error(tidelog_broker: EmbeddedBroker) -> None:
    bs = tidelog_broker.bootstrap_servers
    create(bs, "perf-small", 1, **{"max.message.bytes": "2000"})
    r = perf(bs, "perf-small", 30, 1000, "acks=1", "batch.num.messages=5")
    assert r.returncode == 1
    assert "30 records failed: MESSAGE_TOO_LARGE (10)" in r.stderr, r.stderr
    assert r.stdout.startswith("0 records sent, ")
    assert read_back(bs, "perf-small")[0] == []


def test_no_broker_and_unknown_settings_fail_with_one_line() -> None:
    r = perf("127.0.0.1:1", "t", 10, 10)
    assert r.returncode == 1 and r.stderr.startswith("tidelog perf: ") and "127.0.0.1:1" in r.stderr
    r = perf("127.0.0.1:1", "t", 10, 10, "queue.buffering.max.messages=5")
    assert r.returncode == 1
    assert "does not take queue.buffering.max.messages; use --client librdkafka" in r.stderr


def test_acks_zero_and_idempotence(tidelog_broker: EmbeddedBroker) -> None:
    bs = tidelog_broker.bootstrap_servers
    for topic, props in (("perf-a0", ["acks=0"]),
                         ("perf-idem", ["enable.idempotence=true", "batch.num.messages=300"])):
        r = perf(bs, topic, 1000, 10, *props)
        assert r.returncode == 0, r.stderr
        assert len(read_back(bs, topic)[0]) == 1000
    tp = TopicPartition("perf-idem", 0)
    with KafkaClient(bs) as kc:
        batches = list(kc.fetch({tp: 0})[tp].batches())
    assert [b.base_sequence for b in batches] == [0, 300, 600, 900]
    assert len({b.producer_id for b in batches}) == 1 and batches[0].producer_id >= 0


@pytest.mark.parametrize("client", ["tidelog", "librdkafka"])
def test_a_throughput_cap_holds(tidelog_broker: EmbeddedBroker, client: str) -> None:
    bs = tidelog_broker.bootstrap_servers
    n, cap = 600, 2000
    r = perf(bs, f"perf-cap-{client}", n, 20, "acks=1", throughput=cap, client=client)
    assert r.returncode == 0, r.stderr
    m = FINAL.match(r.stdout.splitlines()[-1])
    assert m is not None and int(m.group(1)) == n, r.stdout
    assert float(m.group(2)) <= cap * 1.05  # not faster than the cap allows
    assert len(read_back(bs, f"perf-cap-{client}")[0]) == n


def test_template_batches_are_valid_and_fill_batch_size() -> None:
    value = b"v" * 100
    t = BatchTemplate(value, 10_000, 1_000_000)
    assert 9_000 < t.max_records < 10_000  # batch.size binds before batch.num.messages
    assert t.batch_size(t.max_records) <= 1_000_000 < t.batch_size(t.max_records) + 108
    for k in (1, 128, t.max_records):
        out = bytearray(7 + t.batch_size(k))
        t.write(out, 7, k, 1_700_000_000_123, 42, 3, 1000)
        batch = RecordBatch(bytes(out[7:]))
        batch.ensure_valid()
        assert (batch.records_count, batch.last_offset_delta) == (k, k - 1)
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 1000)
        records = list(batch)
        assert [r.offset for r in records] == list(range(k))
        assert {(r.key, r.value, r.timestamp) for r in records} == {
            (None, value, 1_700_000_000_123)
        }
    assert BatchTemplate(b"x" * 5000, 10, 1000).max_records == 1  # one record at least


def test_batch_stats_equal_per_record_stats() -> None:
    chunks = [(0.004, 7), (0.0125, 1), (0.002, 300), (0.031, 64), (0.0099, 5)]
    one = Stats(10**6, 10**9)
    bulk = Stats(10**6, 10**9)
    one.sampling = bulk.sampling = 7
    for latency, k in chunks:
        one.record_many([latency] * k, 10)
        bulk.record_batch(latency, k, 10)
    fields: Callable[[Stats], tuple[object, ...]] = lambda s: (  # noqa: E731
        s.count, s.bytes, s.total_latency, s.max_latency, s.latencies, s.iteration)
    assert fields(bulk) == fields(one)
    assert bulk.count == 377 and len(bulk.latencies) == 54


def test_the_command_imports_only_what_it_needs(tidelog_broker: EmbeddedBroker) -> None:
    """A whole `tidelog perf produce` run loads no other command, no librdkafka, no kio, no
    importlib.metadata (the version is read only for --version), no logging and no
    tidelog.config: its start-up is most of a short run's wall time."""
    argv = ["tidelog", "perf", "produce", "--bootstrap-server", tidelog_broker.bootstrap_servers,
            "--topic", "perf-imports", "--num-records", "10", "--record-size", "10"]  # fmt: skip
    code = (
        "import json, sys\n"
        "from tidelog.cli.main import main\n"
        f"sys.argv = {argv!r}\n"
        "rc = main()\n"
        "print(json.dumps([rc, sorted(sys.modules)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    rc, modules = json.loads(out.splitlines()[-1])
    assert rc == 0 and out.startswith("10 records sent, "), out
    loaded = set(modules)
    assert {m for m in loaded if m.startswith("tidelog.cli.")} == {
        "tidelog.cli.main", "tidelog.cli.perf", "tidelog.cli.client_config"
    }
    assert "tidelog.client.pipelined" in loaded
    for heavy in ("kio", "confluent_kafka", "importlib.metadata", "crc32c", "encodings.idna",
                  "logging", "dataclasses", "tidelog.config", "pathlib", "datetime"):  # fmt: skip
        assert heavy not in loaded, heavy


def test_partitions_led_by_three_brokers(tidelog_cluster: EmbeddedCluster) -> None:
    """A connection to each partition's leader: every record lands on whichever broker leads
    its partition."""
    bs = tidelog_cluster.bootstrap_servers
    create(bs, "perf-spread", 6)
    admin = AdminClient({"bootstrap.servers": bs})
    leaders = {p.leader for p in admin.list_topics("perf-spread", timeout=30)
               .topics["perf-spread"].partitions.values()}  # fmt: skip
    assert len(leaders) >= 2, leaders
    n = 6_000
    r = perf(bs, "perf-spread", n, 20, "batch.num.messages=250")
    assert r.returncode == 0, r.stderr
    by_partition = read_back(bs, "perf-spread", 6)
    assert sum(len(v) for v in by_partition.values()) == n
    led = {p.leader for p in admin.list_topics("perf-spread", timeout=30)
           .topics["perf-spread"].partitions.values() if by_partition[p.id]}  # fmt: skip
    assert len(led) >= 2, led  # records went to more than one broker
    for msgs in by_partition.values():
        assert [m.offset() for m in msgs] == list(range(len(msgs)))


def test_a_broker_gone_mid_run_ends_it_non_zero(
    tidelog_broker_factory: Callable[..., EmbeddedBroker],
) -> None:
    broker = tidelog_broker_factory()
    bs = broker.bootstrap_servers
    cmd = [*TIDELOG, "perf", "produce", "--bootstrap-server", bs, "--topic", "perf-gone",
           "--num-records", "100000", "--record-size", "10", "--throughput", "2000",
           "--producer-props", "acks=1", "request.timeout.ms=3000"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_records(bs, "perf-gone", 100, proc)
        broker.stop()  # 50 s of records still to send
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1, (out, err)
    assert err.startswith("tidelog perf: ") and bs.split(":")[1] in err, err


def _wait_for_records(bootstrap: str, topic: str, n: int, proc: subprocess.Popen[str]) -> None:
    """Until partition 0 of ``topic`` holds ``n`` records (the producer still running)."""
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "watch"})
    deadline = time.monotonic() + 60
    try:
        while True:
            assert time.monotonic() < deadline and proc.poll() is None, proc.poll()
            try:
                if c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)[1] >= n:
                    return
            except ck.KafkaException:  # the producer has not created the topic yet
                continue
    finally:
        c.close()
