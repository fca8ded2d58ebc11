"""Path mode on a tiered-storage bucket (``path=s3://bucket/prefix``), on a real S3 server
(SeaweedFS) and a real SparkSession: segments written by a real Log (several segments,
every codec, headers, a transaction aborted and one committed at a time), copied through
the RemoteStorageManager, read back and compared with path mode over the same log dir."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from tiered_support import closed_segments, segment_data, upload, write_log

from tidelog.spark.options import OptionError
from tidelog.spark.remote_backend import RemoteBackend, RemoteSpec
from tidelog.spark.remote_options import remote_configs
from tidelog.storage.remote.factory import create_remote_storage_manager
from tidelog.storage.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from tidelog.storage.remote.rsm import RemoteStorageManager
from tidelog.testing.seaweedfs import S3Bucket
from tidelog.util.topic_partition import TopicPartition

pytestmark = pytest.mark.spark

PREFIX = "tiered/"
COLS = "topic, partition, offset, key, value, unix_millis(timestamp) AS ts, timestampType, headers"
COMMITTED = {"kafka.isolation.level": "read_committed"}


@pytest.fixture
def rsm(s3_bucket: S3Bucket) -> Any:
    manager = create_remote_storage_manager({**s3_bucket.rsm_configs, "rsm.config.key.prefix": PREFIX})
    assert isinstance(manager, RemoteStorageManager)
    yield manager
    manager.close()


def bucket_options(bucket: S3Bucket, *, s3a: bool = False) -> dict[str, str]:
    """The credential options of a read: the broker's own rsm.config.* names, or S3A's."""
    c = bucket.rsm_configs
    if s3a:
        return {"fs.s3a.endpoint": c["rsm.config.storage.s3.endpoint.url"],
                "fs.s3a.endpoint.region": c["rsm.config.storage.s3.region"],
                "fs.s3a.path.style.access": "true",
                "fs.s3a.access.key": c["rsm.config.storage.aws.access.key.id"],
                "fs.s3a.secret.key": c["rsm.config.storage.aws.secret.access.key"]}
    return {k: v for k, v in c.items() if k.split(".")[-2:] != ["bucket", "name"]
            and not k.endswith("backend.class")}


def load(spark: Any, path: str, **options: str) -> Any:
    reader = spark.read.format("tidelog").option("path", path).option("includeHeaders", "true")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader


def rows(df: Any) -> list[tuple]:
    return [tuple(r) for r in df.selectExpr(*COLS.split(", ")).orderBy("partition", "offset").collect()]


def _topic(tmp_path: Path, rsm: RemoteStorageManager, topic: str, partitions: int = 2) -> dict[int, int]:
    """Write ``partitions`` partition dirs under tmp_path/logs and copy their closed
    segments; returns each partition's remote end offset."""
    tid = uuid.uuid4()
    ends = {}
    for p in range(partitions):
        d = tmp_path / "logs" / f"{topic}-{p}"
        write_log(d, batches=30 + 6 * p)
        upload(rsm, d, TopicIdPartition(tid, topic, p))
        ends[p] = closed_segments(d)[-1][1]
    return ends


def test_bucket_reads_the_rows_of_local_path_mode(spark: Any, tmp_path: Path, s3_bucket: S3Bucket,
                                                 rsm: RemoteStorageManager) -> None:
    ends = _topic(tmp_path, rsm, "orders")
    url = f"s3://{s3_bucket.name}/{PREFIX}"
    ending = json.dumps({"orders": {str(p): e for p, e in ends.items()}})
    local = rows(load(spark, str(tmp_path / "logs"), subscribe="orders", endingOffsets=ending).load())
    got = rows(load(spark, url, subscribe="orders", **bucket_options(s3_bucket)).load())
    assert len(got) == len(local) > 200
    assert got == local
    assert {r[5] for r in got} and all(r[2] < ends[r[1]] for r in got)
    # a range in the middle: seeks with the .index objects, S3A's option names
    mid = load(spark, url, subscribe="orders", startingOffsets='{"orders": {"0": 37, "1": 5}}',
               endingOffsets='{"orders": {"0": 101, "1": 64}}', **bucket_options(s3_bucket, s3a=True))
    assert rows(mid.load()) == [r for r in local if (r[1] == 0 and 37 <= r[2] < 101) or (r[1] == 1 and 5 <= r[2] < 64)]


def test_bucket_read_committed_leaves_out_aborted_and_open_transactions(
        spark: Any, tmp_path: Path, s3_bucket: S3Bucket, rsm: RemoteStorageManager) -> None:
    _topic(tmp_path, rsm, "payments", partitions=1)
    url = f"s3://{s3_bucket.name}/{PREFIX}"
    backend = RemoteBackend(RemoteSpec(remote_configs((url,), bucket_options(s3_bucket))), read_committed=True)
    try:
        stable = backend.latest([TopicPartition("payments", 0)])[TopicPartition("payments", 0)]
        every = backend.planned([TopicPartition("payments", 0)]).plans
    finally:
        backend.close()
    assert every is not None
    plan = every[0][1]
    assert plan.end is not None and stable <= plan.end
    got = rows(load(spark, url, subscribe="payments", **bucket_options(s3_bucket), **COMMITTED).load())
    local = rows(load(spark, str(tmp_path / "logs"), subscribe="payments",
                      endingOffsets=json.dumps({"payments": {"0": stable}}), **COMMITTED).load())
    uncommitted = rows(load(spark, url, subscribe="payments", **bucket_options(s3_bucket)).load())
    assert got == local
    assert len(got) < len([r for r in uncommitted if r[2] < stable])  # aborted data left out
    values = {r[4] for r in got}
    # batch i % 6 == 2 is producer 7's, aborted; i % 6 == 4 producer 8's, committed
    assert not any(v.startswith(f"value-{i * 4}-".encode()) for v in values for i in range(2, 40, 6))
    assert any(v.startswith(f"value-{4 * 4}-".encode()) for v in values)


def _copy_as(rsm: RemoteStorageManager, directory: Path, tip: TopicIdPartition, base: int, next_base: int,
             segment_id: uuid.UUID, suffixes: set[str]) -> None:
    """Objects of one more copy of a segment (a re-upload by a new leader, a cut upload)."""
    data = segment_data(directory, base, next_base)
    md = RemoteLogSegmentMetadata(RemoteLogSegmentId(tip, segment_id), base, next_base - 1, 0, 2, 0, {0: base},
                                  data.log_segment.stat().st_size)
    files = {"log": data.log_segment, "index": data.offset_index, "timeindex": data.time_index,
             "snapshot": data.producer_snapshot_index}
    for suffix in suffixes:
        rsm.storage.upload(rsm.keys.key(md, suffix), files[suffix])


def test_overlapping_copies_are_read_once(spark: Any, tmp_path: Path, s3_bucket: S3Bucket,
                                          rsm: RemoteStorageManager) -> None:
    d = tmp_path / "logs" / "events-0"
    write_log(d, batches=36)
    tip = TopicIdPartition(uuid.uuid4(), "events", 0)
    segs = closed_segments(d)
    upload(rsm, d, tip)
    (b1, n1), (b2, n2) = segs[1], segs[2]
    _copy_as(rsm, d, tip, b1, n1, uuid.uuid4(), {"log", "index", "timeindex", "snapshot"})  # a re-upload
    _copy_as(rsm, d, tip, b2, n2, uuid.uuid4(), {"index", "timeindex"})  # cut: no .log
    _copy_as(rsm, d, tip, b2, n2, uuid.UUID(int=0), {"log"})  # partial set, smallest id
    url = f"s3://{s3_bucket.name}/{PREFIX}"
    end = segs[-1][1]
    got = rows(load(spark, url, subscribe="events", **bucket_options(s3_bucket)).load())
    local = rows(load(spark, str(tmp_path / "logs"), subscribe="events",
                      endingOffsets=json.dumps({"events": {"0": end}})).load())
    offsets = [r[2] for r in got]
    assert len(offsets) == len(set(offsets))
    assert got == local
    backend = RemoteBackend(RemoteSpec(remote_configs((url,), bucket_options(s3_bucket))))
    try:
        spec = backend.planned([TopicPartition("events", 0)])
    finally:
        backend.close()
    assert spec.plans is not None
    slices = spec.plans[0][1].slices
    assert [(s.first, s.last) for s in slices] == [(b, n - 1) for b, n in segs]
    assert all(s.has_snapshot and s.has_offset_index for s in slices)  # complete copies chosen


def test_missing_or_wrong_credentials_is_one_clear_error(spark: Any, s3_bucket: S3Bucket,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)
    url = f"s3://{s3_bucket.name}/{PREFIX}"
    options = bucket_options(s3_bucket)
    del options["rsm.config.storage.aws.secret.access.key"]
    with pytest.raises(OptionError, match=r"rsm\.config\.storage\.aws\.secret\.access\.key"):
        remote_configs((url,), options)
    with pytest.raises(Exception) as info:
        load(spark, url, subscribe="x", **options).load().collect()
    assert "needs S3 credentials: set option(s) rsm.config.storage.aws.secret.access.key" in str(info.value)
    options["rsm.config.storage.aws.secret.access.key"] = "wrong"
    with pytest.raises(Exception) as info:
        load(spark, url, subscribe="x", **options).load().collect()
    assert "access denied" in str(info.value) and s3_bucket.name in str(info.value)


def test_stream_reader_on_a_bucket_sees_new_segments(tmp_path: Path, s3_bucket: S3Bucket,
                                                     rsm: RemoteStorageManager) -> None:
    """The stream reader's own calls (as Spark makes them, without a session): offsets from
    the bucket, each trigger listing it again, input partitions carrying their own plan."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from tidelog.spark.options import parse_read_options
    from tidelog.spark.source import TidelogPartition, TidelogStreamReader

    d = tmp_path / "logs" / "clicks-0"
    write_log(d, batches=20)
    tip = TopicIdPartition(uuid.uuid4(), "clicks", 0)
    first = closed_segments(d)
    upload(rsm, d, tip, first[:1])
    url = f"s3://{s3_bucket.name}/{PREFIX}"
    opts = parse_read_options({"path": url, "subscribe": "clicks", "startingOffsets": "earliest",
                               **bucket_options(s3_bucket)}, streaming=True)
    reader = TidelogStreamReader(opts)
    try:
        start = reader.initialOffset()
        assert start == {"clicks": {"0": 0}}
        end = reader.latestOffset(start, ReadAllAvailable())
        assert end == {"clicks": {"0": first[0][1]}}
        upload(rsm, d, tip, first[1:])  # more segments copied: the next trigger sees them
        end2 = reader.latestOffset(end, ReadAllAvailable())
        assert end2 == {"clicks": {"0": first[-1][1]}}
        [part] = reader.partitions(end, end2)
        assert isinstance(part, TidelogPartition) and part.backend.remote is not None
        assert part.backend.remote.plans is not None and len(part.backend.remote.plans) == 1
        got = [o for b in reader.read(part) for o in b.column("offset").to_pylist()]
    finally:
        reader.stop()
    assert got and got[0] >= first[0][1] and got[-1] < first[-1][1] and got == sorted(set(got))
