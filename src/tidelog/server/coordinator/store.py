"""The coordinator's storage port: partition N of ``__consumer_offsets`` as a byte log.

The coordinator only appends whole record batches and, at load time, reads every batch of a
partition back. ``InMemoryOffsetsStore`` backs unit tests; the broker passes an adapter over
its LogManager (``LogOffsetsStore`` in ``log_store.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from tidelog.records import RecordBatch, iter_batches


class OffsetsStore(Protocol):
    def append(self, partition: int, batch: bytes) -> int:
        """Append one record batch to partition ``partition``; returns its base offset."""
        ...

    def read_batches(self, partition: int) -> Iterator[RecordBatch]:
        """Every batch of the partition from its start, in offset order."""
        ...


class InMemoryOffsetsStore:
    """A list of batches per partition, offsets assigned like a log would."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[bytes]] = {}
        self.next_offsets: dict[int, int] = {}
        self.fail_appends = False

    def append(self, partition: int, batch: bytes) -> int:
        if self.fail_appends:
            raise OSError("injected append failure")
        base = self.next_offsets.get(partition, 0)
        view = RecordBatch(bytearray(batch))
        view.set_base_offset(base)
        self.partitions.setdefault(partition, []).append(bytes(view.buf))
        self.next_offsets[partition] = base + view.last_offset_delta + 1
        return base

    def read_batches(self, partition: int) -> Iterator[RecordBatch]:
        for data in self.partitions.get(partition, []):
            yield from iter_batches(data)
