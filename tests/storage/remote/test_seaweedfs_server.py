"""The SeaweedFS test server: S3 with the configured credentials only, gone after stop."""

from __future__ import annotations

import os

import boto3
import pytest
from botocore.exceptions import ClientError

from tidelog.testing.capability import require_capability
from tidelog.testing.seaweedfs import SeaweedFS, SeaweedFSUnavailable, find_weed


def test_start_serve_and_stop() -> None:
    try:
        find_weed()
    except SeaweedFSUnavailable as e:
        require_capability("seaweedfs", False, str(e))
    server = SeaweedFS().start()
    try:
        bucket = server.create_bucket("fixture-check")
        client = server.client()
        client.put_object(Bucket=bucket.name, Key="a/b.log", Body=b"0123456789")
        got = client.get_object(Bucket=bucket.name, Key="a/b.log", Range="bytes=2-4")
        assert got["Body"].read() == b"234"
        stranger = boto3.client("s3", endpoint_url=server.endpoint_url, region_name=server.region,
                                aws_access_key_id="nobody", aws_secret_access_key="nothing")
        with pytest.raises(ClientError) as e:
            stranger.get_object(Bucket=bucket.name, Key="a/b.log")
        assert e.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert server.process is not None
        pid = server.process.pid
        directory = server.directory
        stray = server._stray_socket
    finally:
        server.stop()
    assert not os.path.exists(f"/proc/{pid}")
    assert directory is not None and not directory.exists()
    assert stray is not None and not stray.exists()
