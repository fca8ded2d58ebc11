"""Produce requests of large frames decoded without copying their records.

kio's reader copies each ``records`` field into a new ``bytes``: a 100 MB record then lives
twice (frame and copy), and the validator, which patches offsets in place, needs a third,
writable copy. Here the records of each partition are writable views of the frame itself, so
the frame is the only copy from the socket to the segment file. Only the connection's large
frames take this path; every field is read as kio reads it (v3-v13, flexible from v9, topic
ids from v13), and tagged fields are skipped (Produce defines none).
"""

from __future__ import annotations

import datetime
import struct
import uuid
from typing import Any

from .codec import InvalidRequestError, RequestHeader, parse_header, request_class
from .field_reader import FieldReader
from .kio_util import nested


class _Reader(FieldReader):
    error = InvalidRequestError

    def records(self) -> memoryview | None:
        return self.nullable_bytes()

    def array_len(self) -> int:
        n = super().array_len()
        if n < 0:  # Produce has no nullable arrays
            raise InvalidRequestError(f"null array at byte {self.pos}")
        return n


def decode_produce_in_place(frame: memoryview, version: int) -> tuple[RequestHeader, Any]:
    """A ProduceRequest (kio's class) whose ``records`` are writable views of ``frame``."""
    cls = request_class(0, version)
    header_version = 2 if cls.__header_schema__.__version__ >= 2 else 1
    header, pos = parse_header(frame, header_version)
    r = _Reader(frame, pos, flexible=version >= 9)
    tcls = nested(cls, "topic_data")
    pcls = nested(tcls, "partition_data")
    try:
        txn_id = r.nullable_string()
        acks = r.i16()
        timeout = datetime.timedelta(milliseconds=r.i32())
        topics = []
        for _ in range(r.array_len()):
            key: dict[str, Any] = (
                {"topic_id": uuid.UUID(bytes=bytes(r.take(16)))} if version >= 13
                else {"name": r.nullable_string()}
            )
            parts = []
            for _ in range(r.array_len()):
                index = r.i32()
                parts.append(pcls(index=index, records=r.records()))
                r.skip_tags()
            topics.append(tcls(**key, partition_data=tuple(parts)))
            r.skip_tags()
        r.skip_tags()
    except (struct.error, UnicodeDecodeError, IndexError, ValueError) as exc:
        raise InvalidRequestError(f"cannot decode ProduceRequest v{version}: {exc!r}") from exc
    request = cls(transactional_id=txn_id, acks=acks, timeout=timeout, topic_data=tuple(topics))
    return header, request
