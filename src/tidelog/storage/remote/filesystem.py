"""A directory as object storage: Aiven's ``FileSystemStorage`` (``rsm.config.storage.root``).

Keys are relative paths under the root; uploads go through a temporary file and a rename,
so a reader never sees half an object."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


class FileSystemStorage:
    """:class:`~tidelog.storage.remote.object_storage.ObjectStorage` in a local directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def upload(self, key: str, data: Path | bytes) -> int:
        raise NotImplementedError

    def fetch(self, key: str, byte_range: tuple[int, int | None] | None = None) -> bytes:
        raise NotImplementedError

    def delete(self, keys: Iterable[str]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass
