"""A directory as object storage: Aiven's ``FileSystemStorage`` (``rsm.config.storage.root``).

Keys are relative paths under the root; uploads go through a temporary file and a rename,
so a reader never sees half an object."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

from .storage_manager import RemoteResourceNotFoundError, RemoteStorageError


class FileSystemStorage:
    """:class:`~tidelog.storage.remote.object_storage.ObjectStorage` in a local directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise RemoteStorageError(f"storage.root {self.root} is not a directory")
        if not os.access(self.root, os.W_OK):
            raise RemoteStorageError(f"storage.root {self.root} is not writable")

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise RemoteStorageError(f"key {key!r} leaves storage.root {self.root}")
        return path

    def upload(self, key: str, data: Path | bytes) -> int:
        path = self._path(key)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, bytes):
                tmp.write_bytes(data)
            else:
                shutil.copyfile(data, tmp)
            os.replace(tmp, path)
            return path.stat().st_size
        except OSError as e:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise RemoteStorageError(f"upload of {key!r} to {self.root} failed: {e}") from e

    def fetch(self, key: str, byte_range: tuple[int, int | None] | None = None) -> bytes:
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                if byte_range is None:
                    return f.read()
                first, last = byte_range
                if last is not None and last < first:
                    return b""
                f.seek(first)
                return f.read() if last is None else f.read(last - first + 1)
        except FileNotFoundError as e:
            raise RemoteResourceNotFoundError(f"no object {key!r} in {self.root}") from e
        except OSError as e:
            raise RemoteStorageError(f"read of {key!r} in {self.root} failed: {e}") from e

    def list_objects(self, prefix: str = "") -> Iterator[tuple[str, int]]:
        """(key, size) of every object whose key starts with ``prefix``, in key order
        (temporary files of uploads in progress left out)."""
        folder = self.root / prefix[: prefix.rfind("/") + 1]
        if not folder.is_dir():
            return
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            key = path.relative_to(self.root).as_posix()
            if key.startswith(prefix) and not path.name.startswith("."):
                yield key, path.stat().st_size

    def delete(self, keys: Iterable[str]) -> None:
        for key in keys:
            path = self._path(key)
            try:
                path.unlink(missing_ok=True)
            except OSError as e:
                raise RemoteStorageError(f"delete of {key!r} in {self.root} failed: {e}") from e
            self._remove_empty_parents(path.parent)

    def _remove_empty_parents(self, directory: Path) -> None:
        root = self.root.resolve()
        while directory != root and directory.is_relative_to(root):
            try:
                directory.rmdir()
            except OSError:
                return
            directory = directory.parent

    def close(self) -> None:
        pass
