"""Kafka's ``RemoteIndexCache``: the offset, time and transaction indexes of remote segments,
kept on local disk under ``<first log dir>/remote-log-index-cache`` so a remote read does not
fetch the index objects each time.

Files are named as Kafka names them (``<start offset>_<segment id>.index``, ``.timeindex``,
``.txnindex``; a segment without a transaction index gets an empty ``.txnindex``), written
through a ``.tmp`` file and a rename. The three files of a segment are one entry, fetched
together on a miss; entries weigh their files' bytes and the least recently used go once
the total passes ``remote.log.index.file.cache.total.size.bytes`` (Kafka's Caffeine cache
is a W-TinyLFU: plain LRU here, no frequency sketch). At start-up the complete entries on
disk are taken back and ``.tmp``/``.deleted`` leftovers and incomplete entries removed, as
Kafka's ``init``. Thread-safe: remote readers call it from their threads.

``CachedIndexes`` puts the cache in front of a ``RemoteStorageManager``: every other call
goes through to it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from . import INDEX_CACHE_DIR_NAME
from .metadata import RemoteLogSegmentMetadata
from .storage_manager import (
    IndexType,
    LogSegmentData,
    RemoteResourceNotFoundError,
    RemoteStorageManager,
)

log = logging.getLogger(__name__)

DIR_NAME = INDEX_CACHE_DIR_NAME
TMP_SUFFIX = ".tmp"
DELETED_SUFFIX = ".deleted"
SUFFIXES = {IndexType.OFFSET: ".index", IndexType.TIMESTAMP: ".timeindex",
            IndexType.TRANSACTION: ".txnindex"}


@dataclass
class Entry:
    prefix: str  # <start offset>_<segment id>
    size: int


def file_prefix(metadata: RemoteLogSegmentMetadata) -> str:
    """Kafka's generateFileNamePrefixForIndex."""
    return f"{metadata.start_offset}_{metadata.remote_log_segment_id.id}"


class RemoteIndexCache:
    def __init__(self, max_size_bytes: int, rsm: RemoteStorageManager, log_dir: Path) -> None:
        self.max_size_bytes = max_size_bytes
        self.rsm = rsm
        self.dir = Path(log_dir) / DIR_NAME
        self._entries: OrderedDict[uuid.UUID, Entry] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self._fetching: dict[uuid.UUID, threading.Lock] = {}
        self.hits = 0
        self.misses = 0
        self._init()

    def _init(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        names = sorted(os.listdir(self.dir))
        for name in names:
            if name.endswith((TMP_SUFFIX, DELETED_SUFFIX)):
                (self.dir / name).unlink(missing_ok=True)
        prefixes = {n.split(".", 1)[0] for n in names if not n.endswith((TMP_SUFFIX,
                                                                          DELETED_SUFFIX))}
        for prefix in sorted(prefixes):
            files = [self.dir / (prefix + s) for s in SUFFIXES.values()]
            try:
                key = uuid.UUID(prefix.split("_", 1)[1])
                size = sum(f.stat().st_size for f in files)
            except (IndexError, ValueError, FileNotFoundError):
                for f in files:  # incomplete or foreign: gone, as Kafka's init
                    f.unlink(missing_ok=True)
                continue
            self._entries[key] = Entry(prefix, size)
            self._size += size
        self._evict()
        log.info("remote index cache %s: %d segments, %d bytes", self.dir, len(self._entries),
                 self._size)

    # -- lookups ------------------------------------------------------------------------------
    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        """The index file of a remote segment, from the cache or, on a miss, from remote
        storage (all three indexes of the segment, cached together). Blocking."""
        suffix = SUFFIXES[index_type]
        key = metadata.remote_log_segment_id.id
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            fetching = self._fetching.setdefault(key, threading.Lock())
        if entry is not None:
            data = self._read(entry.prefix + suffix)
            if data is not None:
                self.hits += 1
                return data
        with fetching:  # one fetch per segment, the others wait for it
            with self._lock:
                entry = self._entries.get(key)
            if entry is not None and (data := self._read(entry.prefix + suffix)) is not None:
                self.hits += 1
                return data
            self.misses += 1
            files = self._fetch_all(metadata)
            self._put(key, file_prefix(metadata), files)
            return files[suffix]

    def _read(self, name: str) -> bytes | None:
        try:
            return (self.dir / name).read_bytes()
        except FileNotFoundError:  # evicted meanwhile
            return None

    def _fetch_all(self, metadata: RemoteLogSegmentMetadata) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for index_type, suffix in SUFFIXES.items():
            try:
                out[suffix] = self.rsm.fetch_index(metadata, index_type)
            except RemoteResourceNotFoundError:
                if index_type is not IndexType.TRANSACTION:
                    raise
                out[suffix] = b""  # a segment without aborted transactions
        return out

    def _put(self, key: uuid.UUID, prefix: str, files: dict[str, bytes]) -> None:
        for suffix, data in files.items():
            path = self.dir / (prefix + suffix)
            tmp = path.with_name(path.name + TMP_SUFFIX)
            tmp.write_bytes(data)
            os.replace(tmp, path)
        size = sum(len(d) for d in files.values())
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._size -= old.size
            self._entries[key] = Entry(prefix, size)
            self._size += size
            self._evict()

    def _evict(self) -> None:
        while self._size > self.max_size_bytes and self._entries:
            key, entry = self._entries.popitem(last=False)
            self._size -= entry.size
            self._fetching.pop(key, None)
            self._delete_files(entry.prefix)

    def _delete_files(self, prefix: str) -> None:
        for suffix in SUFFIXES.values():
            path = self.dir / (prefix + suffix)
            with contextlib.suppress(FileNotFoundError):
                deleted = path.with_name(path.name + DELETED_SUFFIX)
                os.replace(path, deleted)
                deleted.unlink(missing_ok=True)

    def remove(self, segment_id: uuid.UUID) -> None:
        """A deleted remote segment: its cached files go."""
        with self._lock:
            entry = self._entries.pop(segment_id, None)
            self._fetching.pop(segment_id, None)
            if entry is not None:
                self._size -= entry.size
                self._delete_files(entry.prefix)

    @property
    def size_bytes(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._entries)


class CachedIndexes:
    """A ``RemoteStorageManager`` whose offset, time and transaction index reads go through
    a :class:`RemoteIndexCache`."""

    def __init__(self, rsm: RemoteStorageManager, cache: RemoteIndexCache) -> None:
        self.rsm = rsm
        self.cache = cache

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                              data: LogSegmentData) -> bytes | None:
        return self.rsm.copy_log_segment_data(metadata, data)

    def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start_position: int,
                          end_position: int | None = None) -> bytes:
        return self.rsm.fetch_log_segment(metadata, start_position, end_position)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        if index_type in SUFFIXES:
            return self.cache.fetch_index(metadata, index_type)
        return self.rsm.fetch_index(metadata, index_type)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        self.rsm.delete_log_segment_data(metadata)
        self.cache.remove(metadata.remote_log_segment_id.id)

    def close(self) -> None:
        self.rsm.close()
