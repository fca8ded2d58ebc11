"""Path mode on a bucket next to a broker: the local tail above the remote segments read
from a real broker (an EmbeddedBroker fed by confluent-kafka, its closed segments copied to
SeaweedFS) equals broker mode; and ``remoteLogMetadata=true`` takes the copies
``__remote_log_metadata`` says are COPY_SEGMENT_FINISHED over any other copy in the bucket."""

from __future__ import annotations

import contextlib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from test_read_bucket import PREFIX, bucket_options, load, rows
from tiered_support import closed_segments, upload, write_log

from tidelog.client.kafka_client import KafkaClient
from tidelog.storage.remote.factory import create_remote_storage_manager
from tidelog.storage.remote.metadata import (
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    TopicIdPartition,
)
from tidelog.storage.remote.metadata_serde import serialize
from tidelog.storage.remote.rsm import RemoteStorageManager
from tidelog.testing import EmbeddedBroker
from tidelog.testing.seaweedfs import S3Bucket

pytestmark = pytest.mark.spark

COMMITTED = {"kafka.isolation.level": "read_committed"}


def _produce(bootstrap: str, topic: str) -> None:
    """Plain records with keys and headers (lz4), then a transaction aborted and one
    committed, then more plain records: several 4 KiB segments per partition."""
    plain = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5, "batch.size": 1500})
    for i in range(300):
        plain.produce(topic, value=f"v{i}-{uuid.uuid4().hex * 3}".encode(), key=f"k{i % 7}".encode() if i % 3 else None,
                      partition=i % 2, headers=[("n", str(i).encode())] if i % 2 else None)
    plain.flush(30)
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"t-{uuid.uuid4().hex[:6]}",
                    "compression.type": "zstd"})
    txn.init_transactions(30)
    for commit in (False, True):
        txn.begin_transaction()
        for i in range(40):
            txn.produce(topic, value=f"{'committed' if commit else 'aborted'}-{i}-{uuid.uuid4().hex}".encode(), partition=i % 2)
        txn.flush(30)  # an abort drops what is not sent yet: send it first
        if commit:
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)
    for i in range(300, 500):
        plain.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    plain.flush(30)


def test_bucket_plus_broker_tail_equals_broker_mode(spark: Any, tmp_path: Path, s3_bucket: S3Bucket) -> None:
    topic = "tiered"
    rsm = create_remote_storage_manager({**s3_bucket.rsm_configs, "rsm.config.key.prefix": PREFIX})
    assert isinstance(rsm, RemoteStorageManager)
    with EmbeddedBroker(log_dir=tmp_path / "broker") as broker:
        bootstrap = broker.bootstrap_servers
        with KafkaClient(bootstrap) as client:
            client.create_topics({topic: 2}, configs={topic: {"segment.bytes": "4096"}})
        _produce(bootstrap, topic)
        tid = uuid.uuid4()
        remote_end = {}
        for p in range(2):
            d = broker.log_dir / f"{topic}-{p}"
            segs = closed_segments(d)
            assert len(segs) >= 2, segs
            upload(rsm, d, TopicIdPartition(tid, topic, p))
            remote_end[p] = segs[-1][1]
        url = f"s3://{s3_bucket.name}/{PREFIX}"
        creds = bucket_options(s3_bucket)
        for extra in ({}, COMMITTED):
            by_broker = rows(spark.read.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
                             .option("subscribe", topic).option("includeHeaders", "true").options(**extra).load())
            both = rows(load(spark, url, subscribe=topic, **{"kafka.bootstrap.servers": bootstrap},
                             **creds, **extra).load())
            assert len(by_broker) > 400
            assert both == by_broker
        remote_only = rows(load(spark, url, subscribe=topic, **creds).load())
        by_broker = rows(spark.read.format("tidelog").option("kafka.bootstrap.servers", bootstrap)
                         .option("subscribe", topic).option("includeHeaders", "true").load())
        assert remote_only == [r for r in by_broker if r[2] < remote_end[r[1]]]
        assert any(r[4].startswith(b"aborted") for r in remote_only + by_broker)
    rsm.close()


def _send_metadata(bootstrap: str, records: list[bytes]) -> None:
    with KafkaClient(bootstrap) as client, contextlib.suppress(Exception):
        client.create_topics({"__remote_log_metadata": 1})
    # idempotent: a retried batch cannot land after a later one (a FINISHED update before
    # its segment's record would be ignored, as Kafka's metadata cache ignores it)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for value in records:
        producer.produce("__remote_log_metadata", value=value, partition=0)
    assert producer.flush(30) == 0


def test_remote_log_metadata_picks_the_finished_copies(spark: Any, tmp_path: Path, s3_bucket: S3Bucket,
                                                       bootstrap: str) -> None:
    topic = f"m{uuid.uuid4().hex[:8]}"
    rsm = create_remote_storage_manager({**s3_bucket.rsm_configs, "rsm.config.key.prefix": PREFIX})
    assert isinstance(rsm, RemoteStorageManager)
    d = tmp_path / "logs" / f"{topic}-0"
    write_log(d, batches=30)
    other = tmp_path / "diverged" / f"{topic}-0"
    write_log(other, batches=30, roll_every=8, tag="diverged")
    tip = TopicIdPartition(uuid.uuid4(), topic, 0)
    good = upload(rsm, d, tip)
    # a copy of the first segment from a diverged replica, started and never finished: it
    # reaches a higher end offset than the finished copy at the same base offset, so without
    # the metadata the bucket's own rule takes it whatever the (random) segment ids are
    first, diverged = closed_segments(d)[0], closed_segments(other)[0]
    assert first[0] == diverged[0] and diverged[1] > first[1]
    bad = upload(rsm, other, tip, [diverged])
    records = [serialize(u.metadata) for u in good + bad]
    records += [serialize(RemoteLogSegmentMetadataUpdate(u.metadata.remote_log_segment_id, 1, None,
                                                         RemoteLogSegmentState.COPY_SEGMENT_FINISHED, 1))
                for u in good]
    _send_metadata(bootstrap, records)
    url = f"s3://{s3_bucket.name}/{PREFIX}"
    creds = bucket_options(s3_bucket)
    end = closed_segments(d)[-1][1]
    local = rows(load(spark, str(tmp_path / "logs"), subscribe=topic,
                      endingOffsets=json.dumps({topic: {"0": end}})).load())
    by_rule = rows(load(spark, url, subscribe=topic, **creds).load())
    assert any(r[4].startswith(b"diverged") for r in by_rule)
    by_metadata = rows(load(spark, url, subscribe=topic, remoteLogMetadata="true",
                            **{"kafka.bootstrap.servers": bootstrap}, **creds).load())
    assert by_metadata == local
    rsm.close()
