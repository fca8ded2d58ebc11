"""Checkpoint files: Kafka's text format, atomic writes, strict reads (reference §1.13)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tidelog.storage.checkpoints import (
    CheckpointFile,
    CleanShutdownFile,
    CorruptCheckpointError,
    OffsetCheckpointFile,
)
from tidelog.storage.errors import KafkaStorageError
from tidelog.util.topic_partition import TopicPartition

TP_A = TopicPartition("foo", 0)
TP_B = TopicPartition("bar.baz-x", 12)


def test_offset_checkpoint_exact_bytes(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    cp.write({TP_A: 42, TP_B: 7})
    # Kafka's layout: version, count, "topic partition offset" lines, trailing newline.
    assert cp.path.read_bytes() == b"0\n2\nbar.baz-x 12 7\nfoo 0 42\n"
    assert cp.read() == {TP_A: 42, TP_B: 7}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_round_trip_many_and_overwrite(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    offsets = {TopicPartition(f"t{i % 7}", i): i * 1000 + 3 for i in range(200)}
    cp.write(offsets)
    assert cp.read() == offsets
    cp.write({TP_A: 1})
    assert cp.read() == {TP_A: 1}
    cp.write({})
    assert cp.path.read_bytes() == b"0\n0\n"
    assert cp.read() == {}


def test_missing_and_empty_file_read_as_empty(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    assert cp.read() == {}
    assert not cp.path.exists()  # reading never creates the file
    cp.path.write_bytes(b"")
    assert cp.read() == {}
    cp.path.write_bytes(b"0\n")  # no count line
    assert cp.read() == {}


def test_reads_kafka_written_file_with_extra_whitespace(tmp_path: Path) -> None:
    p = tmp_path / "cp"
    p.write_bytes(b"0\n2\nfoo 0 5\nfoo  1\t9\n")
    assert OffsetCheckpointFile(p).read() == {TP_A: 5, TopicPartition("foo", 1): 9}


@pytest.mark.parametrize(
    ("content", "line", "byte", "reason"),
    [
        (b"1\n1\nfoo 0 5\n", 1, 0, "unrecognised version 1"),
        (b"zero\n1\nfoo 0 5\n", 1, 0, "malformed version"),
        (b"0\nx\nfoo 0 5\n", 2, 2, "malformed entry count"),
        (b"0\n2\nfoo 0 5\nfoo 1\n", 4, 12, "malformed line 'foo 1'"),
        (b"0\n2\nfoo 0 5\nfoo 1 five\n", 4, 12, "malformed line"),
        (b"0\n1\nfoo x 5\n", 3, 4, "malformed line"),
        (b"0\n1\nfoo 0 5 6\n", 3, 4, "malformed line"),
        (b"0\n3\nfoo 0 5\nfoo 1 6\n", 4, 12, "expected 3 entries but found 2"),
        (b"0\n1\nfoo 0 5\nfoo 1 6\n", 4, 12, "expected 1 entries but found 2"),
        (b"0\n2\nfoo 0 5\nfo", 4, 12, "malformed line 'fo'"),  # torn tail
        (b"0\n1\nfoo 0 5\n\n", 4, 12, "malformed line ''"),
    ],
)
def test_strict_read_names_file_and_line(
    tmp_path: Path, content: bytes, line: int, byte: int, reason: str
) -> None:
    p = tmp_path / "log-start-offset-checkpoint"
    p.write_bytes(content)
    with pytest.raises(CorruptCheckpointError) as info:
        OffsetCheckpointFile(p).read()
    err = info.value
    assert isinstance(err, KafkaStorageError)
    assert err.kafka_error == "KAFKA_STORAGE_ERROR"
    assert (err.line, err.byte_offset) == (line, byte)
    assert str(p) in str(err)
    assert f"line {line} (byte {byte})" in str(err)
    assert reason in str(err)


def test_invalid_utf8_names_byte(tmp_path: Path) -> None:
    p = tmp_path / "cp"
    p.write_bytes(b"0\n1\nf\xffo 0 5\n")
    with pytest.raises(CorruptCheckpointError, match=r"line 3 \(byte 4\): invalid UTF-8 at byte 5"):
        OffsetCheckpointFile(p).read()


def test_stale_tmp_file_is_ignored_and_replaced(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    cp.write({TP_A: 1})
    # A crash between creating the tmp file and the rename leaves garbage in .tmp only.
    (tmp_path / "cp.tmp").write_bytes(b"garbage")
    assert cp.read() == {TP_A: 1}
    cp.write({TP_A: 2})
    assert cp.read() == {TP_A: 2}
    assert not (tmp_path / "cp.tmp").exists()


class _EpochFormatter:
    def to_line(self, entry: tuple[int, int]) -> str:
        return f"{entry[0]} {entry[1]}"

    def from_line(self, line: str) -> tuple[int, int] | None:
        parts = line.split()
        if len(parts) != 2 or not all(p.isdigit() for p in parts):
            return None
        return int(parts[0]), int(parts[1])


def test_generic_checkpoint_file_keeps_order(tmp_path: Path) -> None:
    cp: CheckpointFile[tuple[int, int]] = CheckpointFile(
        tmp_path / "leader-epoch-checkpoint", 0, _EpochFormatter()
    )
    cp.write([(2, 6), (3, 8), (4, 11)])
    assert cp.path.read_text() == "0\n3\n2 6\n3 8\n4 11\n"
    assert cp.read() == [(2, 6), (3, 8), (4, 11)]


def test_clean_shutdown_marker(tmp_path: Path) -> None:
    marker = CleanShutdownFile(tmp_path)
    assert not marker.exists()
    assert marker.read_broker_epoch() == -1
    marker.write(3)
    assert marker.path.name == ".kafka_cleanshutdown"
    assert json.loads(marker.path.read_bytes()) == {"version": 0, "brokerEpoch": 3}
    assert marker.read_broker_epoch() == 3
    assert marker.delete() is True
    assert not marker.exists()
    assert marker.delete() is False
    marker.path.write_bytes(b"{not json")
    assert marker.read_broker_epoch() == -1


def test_unreadable_file_raises_storage_error(tmp_path: Path) -> None:
    p = tmp_path / "cp"
    p.mkdir()  # a directory where the file should be: reading fails with an OSError
    with pytest.raises(CorruptCheckpointError, match="cannot read"):
        OffsetCheckpointFile(p).read()
    assert os.path.isdir(p)
