"""S3 as object storage: Aiven's ``S3Storage``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


class S3Storage:
    """:class:`~tidelog.storage.remote.object_storage.ObjectStorage` in one S3 bucket.

    The constructor checks the bucket (and the credentials) and raises one
    :class:`~tidelog.storage.remote.storage_manager.RemoteStorageError` naming endpoint and
    bucket when they do not work."""

    def __init__(self, *, bucket: str, endpoint_url: str | None = None,
                 region: str | None = None, path_style_access: bool = False,
                 access_key_id: str | None = None, secret_access_key: str | None = None) -> None:
        self.bucket = bucket
        self.endpoint_url = endpoint_url
        raise NotImplementedError

    def upload(self, key: str, data: Path | bytes) -> int:
        raise NotImplementedError

    def fetch(self, key: str, byte_range: tuple[int, int | None] | None = None) -> bytes:
        raise NotImplementedError

    def delete(self, keys: Iterable[str]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError
