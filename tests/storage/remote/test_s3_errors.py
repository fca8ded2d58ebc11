"""S3 that does not work: wrong credentials, a missing bucket, no server (one clear error
naming endpoint and bucket, at configure time); 5xx and slow answers (moto's server with
injected faults): a retriable RemoteStorageError after botocore's retries, never a crash."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.storage.remote.factory import create_remote_storage_manager
from tidelog.storage.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from tidelog.storage.remote.rsm import RemoteStorageManager
from tidelog.storage.remote.storage_manager import (
    LogSegmentData,
    RemoteResourceNotFoundError,
    RemoteStorageError,
)
from tidelog.testing.s3_faults import FaultyS3Server
from tidelog.testing.seaweedfs import S3Bucket, SeaweedFS

TIP = TopicIdPartition(uuid.UUID(int=7), "orders", 0)
METADATA = RemoteLogSegmentMetadata(RemoteLogSegmentId(TIP, uuid.UUID(int=8)), 0, 9, 0, 1, 0,
                                    {0: 0}, 100)


def test_wrong_credentials_fail_at_configure(s3_bucket: S3Bucket) -> None:
    configs = dict(s3_bucket.rsm_configs)
    configs["rsm.config.storage.aws.secret.access.key"] = "not-the-secret"
    with pytest.raises(RemoteStorageError) as e:
        create_remote_storage_manager(configs)
    message = str(e.value)
    assert s3_bucket.endpoint_url in message and s3_bucket.name in message
    assert "access denied" in message


def test_missing_bucket_fails_at_configure(s3_server: SeaweedFS) -> None:
    with pytest.raises(RemoteStorageError, match="the bucket does not exist") as e:
        create_remote_storage_manager(s3_server.rsm_configs("no-such-bucket"))
    assert s3_server.endpoint_url in str(e.value) and "no-such-bucket" in str(e.value)


def test_no_server_fails_at_configure() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    configs = FaultyS3Server().rsm_configs("tiered")
    configs["rsm.config.storage.s3.endpoint.url"] = f"http://127.0.0.1:{port}"
    configs["rsm.config.storage.s3.api.call.attempt.timeout"] = "1000"
    with pytest.raises(RemoteStorageError, match="unreachable") as e:
        create_remote_storage_manager(configs)
    assert f"127.0.0.1:{port}" in str(e.value) and "'tiered'" in str(e.value)


@pytest.mark.parametrize(("configs", "message"), [
    ({}, "rsm.config.storage.backend.class must be set"),
    ({"rsm.config.storage.backend.class": "com.example.Nope"}, "is not one of"),
    ({"rsm.config.storage.backend.class":
      "io.aiven.kafka.tieredstorage.storage.s3.S3Storage"}, "s3.bucket.name must be set"),
])
def test_config_errors(configs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        create_remote_storage_manager(configs)


@pytest.fixture
def moto_s3() -> Iterator[FaultyS3Server]:
    with FaultyS3Server() as server:
        server.client().create_bucket(Bucket="tiered")
        yield server


def _rsm(server: FaultyS3Server) -> RemoteStorageManager:
    configs = server.rsm_configs("tiered")
    configs["rsm.config.storage.s3.api.call.attempt.timeout"] = "500"
    rsm = create_remote_storage_manager(configs)
    assert isinstance(rsm, RemoteStorageManager)
    return rsm


def _data(tmp_path: Path) -> LogSegmentData:
    paths = []
    for name in ("0.log", "0.index", "0.timeindex", "10.snapshot"):
        (tmp_path / name).write_bytes(name.encode() * 10)
        paths.append(tmp_path / name)
    return LogSegmentData(paths[0], paths[1], paths[2], None, paths[3], b"0\n1\n0 0\n")


@pytest.mark.parametrize("status", [500, 503])
def test_5xx_is_a_retriable_error_after_retries(moto_s3: FaultyS3Server, tmp_path: Path,
                                                status: int) -> None:
    rsm = _rsm(moto_s3)
    rsm.copy_log_segment_data(METADATA, _data(tmp_path))
    moto_s3.faults.fail(status)
    before = moto_s3.faults.requests
    with pytest.raises(RemoteStorageError) as e:
        rsm.fetch_log_segment(METADATA, 0)
    assert not isinstance(e.value, RemoteResourceNotFoundError)
    assert "'tiered'" in str(e.value) and moto_s3.endpoint_url in str(e.value)
    assert moto_s3.faults.requests - before == 3  # botocore's standard mode: 3 attempts
    with pytest.raises(RemoteStorageError):
        rsm.copy_log_segment_data(METADATA, _data(tmp_path))
    moto_s3.faults.clear()
    assert rsm.fetch_log_segment(METADATA, 0, 4) == b"0.log"  # the same call works again
    rsm.close()


def test_transient_5xx_is_retried_away(moto_s3: FaultyS3Server, tmp_path: Path) -> None:
    rsm = _rsm(moto_s3)
    moto_s3.faults.fail(503, times=2)
    before = moto_s3.faults.requests
    rsm.copy_log_segment_data(METADATA, _data(tmp_path))
    assert moto_s3.faults.requests - before == 5 + 2  # five objects, two answers were 503
    assert rsm.fetch_log_segment(METADATA, 0) == b"0.log" * 10
    rsm.close()


def test_slow_answers_time_out_as_retriable_errors(moto_s3: FaultyS3Server,
                                                   tmp_path: Path) -> None:
    rsm = _rsm(moto_s3)
    rsm.copy_log_segment_data(METADATA, _data(tmp_path))
    moto_s3.faults.delay(1.5)  # each attempt's timeout is 0.5 s
    with pytest.raises(RemoteStorageError, match=r"timeout|timed out"):
        rsm.fetch_log_segment(METADATA, 0)
    moto_s3.faults.clear()
    assert rsm.fetch_log_segment(METADATA, 0, 4) == b"0.log"
    rsm.close()
