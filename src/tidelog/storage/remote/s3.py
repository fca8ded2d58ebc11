"""S3 as object storage: Aiven's ``S3Storage``, on obstore (the Rust ``object_store`` crate).

The client was chosen by measurement (``bench/s3_clients.py``: PUT then GET of 1 MiB and
64 MiB objects against SeaweedFS on 127.0.0.1, rounds interleaved across clients, on a
shared 2-core machine at load average 11-20). MiB/s, median [min .. max], three runs
(5, 7, 5 rounds), boto3 1.44 -> obstore 0.12:

* GET 1 MiB:  55.5 [34 .. 122] -> 85.8 [53 .. 181];  74.7 [16 .. 138] -> 198.2 [111 .. 274];
  15.4 [6 .. 72] -> 52.7 [20 .. 193] (x1.55, x2.65, x3.43)
* PUT 1 MiB:  21.8 [4 .. 26] -> 30.7 [10 .. 48];  26.1 [3 .. 37] -> 38.2 [35 .. 50];
  12.6 [2 .. 49] -> 10.6 [5 .. 24] (x1.41, x1.46, x0.84)
* GET 64 MiB: 264 [90 .. 291] -> 186 [96 .. 247];  78.8 [37 .. 96] -> 83.9 [49 .. 134];
  64.0 [35 .. 101] -> 64.5 [18 .. 122] (x0.71, x1.06, x1.01)
* PUT 64 MiB: 29.5 [13 .. 52] -> 32.3 [18 .. 42];  17.4 [10 .. 25] -> 15.9 [10 .. 26];
  13.8 [11 .. 19] -> 12.9 [11 .. 20] (x1.10, x0.91, x0.93)

Large objects are a tie (the server sets the pace). On 1 MiB GETs obstore led in every run
(botocore's per-request work is Python; object_store's is Rust, mostly off the GIL: with one
thread fetching 1 MiB objects in a loop, a busy main thread kept 0.72-0.88 of its speed at
37-52 GETs/s on obstore, 0.64-0.73 at 18-20 GETs/s on boto3, two rounds each). A remote
Fetch is one ranged GET of at most ``fetch.max.bytes``, a request of that small kind, so
obstore.

Each file is one object: a single PUT up to 5 MiB, a multipart upload above (streamed from
the file, never read whole into memory); an upload cut by a crash leaves no visible object
(S3 shows a multipart upload only once completed; a lifecycle rule reaps abandoned parts).
Each fetch is one GET with a ``Range`` header.

Errors: a missing key is ``RemoteResourceNotFoundError``; everything else the server or the
network does (5xx after the retries, timeouts, refused connections, 403) is a
``RemoteStorageError`` naming endpoint, bucket and key, which callers treat as retriable.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import obstore
from obstore.exceptions import BaseError, PermissionDeniedError, UnauthenticatedError
from obstore.store import S3Store

from .storage_manager import RemoteResourceNotFoundError, RemoteStorageError

_ObstoreErrors = (BaseError, OSError)


_STATUS = re.compile(r"status code: (\d{3})")


def _status(e: BaseException) -> int:
    """The HTTP status object_store's message reports, or 0 (no answer)."""
    m = _STATUS.search(str(e))
    return int(m.group(1)) if m else 0


def _first_line(e: BaseException) -> str:
    return str(e).split("\n", 1)[0]


class S3Storage:
    """:class:`~tidelog.storage.remote.object_storage.ObjectStorage` in one S3 bucket.

    The constructor checks the bucket (and the credentials) and raises one
    :class:`~tidelog.storage.remote.storage_manager.RemoteStorageError` naming endpoint and
    bucket when they do not work. ``max_attempts`` counts the first try: 5xx, throttling
    and broken connections are retried with backoff up to it."""

    def __init__(self, *, bucket: str, endpoint_url: str | None = None,
                 region: str | None = None, path_style_access: bool = False,
                 access_key_id: str | None = None, secret_access_key: str | None = None,
                 max_attempts: int = 3, connect_timeout: float = 5.0,
                 read_timeout: float = 30.0) -> None:
        self.bucket = bucket
        self.endpoint_url = endpoint_url
        options: dict[str, str | bool] = {
            "timeout": f"{int(read_timeout * 1000)}ms",
            "connect_timeout": f"{int(connect_timeout * 1000)}ms",
        }
        if endpoint_url is not None and endpoint_url.startswith("http://"):
            options["allow_http"] = True
        self.store = S3Store(
            bucket, endpoint=endpoint_url, region=region or "us-east-1",
            access_key_id=access_key_id, secret_access_key=secret_access_key,
            virtual_hosted_style_request=not path_style_access,
            client_options=options,  # type: ignore[arg-type]
            retry_config={
                "max_retries": max(0, max_attempts - 1),
                "retry_timeout": datetime.timedelta(seconds=max_attempts * read_timeout),
                "backoff": {"init_backoff": datetime.timedelta(milliseconds=100),
                            "max_backoff": datetime.timedelta(seconds=5), "base": 2},
            })
        self.check_bucket()

    @property
    def where(self) -> str:
        return f"bucket {self.bucket!r} at {self.endpoint_url or 'AWS S3'}"

    def check_bucket(self) -> None:
        """List one key of the bucket: one clear error for a missing bucket, refused
        credentials or an endpoint that does not answer."""
        try:
            obstore.list_with_delimiter(self.store, "tidelog-bucket-check/")
        except _ObstoreErrors as e:
            status = _status(e)
            if isinstance(e, FileNotFoundError) or status == 404:
                raise RemoteStorageError(f"S3 {self.where}: the bucket does not exist") from e
            if isinstance(e, PermissionDeniedError | UnauthenticatedError) or status in (401, 403):
                raise RemoteStorageError(
                    f"S3 {self.where}: access denied (HTTP {status}): check "
                    "rsm.config.storage.aws.access.key.id/secret.access.key") from e
            if status:
                raise RemoteStorageError(f"S3 {self.where}: listing the bucket failed: "
                                         f"{_first_line(e)}") from e
            raise RemoteStorageError(f"S3 {self.where}: unreachable: {_first_line(e)}") from e

    def _failed(self, what: str, key: str, e: BaseException) -> RemoteStorageError:
        return RemoteStorageError(f"S3 {self.where}: {what} {key!r} failed: {_first_line(e)}")

    def upload(self, key: str, data: Path | bytes) -> int:
        try:
            obstore.put(self.store, key, data)
        except _ObstoreErrors as e:
            raise self._failed("PUT", key, e) from e
        return len(data) if isinstance(data, bytes) else Path(data).stat().st_size

    def fetch(self, key: str, byte_range: tuple[int, int | None] | None = None) -> bytes:
        options = {}
        if byte_range is not None:
            first, last = byte_range
            if last is not None and last < first:
                return b""
            options = {"range": {"offset": first} if last is None else (first, last + 1)}
        try:
            return bytes(obstore.get(self.store, key, options=options).bytes())  # type: ignore[arg-type]
        except FileNotFoundError as e:
            raise RemoteResourceNotFoundError(f"S3 {self.where}: no object {key!r}") from e
        except _ObstoreErrors as e:
            if _status(e) == 416:
                return b""  # a range starting at or past the end
            raise self._failed("GET", key, e) from e

    def list_objects(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """(key, size) of every object whose key starts with ``prefix`` (S3 ListObjectsV2,
        paged). object_store lists whole path segments: a prefix ending inside a segment
        lists its folder and filters."""
        folder = prefix[: prefix.rfind("/") + 1]
        try:
            for chunk in obstore.list(self.store, folder or None, chunk_size=1000):
                for meta in chunk:
                    if meta["path"].startswith(prefix):
                        yield meta["path"], int(meta["size"])
        except _ObstoreErrors as e:
            raise self._failed("LIST", folder, e) from e

    def delete(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        if not keys:
            return
        try:
            obstore.delete(self.store, keys)
        except FileNotFoundError:
            pass
        except _ObstoreErrors as e:
            raise self._failed("DELETE", keys[0], e) from e

    def close(self) -> None:
        pass
