"""What a librdkafka consumer is answered, Fetch by Fetch, as bench/consume_trees.py --trace
sees it (librdkafka's own debug lines of the read, parsed by bench/fetch_trace.py): every answer but the
last filled to max.partition.fetch.bytes as Kafka's LogSegment.read fills it (whole batches,
then the next one cut at the limit, which the client drops and fetches again), the first
batch whole when it alone is larger than the limit, and the broker's own Fetch metrics
counting the same requests."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fetch_trace
import rdkafka_load

from tidelog.client.kafka_client import KafkaClient, TopicPartition
from tidelog.records import build_batch
from tidelog.testing.embedded import EmbeddedBroker

T0 = int(time.time() * 1000)
LIMIT = 256 * 1024
HEAD = 200  # a Fetch v16 response's bytes around one partition's records, at most
HTTP = {"http.listeners": "http://127.0.0.1:0"}


def _fill(eb: EmbeddedBroker, topic: str, batches: list[bytes]) -> None:
    with KafkaClient(eb.bootstrap_servers) as client:
        client.create_topics({topic: 1})
        tp = TopicPartition(topic, 0)
        for batch in batches:
            client.produce(client.leader_for(tp), {tp: batch})


def _read(eb: EmbeddedBroker, topic: str, n: int) -> list[fetch_trace.Answer]:
    c = rdkafka_load.Consumer(eb.bootstrap_servers, topic, trace=True,
                              config={"max.partition.fetch.bytes": LIMIT})
    try:
        c.consume(n)
    finally:
        c.close()
    assert c.records == n
    return [a for a in fetch_trace.answers(c.log) if a.records]


def test_answers_are_filled_to_the_partition_limit() -> None:
    # 20 batches of 300 records of 100 B (~33 KiB each): 7.x batches fit one answer
    batches = [build_batch([(T0, None, b"v" * 100) for _ in range(300)])
               for i in range(20)]
    size = sum(len(b) for b in batches)
    with EmbeddedBroker(HTTP) as eb:
        _fill(eb, "filled", batches)
        before = fetch_trace.fetch_metrics(eb.http_url)
        got = _read(eb, "filled", 6000)
        after = fetch_trace.fetch_metrics(eb.http_url)
    assert sum(a.records for a in got) == 6000
    *full, last = got
    assert len(full) >= size // LIMIT
    for a in full:  # whole batches, then the next one cut: the answer is the limit
        assert LIMIT < a.size <= LIMIT + HEAD
    assert last.size <= LIMIT + HEAD
    fetches = after["totaltimems_count"] - before["totaltimems_count"]
    assert fetches >= len(got)  # the broker saw them (and the long polls at the end)


def test_a_first_batch_over_the_limit_comes_whole() -> None:
    big = build_batch([(T0, None, b"w" * 100) for _ in range(3000)])  # ~330 KiB
    assert len(big) > LIMIT
    with EmbeddedBroker() as eb:
        _fill(eb, "whole", [big])
        (answer,) = _read(eb, "whole", 3000)
    assert len(big) < answer.size <= len(big) + HEAD
    assert answer.records == 3000
