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


def test_a_port_taken_before_weed_binds_it_is_retried_on_fresh_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ports are picked free, then handed to weed: another process (another test's
    ephemeral port) can take one in between. weed then exits ("Port allocation failed") and
    the server starts again on fresh ports."""
    try:
        find_weed()
    except SeaweedFSUnavailable as e:
        require_capability("seaweedfs", False, str(e))
    import socket

    from tidelog.testing import seaweedfs

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken = int(held.getsockname()[1])
    real = seaweedfs._free_ports
    picks: list[list[int]] = []

    def first_pick_taken(count: int) -> list[int]:
        ports = real(count)
        if not picks:
            ports[2] = taken  # the volume server's port, as in the failure seen
        picks.append(ports)
        return ports

    monkeypatch.setattr(seaweedfs, "_free_ports", first_pick_taken)
    try:
        server = SeaweedFS().start()
    finally:
        held.close()
    try:
        assert len(picks) == 2 and taken not in picks[1]
        assert server.create_bucket("after-retry").name == "after-retry"
    finally:
        server.stop()
