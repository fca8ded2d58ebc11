"""FileRecords: one `.log` file of RecordBatch v2 bytes (Kafka's FileRecords/FileLogInputStream).

Batches stay bytes: appends write what the caller validated, reads hand out ``FileSlice``
views (fd + position + size) that a server can pass to ``os.sendfile``. Scans that only need
batch headers (offset search, next offset, timestamps) read the 61-byte headers from small
buffered chunks and never materialise whole batches.

The logical size can be below the file length: a preallocated file is created at its full
length and trimmed to the logical size on close (Kafka's ``preallocate``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from tidelog._native import core
from tidelog.records import RECORD_BATCH_OVERHEAD, RecordBatch, crc32c
from tidelog.records.batch import (
    CRC_START,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    MAGIC_V2,
    MIN_LENGTH_FIELD,
)
from tidelog.records.errors import CorruptRecordError

from .errors import StorageError

if TYPE_CHECKING:
    from .index.offset_index import OffsetIndex

Buffer = bytes | bytearray | memoryview

INT32_MAX = 2**31 - 1
_HEADER = struct.Struct(">qiibIhiqqqhii")
_LENGTH = struct.Struct(">i")
# Header-only scans start with a small read (an index lookup usually lands on the batch
# wanted) and double it while the scan goes on; a full-batch scan reads BATCH_CHUNK at a time.
HEADER_CHUNK = 4 * 1024
MAX_HEADER_CHUNK = 64 * 1024
BATCH_CHUNK = 1024 * 1024


class BatchHeader(NamedTuple):
    """The 61-byte header of a batch at ``position`` in a file (no records)."""

    position: int
    size: int
    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1


class LogOffsetPosition(NamedTuple):
    """Result of an offset search: the batch's last offset, its position and size."""

    offset: int
    position: int
    size: int


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int | None = None


def parse_header(buf: Buffer, pos: int, position: int, limit: int, path: str | None) -> BatchHeader | None:
    """Header of the batch at ``buf[pos:]`` (file ``position``), None if it is incomplete.

    ``limit`` is how many bytes of the file remain from ``position``; the batch is invisible
    if it is longer than that (a partial trailing batch).
    """
    if limit <= HEADER_SIZE_UP_TO_MAGIC:
        return None
    (length,) = _LENGTH.unpack_from(buf, pos + 8)
    if length < MIN_LENGTH_FIELD:
        raise CorruptRecordError(
            f"batch length field {length} is below the minimum {MIN_LENGTH_FIELD}", position, path
        )
    size = LOG_OVERHEAD + length
    if size > limit:
        return None
    if size < RECORD_BATCH_OVERHEAD:
        raise CorruptRecordError(
            f"batch size {size} is below the minimum {RECORD_BATCH_OVERHEAD}", position, path
        )
    fields = _HEADER.unpack_from(buf, pos)
    if fields[3] != MAGIC_V2:
        raise CorruptRecordError(f"unsupported magic {fields[3]}", position, path)
    return BatchHeader(position, size, *fields[:1], *fields[2:])


def headers_in_buffer(buf: Buffer, path: str | None = None) -> Iterator[BatchHeader]:
    """Headers of the consecutive batches in an in-memory buffer (positions relative to it)."""
    pos, n = 0, len(buf)
    while True:
        h = parse_header(buf, pos, pos, n - pos, path)
        if h is None:
            return
        yield h
        pos += h.size


_APPEND_FIELDS = struct.Struct(">qi11xi8xq")  # base offset, length, last delta, max ts
_SEARCH_FIELDS = struct.Struct(">qi4xb6xi")  # base offset, length, magic, last offset delta


def batch_metas(buf: Buffer, path: str | os.PathLike[str] | None = None
                ) -> list[tuple[int, int, int]]:
    """(last offset, max timestamp, size) of each batch of an append buffer, which must be
    whole batches: anything else raises CorruptRecordError (naming ``path``) before a byte
    is written."""
    n, pos = len(buf), 0
    out = []
    unpack = _APPEND_FIELDS.unpack_from
    while pos < n:
        if n - pos < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"{n - pos} trailing bytes are not a whole batch", pos, _name(path)
            )
        base, length, delta, max_ts = unpack(buf, pos)
        size = LOG_OVERHEAD + length
        if size < RECORD_BATCH_OVERHEAD or pos + size > n:
            raise CorruptRecordError(
                f"batch length field {length} does not fit the {n}-byte append", pos, _name(path)
            )
        out.append((base + delta, max_ts, size))
        pos += size
    return out


def _name(path: str | os.PathLike[str] | None) -> str | None:
    return None if path is None else str(path)


class FileSlice:
    """A byte range of a `.log` file: no copy until ``read()``; ``fileno()``/``position`` for
    ``os.sendfile``. ``first_entry_incomplete`` marks a slice cut inside its first batch."""

    __slots__ = ("_fd", "first_entry_incomplete", "path", "position", "size")

    def __init__(
        self,
        fd: int | FileRecords | None,
        position: int,
        size: int,
        *,
        path: str | None = None,
        first_entry_incomplete: bool = False,
    ) -> None:
        if isinstance(fd, FileRecords):
            path = path or str(fd.path)
            fd = fd.fileno()
        self._fd = fd
        self.position = position
        self.size = size
        self.path = path
        self.first_entry_incomplete = first_entry_incomplete

    @classmethod
    def empty(cls) -> FileSlice:
        return cls(None, 0, 0)

    def __len__(self) -> int:
        return self.size

    @property
    def size_in_bytes(self) -> int:
        return self.size

    def fileno(self) -> int:
        if self._fd is None:
            raise ValueError("an empty slice has no file")
        return self._fd

    def read(self) -> bytes:
        if self.size == 0 or self._fd is None:
            return b""
        return _pread_exact(self._fd, self.size, self.position, self.path)

    def batches(self, *, validate: bool = False) -> Iterator[RecordBatch]:
        """The complete batches in the slice (positions are file positions)."""
        data = self.read()
        pos = 0
        for h in headers_in_buffer(data, self.path):
            batch = RecordBatch(memoryview(data)[pos : pos + h.size], self.position + pos)
            if validate:
                batch.ensure_valid(self.path)
            yield batch
            pos += h.size

    def __repr__(self) -> str:
        return f"FileSlice({self.path}, position={self.position}, size={self.size})"


def _pread_exact(fd: int, size: int, position: int, path: str | None) -> bytes:
    data = os.pread(fd, size, position)
    if len(data) == size:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            raise StorageError(f"{path}: short read of {got} of {size} bytes at {position}")
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class FileRecords:
    """One `.log` file. Appends are single-writer (the Log's lock); reads use pread and may
    run concurrently with appends."""

    __slots__ = ("_path", "_path_str", "fd", "size_in_bytes")  # (read natively, log_plain)

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self._path = Path(path)
        self._path_str = str(self._path)
        self.fd: int | None = fd  # (None once closed; read by the plain append)
        # the logical size, the bytes appended (a plain attribute, not a property: read on
        # every append; moved past a batch the plain append wrote at the end, log_plain)
        self.size_in_bytes = size

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | os.PathLike[str], preallocate: bool = False, init_size: int = 0) -> FileRecords:
        """Open or create ``path``. An existing file's length is its size; a new file with
        ``preallocate`` is created ``init_size`` bytes long with logical size 0."""
        p = Path(path)
        fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            length = os.fstat(fd).st_size
            if length == 0 and preallocate and init_size > 0:
                _preallocate(fd, init_size)
                return cls(p, fd, 0)
            return cls(p, fd, length)
        except BaseException:
            os.close(fd)
            raise

    @property
    def path(self) -> Path:
        return self._path

    @property
    def file(self) -> Path:
        return self._path

    def __len__(self) -> int:
        return self.size_in_bytes

    def fileno(self) -> int:
        if self.fd is None:
            raise StorageError(f"{self._path} is closed")
        return self.fd

    @property
    def closed(self) -> bool:
        return self.fd is None

    def file_length(self) -> int:
        """Physical length (above the size while preallocated)."""
        return os.fstat(self.fileno()).st_size

    # -- writing ---------------------------------------------------------------------------
    def append(self, data: Buffer) -> int:
        """Write ``data`` at the end; returns the bytes written."""
        n = len(data)
        if n > INT32_MAX - self.size_in_bytes:
            raise ValueError(
                f"append of {n} bytes is too large for {self._path} of {self.size_in_bytes} bytes"
            )
        fd = self.fileno()
        try:
            written = os.pwrite(fd, data, self.size_in_bytes)
            if written < n:  # a short write (a nearly full disk): the rest, from a view
                view = data if isinstance(data, memoryview) else memoryview(data)
                while written < n:
                    written += os.pwrite(fd, view[written:], self.size_in_bytes + written)
        except OSError as e:
            # The logical size stays put: a partial write is overwritten by the next append
            # or cut by recovery, never exposed to readers.
            raise self.append_error(e, n) from e
        self.size_in_bytes += n
        return n

    def append_error(self, e: OSError, n: int) -> OSError:
        """``e``, raised writing ``n`` bytes at the end, as ``append`` raises it."""
        return _with_path(e, self._path, f"appending {n} bytes at {self.size_in_bytes}")

    def flush(self) -> None:
        try:
            os.fsync(self.fileno())
        except OSError as e:
            raise _with_path(e, self._path, "fsync") from e

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to ``target_size`` bytes; returns the bytes removed."""
        original = self.size_in_bytes
        if target_size > original or target_size < 0:
            raise StorageError(
                f"Attempt to truncate log segment {self._path} to {target_size} bytes failed, "
                f"size of this log segment is {original} bytes."
            )
        if target_size < self.file_length():
            try:
                os.ftruncate(self.fileno(), target_size)
            except OSError as e:
                raise _with_path(e, self._path, f"truncating to {target_size}") from e
        self.size_in_bytes = target_size
        return original - target_size

    def trim(self) -> None:
        """Drop preallocated bytes past the logical size."""
        self.truncate_to(self.size_in_bytes)

    def close(self) -> None:
        if self.fd is None:
            return
        try:
            self.flush()
            self.trim()
        finally:
            self.close_handlers()

    def close_handlers(self) -> None:
        """Close the descriptor without flushing or trimming."""
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)

    def delete(self) -> bool:
        """Close and remove the file; False if it did not exist."""
        self.close_handlers()
        try:
            self._path.unlink()
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        """Atomic rename; the open descriptor stays valid."""
        target = Path(path)
        os.replace(self._path, target)
        self._path = target
        self._path_str = str(target)

    def update_parent_dir(self, parent: Path) -> None:
        self._path = Path(parent) / self._path.name
        self._path_str = str(self._path)

    def last_modified_ms(self) -> int:
        return os.stat(self._path).st_mtime_ns // 1_000_000

    def set_last_modified(self, ms: int) -> None:
        os.utime(self._path, ns=(ms * 1_000_000, ms * 1_000_000))

    # -- reading ---------------------------------------------------------------------------
    def slice(self, position: int, size: int) -> FileSlice:
        """``size`` bytes from ``position``, bounded by the current size (no copy)."""
        current = self.size_in_bytes
        if position < 0:
            raise ValueError(f"Invalid position: {position} in read from {self._path}")
        if position > current:
            raise ValueError(
                f"Slice from position {position} exceeds end position of {self._path} ({current})"
            )
        if size < 0:
            raise ValueError(f"Invalid size: {size} in read from {self._path}")
        return FileSlice(self.fileno(), position, min(size, current - position), path=self._path_str)

    def read_at(self, position: int, size: int) -> bytes:
        """Copy of ``size`` bytes at ``position`` (bounded by the size)."""
        return self.slice(position, size).read()

    def headers(self, start: int = 0, end: int | None = None) -> Iterator[BatchHeader]:
        """Headers of the complete batches in ``[start, end)``; reads only header bytes in
        small chunks. A length field below 14 raises CorruptRecordError naming the position."""
        fd, path = self.fileno(), self._path_str
        limit = self.size_in_bytes if end is None else min(end, self.size_in_bytes)
        buf: bytes = b""
        buf_start = pos = start
        chunk = HEADER_CHUNK
        while limit - pos > HEADER_SIZE_UP_TO_MAGIC:
            off = pos - buf_start
            if off + RECORD_BATCH_OVERHEAD > len(buf):
                buf = _pread_exact(fd, min(chunk, limit - pos), pos, path)
                buf_start, off = pos, 0
                chunk = min(chunk * 2, MAX_HEADER_CHUNK)
            h = parse_header(buf, off, pos, limit - pos, path)
            if h is None:
                return
            yield h
            pos += h.size

    def batches(
        self, start: int = 0, end: int | None = None, *, validate: bool = False
    ) -> Iterator[RecordBatch]:
        """Complete batches from ``start`` (FileLogInputStream): zero-copy views into ~1 MiB
        chunks read with pread. A partial trailing batch is invisible; a length field below
        14 (and with ``validate`` a bad CRC) raises CorruptRecordError naming the position."""
        for _h, batch in self.batches_with_headers(start, end, validate=validate):
            yield batch

    def batches_with_headers(
        self, start: int = 0, end: int | None = None, *, validate: bool = False
    ) -> Iterator[tuple[BatchHeader, RecordBatch]]:
        """As ``batches``, each with its parsed header (one struct call per batch)."""
        fd, path = self.fileno(), self._path_str
        limit = self.size_in_bytes if end is None else min(end, self.size_in_bytes)
        buf = memoryview(b"")
        buf_start = pos = start
        while limit - pos > HEADER_SIZE_UP_TO_MAGIC:
            off = pos - buf_start
            if off + RECORD_BATCH_OVERHEAD > len(buf):
                buf = memoryview(_pread_exact(fd, min(BATCH_CHUNK, limit - pos), pos, path))
                buf_start, off = pos, 0
            h = parse_header(buf, off, pos, limit - pos, path)
            if h is None:
                return
            if off + h.size > len(buf):
                want = max(h.size, min(BATCH_CHUNK, limit - pos))
                buf = memoryview(_pread_exact(fd, want, pos, path))
                buf_start, off = pos, 0
            view = buf[off : off + h.size]
            if validate and crc32c(view[CRC_START:]) != h.crc:
                raise CorruptRecordError(
                    f"CRC mismatch: stored 0x{h.crc:08x}, computed "
                    f"0x{crc32c(view[CRC_START:]):08x}", pos, path,
                )
            yield h, RecordBatch(view, pos)
            pos += h.size

    def find_batch(self, index: OffsetIndex, target_offset: int, starting_position: int = 0
                   ) -> LogOffsetPosition | None:
        """``search_for_offset_with_size`` from the floor entry of ``target_offset`` in this
        file's offset ``index`` (or ``starting_position`` if higher): the read of every
        partition with new records. One native call (``tidelog._native`` find_batch) does
        the lookup and the header walk, the reads without the GIL; where it meets what only
        the twin answers (a bad header, a short read) it hands its start over, and the
        twin's search from there answers or raises as ``find_batch_py`` would."""
        if _find_batch is None:
            return self.find_batch_py(index, target_offset, starting_position)
        entries, count = index.valid_entries()
        found = _find_batch(entries, count, index.base_offset, target_offset,
                            starting_position, self.fileno(), self.size_in_bytes)
        if found is None:
            return None
        if type(found) is int:
            return self.search_for_offset_with_size(target_offset, found)
        return LogOffsetPosition(*found)

    def find_batch_py(self, index: OffsetIndex, target_offset: int, starting_position: int = 0
                      ) -> LogOffsetPosition | None:
        """``find_batch``'s twin: the index lookup, then the search from there."""
        position = index.lookup(target_offset).position
        return self.search_for_offset_with_size(target_offset, max(position, starting_position))

    def search_for_offset_with_size(self, target_offset: int, starting_position: int) -> LogOffsetPosition | None:
        """The first batch at or after ``starting_position`` whose last offset is >= target.

        Every fetch runs this after an index lookup, so it reads only the 27 header bytes it
        needs per batch from a small buffer, without building header objects."""
        fd, limit = self.fileno(), self.size_in_bytes
        pos = buf_start = starting_position
        buf, chunk = b"", HEADER_CHUNK
        unpack = _SEARCH_FIELDS.unpack_from
        while limit - pos > HEADER_SIZE_UP_TO_MAGIC:
            off = pos - buf_start
            if off + _SEARCH_FIELDS.size > len(buf):
                buf = _pread_exact(fd, min(chunk, limit - pos), pos, self._path_str)
                buf_start, off = pos, 0
                chunk = min(chunk * 2, MAX_HEADER_CHUNK)
            if len(buf) - off < _SEARCH_FIELDS.size:  # fewer bytes left than a header
                parse_header(buf, off, pos, limit - pos, self._path_str)  # raises if corrupt
                return None
            base, length, magic, delta = unpack(buf, off)
            size = LOG_OVERHEAD + length
            if length < MIN_LENGTH_FIELD or size < RECORD_BATCH_OVERHEAD or magic != MAGIC_V2:
                parse_header(buf, off, pos, limit - pos, self._path_str)  # raises
            if size > limit - pos:
                return None  # a partial trailing batch is invisible
            if base + delta >= target_offset:
                return LogOffsetPosition(base + delta, pos, size)
            pos += size
        return None

    def search_for_timestamp(
        self, target_timestamp: int, starting_position: int, starting_offset: int
    ) -> TimestampAndOffset | None:
        """The first record with timestamp >= target and offset >= starting_offset, looking
        only inside batches whose max timestamp reaches the target."""
        for h in self.headers(starting_position):
            if h.max_timestamp < target_timestamp:
                continue
            batch = RecordBatch(self.read_at(h.position, h.size), h.position)
            for rec in batch.iter_records():
                if rec.timestamp >= target_timestamp and rec.offset >= starting_offset:
                    epoch = h.partition_leader_epoch
                    return TimestampAndOffset(rec.timestamp, rec.offset, epoch if epoch >= 0 else None)
        return None

    def largest_timestamp_after(self, starting_position: int) -> TimestampAndOffset:
        """Max batch timestamp from ``starting_position`` and the last offset of its batch."""
        max_ts, offset_of_max, epoch = -1, -1, -1
        for h in self.headers(starting_position):
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max, epoch = h.max_timestamp, h.last_offset, h.partition_leader_epoch
        return TimestampAndOffset(max_ts, offset_of_max, epoch if epoch >= 0 else None)

    def __repr__(self) -> str:
        return f"FileRecords({self._path}, size={self.size_in_bytes})"


_find_batch = core.find_batch if core is not None else None


def _with_path(e: OSError, path: Path, what: str) -> OSError:
    """The same OSError (type and errno kept, so callers' handlers still match) naming the
    file and the operation."""
    return type(e)(e.errno, f"{e.strerror} ({what})", str(path))


def _preallocate(fd: int, size: int) -> None:
    try:
        os.posix_fallocate(fd, 0, size)
    except (AttributeError, OSError):
        os.ftruncate(fd, size)
