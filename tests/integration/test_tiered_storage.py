"""Tiered storage in a real ``tidelog serve`` process, fed by a real client (librdkafka):

- a directory as remote storage: closed segments copied byte for byte (their .index and
  .timeindex too), local segments deleted only once copied;
- SeaweedFS (a real S3 server) behind a TCP proxy that stops forwarding mid-upload: the
  broker is killed with SIGKILL during the upload; the restarted broker never lists the cut
  upload as finished (``__remote_log_metadata`` read back with kafka-python), deletes its
  objects and copies the segment again under a new id;
- the same proxy holding the object deletes of retention: the broker killed after
  DELETE_SEGMENT_STARTED, before the deletes; the restarted broker deletes the objects and
  records DELETE_SEGMENT_FINISHED.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from s3_proxy import StallingProxy
from serve_process import ServeProcess

from tidelog.storage.remote.metadata import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    uuid_to_str,
)
from tidelog.storage.remote.metadata_serde import deserialize

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "tiered"
FS_BACKEND = "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage"
TIERED = {
    "remote.log.storage.system.enable": "true",
    "remote.log.storage.manager.class.name": "io.aiven.kafka.tieredstorage.RemoteStorageManager",
    "remote.log.manager.task.interval.ms": "100",
    "log.retention.check.interval.ms": "100",
    "log.initial.task.delay.ms": "0",
    "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
    # the replication factor left at Kafka's default (3): one broker makes it 1
}


def _wait(what: str, ok: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _create_topic(bootstrap: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, 1, 1, config={
        "remote.storage.enable": "true", "segment.bytes": "4096", "retention.ms": "-1",
        "local.retention.bytes": "1", "index.interval.bytes": "512", **configs})
    admin.create_topics([topic])[TOPIC].result(30)


def _produce(bootstrap: str, n: int, start: int = 0) -> list[int]:
    offsets: list[int] = []
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})

    def done(err: object, msg: object) -> None:
        assert err is None, err
        offsets.append(msg.offset())  # type: ignore[attr-defined]

    for i in range(start, start + n):
        producer.produce(TOPIC, key=b"k%d" % i, value=b"%06d" % i + b"v" * 194, callback=done)
        producer.flush(30)  # one batch per record: many small segments
    return offsets


def _read_either(path: Path) -> bytes | None:
    """A segment file, or the same file renamed .deleted by local retention meanwhile."""
    for p in (path, path.with_name(path.name + ".deleted")):
        try:
            return p.read_bytes()
        except FileNotFoundError:
            continue
    return None


def _local_segments(part_dir: Path) -> dict[int, dict[str, bytes]]:
    """Closed segments' .log/.index/.timeindex bytes by base offset."""
    bases = sorted(int(p.name[:20]) for p in part_dir.iterdir()
                   if p.name.endswith((".log", ".log.deleted")))
    out: dict[int, dict[str, bytes]] = {}
    for base in bases[:-1]:  # not the active segment
        files = {s: _read_either(part_dir / f"{base:020d}{s}")
                 for s in (".log", ".index", ".timeindex")}
        out[base] = {s: v for s, v in files.items() if v is not None}
    return out


def _remote_logs_fs(root: Path) -> Callable[[], dict[int, Callable[[str], bytes]]]:
    def listing() -> dict[int, Callable[[str], bytes]]:
        return {int(p.name[:20]): (lambda suffix, p=p: p.with_suffix(suffix).read_bytes())
                for p in root.rglob("*.log")}
    return listing


def _remote_logs_s3(s3: Any, bucket: str) -> Callable[[], dict[int, Callable[[str], bytes]]]:
    def listing() -> dict[int, Callable[[str], bytes]]:
        listed = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
        out: dict[int, Callable[[str], bytes]] = {}
        for key in (o["Key"] for o in listed if o["Key"].endswith(".log")):
            stem = key[:-len(".log")]

            def read(suffix: str, stem: str = stem) -> bytes:
                return bytes(s3.get_object(Bucket=bucket, Key=stem + suffix)["Body"].read())

            out[int(key.rsplit("/", 1)[1][:20])] = read
        return out
    return listing


RemoteLogs = Callable[[], dict[int, Callable[[str], bytes]]]


def _storage(backend: str, tmp_path: Path, request: pytest.FixtureRequest
             ) -> tuple[dict[str, str], RemoteLogs]:
    """The rsm.config.* of a directory or of a bucket on a real S3 server (SeaweedFS)."""
    if backend == "s3":
        server, bucket = request.getfixturevalue("s3_server"), request.getfixturevalue("s3_bucket")
        return dict(bucket.rsm_configs), _remote_logs_s3(server.client(), bucket.name)
    (tmp_path / "remote").mkdir()
    return ({"rsm.config.storage.backend.class": FS_BACKEND,
             "rsm.config.storage.root": str(tmp_path / "remote")},
            _remote_logs_fs(tmp_path / "remote"))


@pytest.mark.parametrize("backend", ["filesystem", "s3"])
def test_segments_are_copied_byte_for_byte_and_deleted_locally_after(
        tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    logs = tmp_path / "logs"
    storage, remote_logs = _storage(backend, tmp_path, request)
    proc = ServeProcess(logs, {**TIERED, **storage}).start()
    try:
        _create_topic(proc.bootstrap_servers)
        offsets = _produce(proc.bootstrap_servers, 120)
        assert sorted(offsets) == list(range(120))
        part = logs / f"{TOPIC}-0"
        local = _local_segments(part)
        assert len(local) >= 5

        def checked_copied_before_deleted() -> bool:
            # deleted ones first: a segment deleted by now was copied before the listing
            gone = {int(p.name[:20]) for p in part.glob("*.log.deleted")}
            copied = remote_logs()
            assert gone <= set(copied), f"deleted locally before copied: {gone - set(copied)}"
            return set(local) <= set(copied) and set(local) <= gone

        _wait("every closed segment copied and then deleted locally",
              checked_copied_before_deleted)
        copied = remote_logs()
        for base, files in local.items():
            assert set(files) == {".log", ".index", ".timeindex"}
            for suffix, data in files.items():
                assert copied[base](suffix) == data, (base, suffix)
    finally:
        rc = proc.stop()
    assert rc == 0, "".join(proc.stderr_lines[-30:])
    errors = [line for line in proc.stderr_lines if " ERROR " in line]
    assert not errors, "".join(errors[:20])
    assert any("__remote_log_metadata gets replication factor 1" in line
               for line in proc.stderr_lines)


def _metadata_events(bootstrap: str) -> list[object]:
    """Every record of __remote_log_metadata, deserialized (kafka-python reads it)."""
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                   enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        deadline = time.monotonic() + 30
        while "__remote_log_metadata" not in consumer.topics():  # metadata not there yet
            assert time.monotonic() < deadline, "no __remote_log_metadata"
            time.sleep(0.2)
        parts = consumer.partitions_for_topic("__remote_log_metadata") or set()
        tps = [kafka.TopicPartition("__remote_log_metadata", p) for p in parts]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        return [deserialize(rec.value) for rec in consumer]
    finally:
        consumer.close()


def _segment_ids(keys: list[str], base: int) -> set[str]:
    prefix = f"{base:020d}-"
    return {k.rsplit("/", 1)[1][21:].split(".", 1)[0] for k in keys
            if k.rsplit("/", 1)[1].startswith(prefix)}


def test_kill_9_mid_upload_never_counts_the_cut_upload(tmp_path: Path, s3_server: object,
                                                       s3_bucket: object) -> None:
    from tidelog.testing.seaweedfs import S3Bucket, SeaweedFS

    assert isinstance(s3_server, SeaweedFS) and isinstance(s3_bucket, S3Bucket)
    proxy = StallingProxy(s3_server.s3_port)
    s3 = s3_server.client()

    def keys() -> list[str]:
        listed = s3.list_objects_v2(Bucket=s3_bucket.name)
        return [o["Key"] for o in listed.get("Contents", [])]

    proxied = {**s3_bucket.rsm_configs,
               "rsm.config.storage.s3.endpoint.url": proxy.endpoint_url}
    logs = tmp_path / "logs"
    proc = ServeProcess(logs, {**TIERED, **proxied}).start()
    try:
        _create_topic(proc.bootstrap_servers)
        proxy.stall_after(1200)  # from now on: one index object's worth, then it hangs
        _produce(proc.bootstrap_servers, 30)  # a few closed segments
        assert proxy.stalled.wait(60), "the upload never started"
        proc.kill()  # SIGKILL in the middle of the upload
    finally:
        proxy.close()
    cut_keys = keys()
    assert not any(k.endswith(".log") for k in cut_keys)  # the .log goes last: not there
    cut_ids = _segment_ids(cut_keys, 0)
    assert len(cut_ids) == 1  # an index object of the cut upload made it before the stall
    direct = ServeProcess(logs, {**TIERED, **s3_bucket.rsm_configs}).start()
    try:
        _wait("segment 0 copied again, the cut upload's objects deleted",
              lambda: (ids := _segment_ids(keys(), 0)) != set() and not ids & cut_ids
              and any(k.endswith(".log") for k in keys()))
        events = _metadata_events(direct.bootstrap_servers)
    finally:
        rc = direct.stop()
    assert rc == 0, "".join(direct.stderr_lines[-30:])
    started = [e for e in events if isinstance(e, RemoteLogSegmentMetadata)]
    updates = [e for e in events if isinstance(e, RemoteLogSegmentMetadataUpdate)]
    first_started = started[0]
    cut = first_started.remote_log_segment_id
    assert uuid_to_str(cut.id) in cut_ids
    cut_states = [u.state for u in updates if u.remote_log_segment_id == cut]
    assert RemoteLogSegmentState.COPY_SEGMENT_FINISHED not in cut_states
    assert cut_states[-2:] == [RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
                               RemoteLogSegmentState.DELETE_SEGMENT_FINISHED]
    finished = [u.remote_log_segment_id for u in updates
                if u.state is RemoteLogSegmentState.COPY_SEGMENT_FINISHED]
    by_id = {m.remote_log_segment_id: m for m in started}
    starts = [by_id[i].start_offset for i in finished]
    assert len(starts) == len(set(starts))  # no segment listed twice as finished
    assert 0 in starts


def _set_topic_config(bootstrap: str, name: str, value: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, TOPIC, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)


def _updates(events: list[object], state: RemoteLogSegmentState) -> list[object]:
    return [e.remote_log_segment_id for e in events
            if isinstance(e, RemoteLogSegmentMetadataUpdate) and e.state is state]


def test_kill_9_between_delete_started_and_the_object_deletes_is_resumed(
        tmp_path: Path, s3_server: object, s3_bucket: object) -> None:
    """Retention deletes a remote segment: DELETE_SEGMENT_STARTED is written, then the
    object deletes hang (the proxy holds them) and the broker is killed with SIGKILL. The
    objects are still there; the restarted broker deletes them and records
    DELETE_SEGMENT_FINISHED (Kafka's retry of DELETE_SEGMENT_STARTED segments)."""
    from tidelog.testing.seaweedfs import S3Bucket, SeaweedFS

    assert isinstance(s3_server, SeaweedFS) and isinstance(s3_bucket, S3Bucket)
    proxy = StallingProxy(s3_server.s3_port)
    s3 = s3_server.client()

    def keys() -> list[str]:
        listed = s3.list_objects_v2(Bucket=s3_bucket.name)
        return [o["Key"] for o in listed.get("Contents", [])]

    proxied = {**s3_bucket.rsm_configs,
               "rsm.config.storage.s3.endpoint.url": proxy.endpoint_url}
    logs = tmp_path / "logs"
    proc = ServeProcess(logs, {**TIERED, **proxied}).start()
    try:
        _create_topic(proc.bootstrap_servers)
        _produce(proc.bootstrap_servers, 80)  # 4 KiB segments: 3 closed ones at least
        part = logs / f"{TOPIC}-0"
        # every closed segment copied (then deleted locally): no copy left to hang below
        _wait("every closed segment copied", lambda: len(list(part.glob("*.log"))) == 1
              and sum(k.endswith(".log") for k in keys()) >= 3)
        proxy.stall_after(0)  # from now on nothing reaches S3
        _set_topic_config(proc.bootstrap_servers, "retention.bytes", "1")
        started: list[object] = []

        def delete_started() -> bool:
            started[:] = _updates(_metadata_events(proc.bootstrap_servers),
                                  RemoteLogSegmentState.DELETE_SEGMENT_STARTED)
            return bool(started)

        _wait("DELETE_SEGMENT_STARTED recorded", delete_started)
        proc.kill()  # SIGKILL between the metadata event and the object deletes
    finally:
        proxy.close()
    assert len(started) == 1  # the first expired segment: its delete hangs
    cut = uuid_to_str(started[0].id)  # type: ignore[attr-defined]
    assert any(cut in k and k.endswith(".log") for k in keys())  # not deleted yet
    direct = ServeProcess(logs, {**TIERED, **s3_bucket.rsm_configs}).start()
    try:
        _wait("the cut deletion resumed", lambda: not any(cut in k for k in keys()))
        _wait("DELETE_SEGMENT_FINISHED recorded", lambda: started[0] in _updates(
            _metadata_events(direct.bootstrap_servers),
            RemoteLogSegmentState.DELETE_SEGMENT_FINISHED))
    finally:
        rc = direct.stop()
    assert rc == 0, "".join(direct.stderr_lines[-30:])
    resumed = [line for line in direct.stderr_lines
               if "deleting dangling remote segment" in line and "DELETE_SEGMENT_STARTED" in line]
    assert len(resumed) == 1, resumed


def _consume_confluent(bootstrap: str, n: int) -> list[tuple[int, bytes]]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "tiered-rd",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < n and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            got.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return got


def _consume_kafka_python(bootstrap: str, n: int) -> list[tuple[int, bytes]]:
    kafka = pytest.importorskip("kafka")
    consumer = kafka.KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id="tiered-kp",
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   consumer_timeout_ms=15000)
    got: list[tuple[int, bytes]] = []
    try:
        for rec in consumer:
            got.append((rec.offset, rec.value))
            if len(got) >= n:
                break
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("backend", ["filesystem", "s3"])
def test_consumers_read_every_record_from_offset_0_after_local_segments_are_gone(
        tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    logs = tmp_path / "logs"
    storage, _ = _storage(backend, tmp_path, request)
    proc = ServeProcess(logs, {**TIERED, **storage}).start()
    try:
        _create_topic(proc.bootstrap_servers)
        offsets = _produce(proc.bootstrap_servers, 120)
        assert sorted(offsets) == list(range(120))
        part = logs / f"{TOPIC}-0"

        def local_start() -> int:
            return min(int(p.name[:20]) for p in part.glob("*.log"))

        _wait("the local log to start well after 0", lambda: local_start() >= 60)
        expected = [(i, b"%06d" % i + b"v" * 194) for i in range(120)]
        for consume in (_consume_confluent, _consume_kafka_python):
            got = consume(proc.bootstrap_servers, 120)
            assert got == expected, consume.__name__  # each once, in order, from remote first
    finally:
        rc = proc.stop()
    assert rc == 0, "".join(proc.stderr_lines[-30:])
    errors = [line for line in proc.stderr_lines if " ERROR " in line]
    assert not errors, "".join(errors[:20])
