"""Kafka's text checkpoint files and the clean-shutdown marker (reference §1.13).

Format (UTF-8, ``\\n``-separated)::

    <version>
    <entryCount>
    <entry line>*

Writes go to ``<file>.tmp``, are fsynced, renamed over the target, and the directory is
fsynced, so a crash leaves either the old or the new file, never a torn one. Reads are strict
(Kafka's CheckpointFile.read): an empty file or one without a count line is empty; a wrong
version, a malformed line, or an entry count that differs from the declared one raises
``CorruptCheckpointError`` naming the file, the line number and its byte offset.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from tidelog.storage.errors import KafkaStorageError
from tidelog.util.topic_partition import TopicPartition

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
OFFSET_CHECKPOINT_VERSION = 0

T = TypeVar("T")


class CorruptCheckpointError(KafkaStorageError):
    """A checkpoint file that cannot be parsed; ``path``/``line`` locate the problem.

    A KafkaStorageError because Kafka's failure-handling wrapper turns the IOException into
    one; callers that can rebuild the data (recovery points) catch it and fall back.
    """

    def __init__(self, path: Path, reason: str, line: int = 0, byte_offset: int = 0) -> None:
        self.path = path
        self.line = line
        self.byte_offset = byte_offset
        where = f" line {line} (byte {byte_offset})" if line else ""
        super().__init__(f"Corrupt checkpoint file {path}{where}: {reason}")


class EntryFormatter(Protocol[T]):
    """Turns one entry into one line and back; ``from_line`` returns None if malformed."""

    def to_line(self, entry: T) -> str: ...

    def from_line(self, line: str) -> T | None: ...


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename/create/delete inside it survives a crash."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """``<path>.tmp`` + fsync + rename over ``path`` + directory fsync."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _parse_int(text: str) -> int | None:
    text = text.strip()
    if not text or not text.lstrip("-").isdigit():
        return None
    return int(text)


class CheckpointFile(Generic[T]):
    """A versioned list of entries in Kafka's checkpoint text format."""

    def __init__(self, path: Path, version: int, formatter: EntryFormatter[T]) -> None:
        self.path = Path(path)
        self.version = version
        self.formatter = formatter
        self._lock = threading.Lock()

    def write(self, entries: Iterable[T]) -> None:
        items = list(entries)
        lines = [str(self.version), str(len(items))]
        lines.extend(self.formatter.to_line(e) for e in items)
        with self._lock:
            write_atomically(self.path, ("\n".join(lines) + "\n").encode("utf-8"))

    def read(self) -> list[T]:
        """Entries in file order; a missing file reads as empty (nothing checkpointed yet)."""
        with self._lock:
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                return []
            except OSError as exc:
                raise CorruptCheckpointError(self.path, f"cannot read: {exc}") from exc
        return self._parse(raw)

    def _decode(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            start = raw.rfind(b"\n", 0, exc.start) + 1
            raise CorruptCheckpointError(
                self.path, f"invalid UTF-8 at byte {exc.start}", line, start
            ) from None

    def _parse(self, raw: bytes) -> list[T]:
        text = self._decode(raw)
        if not text:
            return []
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()  # the newline that ends the last line
        offsets = [0]
        for ln in lines:
            offsets.append(offsets[-1] + len(ln.encode("utf-8")) + 1)
        version = _parse_int(lines[0])
        if version is None:
            raise CorruptCheckpointError(self.path, f"malformed version {lines[0]!r}", 1, 0)
        if version != self.version:
            raise CorruptCheckpointError(
                self.path, f"unrecognised version {version}, expected {self.version}", 1, 0
            )
        if len(lines) < 2:
            return []  # Kafka: no count line reads as an empty checkpoint
        expected = _parse_int(lines[1])
        if expected is None or expected < 0:
            raise CorruptCheckpointError(
                self.path, f"malformed entry count {lines[1]!r}", 2, offsets[1]
            )
        entries: list[T] = []
        for i, ln in enumerate(lines[2:], start=2):
            entry = self.formatter.from_line(ln)
            if entry is None:
                raise CorruptCheckpointError(self.path, f"malformed line {ln!r}", i + 1, offsets[i])
            entries.append(entry)
        if len(entries) != expected:
            raise CorruptCheckpointError(
                self.path,
                f"expected {expected} entries but found {len(entries)}",
                len(lines),
                offsets[len(lines) - 1],
            )
        return entries


class OffsetEntryFormatter:
    """``<topic> <partition> <offset>`` (whitespace-separated, exactly three fields)."""

    def to_line(self, entry: tuple[TopicPartition, int]) -> str:
        tp, offset = entry
        return f"{tp.topic} {tp.partition} {offset}"

    def from_line(self, line: str) -> tuple[TopicPartition, int] | None:
        fields = line.split()
        if len(fields) != 3:
            return None
        partition, offset = _parse_int(fields[1]), _parse_int(fields[2])
        if partition is None or offset is None or partition < 0:
            return None
        return TopicPartition(fields[0], partition), offset


class OffsetCheckpointFile:
    """Kafka's OffsetCheckpointFile: one offset per partition, version 0."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file: CheckpointFile[tuple[TopicPartition, int]] = CheckpointFile(
            self.path, OFFSET_CHECKPOINT_VERSION, OffsetEntryFormatter()
        )

    def write(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._file.write(sorted(offsets.items()))

    def read(self) -> dict[TopicPartition, int]:
        result: dict[TopicPartition, int] = {}
        for tp, offset in self._file.read():
            result[tp] = offset
        return result


class CleanShutdownFile:
    """The ``.kafka_cleanshutdown`` marker: ``{"version":0,"brokerEpoch":N}``, fsynced."""

    VERSION = 0

    def __init__(self, log_dir: Path) -> None:
        self.path = Path(log_dir) / CLEAN_SHUTDOWN_FILE

    def exists(self) -> bool:
        return self.path.exists()

    def write(self, broker_epoch: int = -1) -> None:
        body = json.dumps({"version": self.VERSION, "brokerEpoch": broker_epoch})
        write_atomically(self.path, body.encode("utf-8"))

    def read_broker_epoch(self) -> int:
        """The recorded broker epoch, or -1 if the marker is missing or unreadable."""
        try:
            data = json.loads(self.path.read_bytes())
            epoch = data.get("brokerEpoch", -1) if isinstance(data, dict) else -1
            return epoch if isinstance(epoch, int) else -1
        except (OSError, ValueError):
            return -1

    def delete(self) -> bool:
        """Remove the marker (and fsync the dir so the removal itself is durable)."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        fsync_dir(self.path.parent)
        return True
