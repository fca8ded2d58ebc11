"""TransactionIndex (`.txnindex`): aborted transactions of one segment (Kafka's TransactionIndex).

34-byte entries: int16 version (0), int64 producerId, int64 firstOffset, int64 lastOffset,
int64 lastStableOffset; ordered by strictly increasing lastOffset. The file is created on the
first append, never preallocated, and appends go after the existing entries.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorruptIndexError, StorageError

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            CURRENT_VERSION, self.producer_id, self.first_offset, self.last_offset,
            self.last_stable_offset,
        )


def search_aborted_txns(txns: Iterable[AbortedTxn], fetch_offset: int, upper_bound_offset: int,
                        out: list[AbortedTxn]) -> bool:
    """Adds to ``out`` the index entries (in index order) overlapping [fetch_offset,
    upper_bound_offset); whether the search is complete: an entry's last stable offset
    reached the upper bound, so no later entry or segment can overlap."""
    for txn in txns:
        if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
            out.append(txn)
        if txn.last_stable_offset >= upper_bound_offset:
            return True
    return False


def decode_aborted_txns(data: bytes) -> list[AbortedTxn]:
    """The entries of a transaction index file's bytes (a remote ``.txnindex``)."""
    return [AbortedTxn(pid, first, last, lso)
            for _v, pid, first, last, lso in _ENTRY.iter_unpack(data[:len(data) - len(data) % ENTRY_SIZE])]


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    aborted_transactions: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    def __init__(self, start_offset: int, path: str | os.PathLike[str]) -> None:
        self.start_offset = start_offset
        self._path = Path(path)
        self._fd: int | None = None
        self._last_offset: int | None = None
        if self._path.exists():
            self._open()
            for _pos, txn in self._iterate():
                self._last_offset = txn.last_offset

    @property
    def path(self) -> Path:
        return self._path

    @property
    def is_empty(self) -> bool:
        """No entry (known without reading the file: every entry goes through this object)."""
        return self._last_offset is None

    @property
    def file(self) -> Path:
        return self._path

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        return self._fd

    def _size(self) -> int:
        return os.fstat(self._fd).st_size if self._fd is not None else 0

    def _iterate(self) -> Iterator[tuple[int, AbortedTxn]]:
        if self._fd is None:
            return
        data = os.pread(self._fd, self._size(), 0)
        for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
            version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
            if version != CURRENT_VERSION:
                raise CorruptIndexError(
                    f"Unexpected aborted transaction version {version} in transaction index "
                    f"{self._path} at byte {pos}, current version is {CURRENT_VERSION}"
                )
            yield pos, AbortedTxn(pid, first, last, lso)

    def append(self, txn: AbortedTxn) -> None:
        if self._last_offset is not None and txn.last_offset <= self._last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but "
                f"{txn.last_offset} is not greater than current last offset {self._last_offset} "
                f"of index {self._path}"
            )
        fd = self._open()
        os.pwrite(fd, txn.encode(), self._size())
        self._last_offset = txn.last_offset

    def all_aborted_txns(self) -> list[AbortedTxn]:
        return [t for _p, t in self._iterate()]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset); complete once
        one's last stable offset reaches the upper bound."""
        out: list[AbortedTxn] = []
        complete = search_aborted_txns((txn for _p, txn in self._iterate()), fetch_offset,
                                       upper_bound_offset, out)
        return TxnIndexSearchResult(out, complete)

    def truncate_to(self, offset: int) -> None:
        """Drop entries with last offset >= ``offset``."""
        new_last: int | None = None
        for pos, txn in self._iterate():
            if txn.last_offset >= offset:
                assert self._fd is not None
                os.ftruncate(self._fd, pos)
                self._last_offset = new_last
                return
            new_last = txn.last_offset

    def reset(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
        self._last_offset = None

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete_if_exists(self) -> bool:
        self.close()
        try:
            self._path.unlink()
            return True
        except FileNotFoundError:
            return False

    def rename_to(self, path: str | os.PathLike[str]) -> None:
        target = Path(path)
        try:
            os.replace(self._path, target)
        except FileNotFoundError:
            if self._fd is not None:
                raise StorageError(f"{self._path} vanished while open") from None
        self._path = target

    def update_parent_dir(self, parent: Path) -> None:
        self._path = Path(parent) / self._path.name

    def sanity_check(self) -> None:
        for pos, txn in self._iterate():
            if txn.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {txn} in index {self._path} at byte "
                    f"{pos} is less than start offset {self.start_offset}"
                )

    def __repr__(self) -> str:
        return f"TransactionIndex({self._path}, start={self.start_offset})"
