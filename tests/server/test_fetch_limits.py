"""Fetch limits across partitions: a later partition whose next batch does not fit its share
gets no bytes (never a cut batch), and gets the whole batch once it is read first."""

from __future__ import annotations

import time

from tidelog.client.kafka_client import KafkaClient, TopicPartition
from tidelog.records import build_batch, iter_batches
from tidelog.testing.embedded import EmbeddedBroker

T0 = int(time.time() * 1000)


def test_later_partition_never_gets_a_partial_batch() -> None:
    with EmbeddedBroker() as b, KafkaClient(b.bootstrap_servers) as client:
        client.create_topics({"limits": 2})
        small, big = TopicPartition("limits", 0), TopicPartition("limits", 1)
        big_batch = build_batch([(T0, None, b"x" * 30) for _ in range(100)])
        assert len(big_batch) > 2048
        client.produce(client.leader_for(small), {small: build_batch([(T0, None, b"s")])})
        client.produce(client.leader_for(big), {big: big_batch})

        got = client.fetch({small: 0, big: 0}, partition_max_bytes=2048)
        assert [bt.base_offset for bt in iter_batches(got[small].records)] == [0]
        assert got[big].records == b""  # not the first 2048 bytes of the batch
        assert got[big].high_watermark == 100

        alone = client.fetch({big: 0}, partition_max_bytes=2048)
        (whole,) = list(iter_batches(alone[big].records))
        assert whole.records_count == 100  # first partition: one whole batch despite the limit
