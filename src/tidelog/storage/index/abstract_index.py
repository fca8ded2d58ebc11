"""Shared machinery of the sparse indexes (Kafka's AbstractIndex + LazyIndex).

An index file is a flat array of fixed-size big-endian entries. A *new* file is preallocated
(sparse) to ``max_index_size`` rounded down to the entry size; an existing file's entry count
is its length divided by the entry size (the whole file is assumed valid, which is why close
and roll trim it). The file is opened lazily, on first access, so a segment whose index is
never used does not create it, and renames of an unopened index only change the path.

Unlike Kafka we keep no memory map and no descriptor: the valid entries live in a bytearray,
and each appended entry is written through with ``pwrite`` on a descriptor opened for that
write. A store into a writable map of a sparse file kills the process with SIGBUS when the
file system has no free block (or the disk fails); a ``pwrite`` fails with ENOSPC/EIO, an
ordinary storage error that takes the log dir offline. Holding no descriptor keeps a
partition at one descriptor per segment (the ``.log``), so ``ulimit -n 1024`` hosts hundreds
of partitions. Entries are written through at once because readers in other processes (the
Spark source) read the files of a live segment. The one exception is a rebuild
(``deferred_writes``, used by segment recovery, before the segment is served): its entries
are written at the end with one open and one ``pwrite`` of the whole run, not one open per
entry.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import IndexOffsetOverflowError

INT32_MAX = 2**31 - 1


class AbstractIndex:
    # (slotted: the native plain append, log_plain.py, reads them at their offsets)
    __slots__ = ("__weakref__", "_deferred_from", "_dirty", "_entries", "_flush_lock",
                 "_length", "_loaded", "_lock", "_max_entries", "_mmap", "_path", "base_offset",
                 "max_index_size", "writable")
    entry_size = 8

    def __init__(
        self, path: str | os.PathLike[str], base_offset: int, max_index_size: int = -1,
        writable: bool = True,
    ) -> None:
        self._path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()  # one fsync at a time; appends never take it
        self._loaded = False
        # The valid entries (named for the map it replaced; indexable like one).
        self._mmap: bytearray = bytearray()
        self._dirty = False
        self._length = 0
        self._entries = 0
        self._max_entries = 0
        # Slot of the first entry not yet written to the file (deferred_writes), else None.
        self._deferred_from: int | None = None

    # -- lazy loading ----------------------------------------------------------------------
    def _ensure_loaded(self) -> None:
        if self._loaded:
            return
        with self._lock:
            if not self._loaded:
                self._load()
                self._loaded = True

    def _load(self, empty: bool = False) -> None:
        """Open (or create) the file; its entries are read unless ``empty`` (a truncate
        before the first use drops them unread)."""
        newly_created = not self._path.exists()
        if newly_created and self.max_index_size < self.entry_size:
            raise ValueError(f"Invalid max index size: {self.max_index_size} for {self._path}")
        flags = (os.O_RDWR | os.O_CREAT) if self.writable else os.O_RDONLY
        fd = os.open(self._path, flags, 0o644)
        try:
            if newly_created:
                length = self._round_down(self.max_index_size)
                os.ftruncate(fd, length)  # sparse, like Kafka's RandomAccessFile.setLength
                data = b""
            else:
                length = os.fstat(fd).st_size
                data = b"" if empty else _read_all(fd, length)
        finally:
            os.close(fd)
        self._length = length
        self._max_entries = length // self.entry_size
        # A new file is empty; an existing one is taken as full of valid entries.
        self._entries = 0 if newly_created or empty else length // self.entry_size
        self._mmap = bytearray(data[: self._entries * self.entry_size])
        self._dirty = False
        self._on_loaded()

    def _on_loaded(self) -> None:
        """Hook: subclasses cache their last entry."""

    def _write_entry(self, entry: bytes) -> None:
        """Write ``entry`` to the next slot, file first: a failed write changes nothing.
        Inside ``deferred_writes`` the entry only joins the in-memory run."""
        position = self._entries * self.entry_size
        if self._deferred_from is None:
            self._pwrite_all(entry, position)
        del self._mmap[position:]
        self._mmap += entry
        self._entries += 1
        self._dirty = True

    def _write_entries(self, data: bytes) -> None:
        """``_write_entry`` for a run of packed entries the caller has checked (the
        recovery scan's bulk appends)."""
        position = self._entries * self.entry_size
        if self._deferred_from is None:
            self._pwrite_all(data, position)
        del self._mmap[position:]
        self._mmap += data
        self._entries += len(data) // self.entry_size
        self._dirty = True

    def _pwrite_all(self, data: bytes, position: int) -> None:
        fd = os.open(self._path, os.O_WRONLY)
        try:
            written = os.pwrite(fd, data, position)
            while written < len(data):  # a short write on a nearly full disk
                n = os.pwrite(fd, data[written:], position + written)
                if n == 0:
                    raise OSError(f"short write to {self._path}")
                written += n
        finally:
            os.close(fd)

    @contextmanager
    def deferred_writes(self) -> Iterator[None]:
        """Hold the entries appended in the block in memory and write them on leaving it,
        with one open and one ``pwrite`` (a rebuild writes thousands of entries: one open
        each cost recovery a third of its time). On leaving by an exception the entries
        appended so far are still written, as they would have been one by one. A failed
        write drops the unwritten entries from memory too, so memory never claims more
        than the file holds, and raises the OSError. Not for a live segment: readers in
        other processes see the entries only at the end."""
        self._ensure_loaded()
        with self._lock:
            if self._deferred_from is not None:
                raise RuntimeError(f"nested deferred_writes on {self._path}")
            self._deferred_from = self._entries
            try:
                yield
            finally:
                start, self._deferred_from = self._deferred_from, None
                assert start is not None
                self._write_deferred(start)

    def _write_deferred(self, start: int) -> None:
        if self._entries <= start:
            return
        lo, hi = start * self.entry_size, self._entries * self.entry_size
        try:
            self._pwrite_all(bytes(self._mmap[lo:hi]), lo)
        except OSError:
            self._truncate_to_entries(start)
            raise

    def _round_down(self, n: int) -> int:
        return n - n % self.entry_size

    # -- properties ------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self._path

    @property
    def file(self) -> Path:
        return self._path

    @property
    def is_loaded(self) -> bool:
        return self._loaded

    @property
    def entries(self) -> int:
        self._ensure_loaded()
        return self._entries

    @property
    def max_entries(self) -> int:
        self._ensure_loaded()
        return self._max_entries

    @property
    def length(self) -> int:
        """Current file length in bytes (mapped size)."""
        self._ensure_loaded()
        return self._length

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    @property
    def loaded(self) -> bool:
        """Whether the file was opened (its entries read, a new one created)."""
        return self._loaded

    def is_full(self) -> bool:
        self._ensure_loaded()
        return self._entries >= self._max_entries

    def relative_offset(self, offset: int) -> int:
        rel = offset - self.base_offset
        if rel < 0 or rel > INT32_MAX:
            raise IndexOffsetOverflowError(
                f"Integer overflow for offset: {offset} ({self._path}): the index base is "
                f"{self.base_offset}"
            )
        return rel

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    # -- search ----------------------------------------------------------------------------
    def _largest_lower_bound(self, target: int, key: Callable[[int], int]) -> int:
        """Slot of the largest entry whose key <= target; -1 if none."""
        n = self._entries
        if n == 0 or key(0) > target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if key(mid) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _smallest_upper_bound(self, target: int, key: Callable[[int], int]) -> int:
        """Slot of the smallest entry whose key >= target; -1 if none."""
        n = self._entries
        if n == 0 or key(n - 1) < target:
            return -1
        lo, hi = 0, n - 1
        while lo < hi:
            mid = (lo + hi) >> 1
            if key(mid) >= target:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _relative_offset_at(self, slot: int) -> int:
        raise NotImplementedError

    def _truncate_to_entries(self, n: int) -> None:
        if self._deferred_from is not None and n < self._deferred_from:
            self._deferred_from = n  # entries re-appended below it are unwritten too
        self._entries = n
        del self._mmap[n * self.entry_size :]
        self._on_loaded()

    def _truncate_slot_for(self, offset: int) -> int:
        """Entry count that keeps exactly the entries with offset < ``offset``."""
        rel_target = offset - self.base_offset
        slot = self._largest_lower_bound(rel_target, self._relative_offset_at)
        if slot < 0:
            return 0
        return slot if self._relative_offset_at(slot) == rel_target else slot + 1

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= ``offset``."""
        self._ensure_loaded()
        with self._lock:
            self._truncate_to_entries(self._truncate_slot_for(offset))

    def truncate(self) -> None:
        """Remove all entries (not read first when none were read yet: recovery resets the
        indexes of a segment it rebuilds, up to max.index.size bytes each)."""
        with self._lock:
            if not self._loaded:
                self._load(empty=True)
                self._loaded = True
            self._truncate_to_entries(0)

    # -- sizing ----------------------------------------------------------------------------
    def resize(self, new_size: int) -> bool:
        """Remap to ``new_size`` rounded down to the entry size, keeping the entries.
        Returns False if the size is unchanged."""
        self._ensure_loaded()
        with self._lock:
            rounded = self._round_down(new_size)
            if rounded == self._length:
                return False
            if rounded < self._entries * self.entry_size:
                raise ValueError(
                    f"cannot resize {self._path} to {rounded} bytes below its "
                    f"{self._entries} entries"
                )
            os.truncate(self._path, rounded)
            self._length = rounded
            self._max_entries = rounded // self.entry_size
            return True

    def trim(self) -> None:
        """Trim the file to exactly the valid entries (Kafka's trimToValidSize)."""
        self.resize(self.entries * self.entry_size)

    trim_to_valid_size = trim

    def reset(self) -> None:
        """Remove all entries and grow back to ``max_index_size``."""
        self.truncate()
        self.resize(self.max_index_size)

    def flush(self) -> None:
        """fsync what was written since the last flush. The fsync runs outside the index's
        lock, so an append or a lookup never waits for the disk; an entry written meanwhile
        marks the index dirty again for the next flush. Flushes are serialized: a second
        one returns only once the fsync in progress has ended."""
        with self._flush_lock:
            with self._lock:
                if not (self._loaded and self._dirty):
                    return
                self._dirty = False
            try:
                fd = os.open(self._path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            except BaseException:
                self._dirty = True  # still not known to be on disk
                raise

    def close(self) -> None:
        """Trim and release the entries (no-op if never loaded)."""
        if not self._loaded:
            return
        with self._lock:
            if self.writable:
                self.trim()
            self.close_handler()

    def close_handler(self) -> None:
        """Forget the entries without touching the file (an offline dir, a crash test)."""
        with self._lock:
            self._mmap = bytearray()
            self._loaded = False

    def delete_if_exists(self) -> bool:
        with self._lock:
            self.close_handler()
            try:
                self._path.unlink()
                return True
            except FileNotFoundError:
                return False

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        """Rename the file if it exists; an unopened, uncreated index only changes path."""
        target = Path(path)
        with self._lock:
            try:
                os.replace(self._path, target)
            except FileNotFoundError:
                if self._loaded:
                    raise
            self._path = target

    def update_parent_dir(self, parent: Path) -> None:
        self._path = Path(parent) / self._path.name

    def file_exists(self) -> bool:
        return self._path.exists()

    def sanity_check(self) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        state = f"entries={self._entries}, max_entries={self._max_entries}" if self._loaded else "unloaded"
        return f"{type(self).__name__}({self._path}, base={self.base_offset}, {state})"


def _read_all(fd: int, length: int) -> bytes:
    chunks = []
    position = 0
    while position < length:
        chunk = os.pread(fd, length - position, position)
        if not chunk:
            break
        chunks.append(chunk)
        position += len(chunk)
    return b"".join(chunks)
