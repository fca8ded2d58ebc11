"""The object store under the RemoteStorageManager: Aiven's ``StorageBackend``, reduced to
what byte-for-byte segment files need (upload, ranged fetch, delete)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol


class ObjectStorage(Protocol):
    """One bucket (or directory) of objects named by keys (``a/b/c.log``).

    Errors are :class:`~tidelog.storage.remote.storage_manager.RemoteStorageError`; a missing
    key on fetch is
    :class:`~tidelog.storage.remote.storage_manager.RemoteResourceNotFoundError`."""

    def upload(self, key: str, data: Path | bytes) -> int:
        """Store ``data`` (a file's content, or bytes) under ``key``, replacing any object
        there; return the number of bytes stored."""
        ...

    def fetch(self, key: str, byte_range: tuple[int, int | None] | None = None) -> bytes:
        """The object's bytes, or ``byte_range`` = (first, last INCLUSIVE or None for the
        end) of them. A range starting at or past the end gives ``b""``."""
        ...

    def delete(self, keys: Iterable[str]) -> None:
        """Delete ``keys``; keys already gone are not an error."""
        ...

    def close(self) -> None:
        ...


class ListableObjectStorage(ObjectStorage, Protocol):
    """Object storage that can also list its keys (readers of a bucket: Spark path mode)."""

    def list_objects(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """(key, size) of every object whose key starts with ``prefix``."""
        ...
