"""S3 as object storage: Aiven's ``S3Storage``, on boto3.

The client was chosen by measurement (``bench/s3_clients.py``: PUT then GET of 1 MiB and
64 MiB objects against SeaweedFS on 127.0.0.1, 5 rounds interleaved; MiB/s median
[min .. max], on a shared 2-core machine at load average ~11):

==============  ======================  ======================
operation       boto3 1.44              obstore 0.12
==============  ======================  ======================
PUT 1 MiB       21.8 [3.6 .. 26.3]      30.7 [9.5 .. 48.4]
GET 1 MiB       55.5 [34.3 .. 121.9]    85.8 [52.7 .. 180.8]
PUT 64 MiB      29.5 [12.5 .. 52.4]     32.3 [18.2 .. 42.4]
GET 64 MiB      264.1 [90.3 .. 290.8]   186.3 [95.6 .. 246.8]
==============  ======================  ======================

Every range overlaps the other client's: the server, not the client, sets the pace (PUTs
are bound by SeaweedFS's ~30 MiB/s write path here). With no measured winner, boto3: the
field's reference client, blocking calls that fit the remote reader's threads (obstore's
sync calls give no advantage there), botocore's standard retry mode for 5xx and throttling,
and it is what moto's fault-injecting server is built to answer. Each object is one PUT (a segment is at most
``segment.bytes``, 1 GiB by default, well under S3's 5 GiB single-PUT limit, so no multipart
upload) and each fetch one GET with a ``Range`` header.

Errors: a missing key is ``RemoteResourceNotFoundError``; everything else the server or the
network does (5xx after botocore's retries, timeouts, refused connections, 403) is a
``RemoteStorageError`` naming endpoint, bucket and key, which callers treat as retriable.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from .storage_manager import RemoteResourceNotFoundError, RemoteStorageError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
else:
    S3Client = object

_NOT_FOUND = frozenset({"NoSuchKey", "404", "NotFound"})
_DELETE_BATCH = 1000  # S3's DeleteObjects limit


def _error_code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def _status(e: ClientError) -> int:
    return int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


class S3Storage:
    """:class:`~tidelog.storage.remote.object_storage.ObjectStorage` in one S3 bucket.

    The constructor checks the bucket (and the credentials) and raises one
    :class:`~tidelog.storage.remote.storage_manager.RemoteStorageError` naming endpoint and
    bucket when they do not work."""

    def __init__(self, *, bucket: str, endpoint_url: str | None = None,
                 region: str | None = None, path_style_access: bool = False,
                 access_key_id: str | None = None, secret_access_key: str | None = None,
                 max_attempts: int = 3, connect_timeout: float = 5.0,
                 read_timeout: float = 30.0) -> None:
        self.bucket = bucket
        self.endpoint_url = endpoint_url
        config = Config(
            s3={"addressing_style": "path" if path_style_access else "auto"},
            retries={"mode": "standard", "max_attempts": max_attempts},
            connect_timeout=connect_timeout, read_timeout=read_timeout,
            max_pool_connections=32)
        self.client: S3Client = boto3.session.Session().client(
            "s3", endpoint_url=endpoint_url, region_name=region,
            aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key,
            config=config)
        self.check_bucket()

    @property
    def where(self) -> str:
        return f"bucket {self.bucket!r} at {self.endpoint_url or 'AWS S3'}"

    def check_bucket(self) -> None:
        """HEAD the bucket: one clear error for a missing bucket, refused credentials or an
        endpoint that does not answer."""
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError as e:
            status = _status(e)
            if status == 404:
                raise RemoteStorageError(f"S3 {self.where}: the bucket does not exist") from e
            if status in (401, 403):
                raise RemoteStorageError(
                    f"S3 {self.where}: access denied (HTTP {status}): check "
                    "rsm.config.storage.aws.access.key.id/secret.access.key") from e
            raise RemoteStorageError(f"S3 {self.where}: HEAD bucket failed: {e}") from e
        except BotoCoreError as e:
            raise RemoteStorageError(f"S3 {self.where}: unreachable: {e}") from e

    def _failed(self, what: str, key: str, e: Exception) -> RemoteStorageError:
        return RemoteStorageError(f"S3 {self.where}: {what} {key!r} failed: {e}")

    def upload(self, key: str, data: Path | bytes) -> int:
        try:
            if isinstance(data, bytes):
                self.client.put_object(Bucket=self.bucket, Key=key, Body=data)
                return len(data)
            with open(data, "rb") as f:
                size = Path(data).stat().st_size
                self.client.put_object(Bucket=self.bucket, Key=key, Body=f, ContentLength=size)
            return size
        except (ClientError, BotoCoreError) as e:
            raise self._failed("PUT", key, e) from e

    def fetch(self, key: str, byte_range: tuple[int, int | None] | None = None) -> bytes:
        kwargs = {}
        if byte_range is not None:
            first, last = byte_range
            if last is not None and last < first:
                return b""
            kwargs["Range"] = f"bytes={first}-{'' if last is None else last}"
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=key, **kwargs)
            return bytes(response["Body"].read())
        except ClientError as e:
            if _error_code(e) in _NOT_FOUND or _status(e) == 404:
                raise RemoteResourceNotFoundError(f"S3 {self.where}: no object {key!r}") from e
            if _error_code(e) == "InvalidRange" or _status(e) == 416:
                return b""
            raise self._failed("GET", key, e) from e
        except BotoCoreError as e:
            raise self._failed("GET", key, e) from e

    def delete(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        for i in range(0, len(keys), _DELETE_BATCH):
            batch = [{"Key": k} for k in keys[i:i + _DELETE_BATCH]]
            try:
                response = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
            except (ClientError, BotoCoreError) as e:
                raise self._failed("DELETE", batch[0]["Key"], e) from e
            errors = [err for err in response.get("Errors", [])
                      if err.get("Code") not in _NOT_FOUND]
            if errors:
                raise RemoteStorageError(f"S3 {self.where}: DELETE failed: {errors[:3]}")

    def close(self) -> None:
        self.client.close()
