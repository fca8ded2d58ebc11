"""``tidelog perf produce --client librdkafka`` hands records to librdkafka in batches: with a
local queue far smaller than a batch every record still lands once (the queue-full rest is
produced after delivery reports are served), and the final line counts exactly the records
delivered. (The default client and the throughput cap of both: tests/cli/test_perf_produce.py.)"""

from __future__ import annotations

import re
from collections.abc import Iterator

import confluent_kafka as ck
import pytest
from cli_terminal import cli
from serve_process import ServeProcess

from tidelog.cli.perf import BATCH, Stats


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    proc = ServeProcess(tmp_path_factory.mktemp("serve")).start()
    yield proc
    assert proc.stop() == 0, "".join(proc.stderr_lines[-30:])


def _count(bootstrap: str, topic: str) -> int:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "count", "enable.auto.commit": False})
    try:
        low, high = c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)
        return int(high - low)
    finally:
        c.close()


def test_a_queue_smaller_than_a_batch_loses_nothing(serve: ServeProcess) -> None:
    n = 3 * BATCH + 17
    r = cli("perf", "produce", "--bootstrap-server", serve.bootstrap_servers, "--topic", "perf-q",
            "--num-records", str(n), "--record-size", "20", "--throughput", "-1",
            "--client", "librdkafka",
            "--producer-props", "acks=1", "queue.buffering.max.messages=50")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert re.match(rf"^{n} records sent, ", r.stdout.splitlines()[-1]), r.stdout
    assert _count(serve.bootstrap_servers, "perf-q") == n


def test_stats_taken_in_bulk_equal_one_by_one() -> None:
    """The sums, the maximum and the sampled latencies over lists of any split."""
    lat = [i / 7000 for i in range(1, 2500)]
    one = Stats(len(lat), 10**9)
    one.sampling = bulk_sampling = 3
    for x in lat:
        one.record_many([x], 10)
    bulk = Stats(len(lat), 10**9)
    bulk.sampling = bulk_sampling
    for i in range(0, len(lat), 101):
        bulk.record_many(lat[i : i + 101], 10)
    for s in (one, bulk):
        assert s.count == len(lat) and s.bytes == 10 * len(lat)
        assert s.max_latency == int(lat[-1] * 1000)
        assert s.total_latency == sum(int(x * 1000) for x in lat)
    assert bulk.latencies == one.latencies == [int(x * 1000) for x in lat[::3]]
