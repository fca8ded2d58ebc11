"""Committed batches as byte ranges of the partition's segment files, as Kafka's readers
take them (a file, a position, a size: ``FileRecords.slice``): a flush names where its batches
are, and the table side reads them itself, straight from the file into the one buffer it
decodes. The broker's translation thread never copies the batches (nor holds the interpreter
lock for a copy); with the translation worker process, the files' descriptors are handed to
it (SCM_RIGHTS) and the bytes never pass through the broker's process at all.

A range is read after the broker looked at it, so each read is checked against what the
broker saw (the first batch's base offset, the offset past the last one, the size): a segment
truncated or replaced in between fails the flush (:class:`StaleRange`), which commits nothing
and starts again from the table, as any failed flush does."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from tidelog.records.batch import batch_views

_BASE_AND_LENGTH = struct.Struct(">qi")
_LAST_DELTA = struct.Struct(">i")  # a batch's last offset delta, at byte 23


class StaleRange(Exception):
    """A range's bytes are no longer the batches the broker read there."""


@dataclass(frozen=True)
class FileRange:
    fd: int  # an open descriptor of the segment file (in the worker: an index, then its own)
    position: int
    size: int
    base_offset: int  # of its first batch
    next_offset: int  # past its last batch


class Located(Protocol):
    """A batch where the broker saw it (the log's batch header at a file position)."""

    @property
    def position(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def base_offset(self) -> int: ...

    @property
    def next_offset(self) -> int: ...


def ranges_of(fd: int, heads: Iterable[Located]) -> list[FileRange]:
    """The ranges of consecutive batches (adjacent in the file) among ``heads``."""
    out: list[FileRange] = []
    run: list[int] = []  # the open range: position, size, base offset, next offset
    for h in heads:
        if run and run[0] + run[1] == h.position:
            run[1] += h.size
            run[3] = h.next_offset
            continue
        if run:
            out.append(FileRange(fd, *run))
        run = [h.position, h.size, h.base_offset, h.next_offset]
    if run:
        out.append(FileRange(fd, *run))
    return out


def merge(ranges: list[FileRange], more: list[FileRange]) -> None:
    """Append ``more`` to ``ranges``, the first joined to the last when they are adjacent."""
    if ranges and more:
        last, first = ranges[-1], more[0]
        if last.fd == first.fd and last.position + last.size == first.position:
            ranges[-1] = replace(last, size=last.size + first.size,
                                 next_offset=first.next_offset)
            more = more[1:]
    ranges.extend(more)


def read_ranges(ranges: list[FileRange]) -> bytearray:
    """The ranges' bytes, one after the other, read into one buffer (one copy, from the page
    cache; the interpreter lock is free while the kernel copies); each checked."""
    buf = bytearray(sum(r.size for r in ranges))
    view = memoryview(buf)
    at = 0
    for r in ranges:
        part = view[at:at + r.size]
        got = os.preadv(r.fd, [part], r.position)
        if got != r.size:
            raise StaleRange(f"{got} bytes at position {r.position}, not {r.size}: the "
                             f"segment was truncated under translation")
        check(part, r)
        at += r.size
    return buf


def check(data: memoryview, r: FileRange) -> list[memoryview]:
    """The batches of ``data``; raise StaleRange unless they are whole batches from
    ``r.base_offset`` up to ``r.next_offset``."""
    views = batch_views(data)
    first = end = None
    if views:
        first = _BASE_AND_LENGTH.unpack_from(views[0])[0]
        end = _BASE_AND_LENGTH.unpack_from(views[-1])[0] + _LAST_DELTA.unpack_from(
            views[-1], 23)[0] + 1
    size = sum(len(v) for v in views)
    if (first, end, size) != (r.base_offset, r.next_offset, r.size):
        raise StaleRange(f"batches of offsets [{first}, {end}) in {size} bytes at position "
                         f"{r.position}, not [{r.base_offset}, {r.next_offset}) in {r.size}: "
                         f"the segment changed under translation")
    return views

