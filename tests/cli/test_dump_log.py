"""`tidelog dump-log` run as a real subprocess over real files."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

from tidelog.records import CompressionType, RecordBatchBuilder


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidelog.cli.main", *args], capture_output=True, text=True, timeout=60
    )


def write_segment(path: Path, batches: int = 4) -> list[tuple[int, int, int]]:
    """Returns (base offset, last offset, position) per batch."""
    out, pos, offset = [], 0, 0
    with open(path, "wb") as f:
        for i in range(batches):
            b = RecordBatchBuilder(CompressionType(i % 5), base_offset=offset)
            for j in range(3):
                b.append(1000 * i + j, f"k{offset + j}".encode(), f"v{offset + j}".encode())
            data = b.build()
            f.write(data)
            out.append((offset, offset + 2, pos))
            pos += len(data)
            offset += 3
    return out


def test_dump_log_json_lists_every_batch_and_record(tmp_path: Path) -> None:
    seg = tmp_path / f"{0:020d}.log"
    layout = write_segment(seg)
    r = run_cli("dump-log", "--json", "--print-data-log", str(seg))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(e["baseOffset"], e["lastOffset"], e["position"]) for e in doc["entries"]] == layout
    keys = [rec["key"] for e in doc["entries"] for rec in e["records"]]
    assert keys == [f"k{i}" for i in range(12)]
    assert all(e["isvalid"] for e in doc["entries"])


def test_corrupt_log_prints_readable_part_then_fails_with_position(tmp_path: Path) -> None:
    seg = tmp_path / f"{0:020d}.log"
    layout = write_segment(seg)
    data = bytearray(seg.read_bytes())
    bad_pos = layout[2][2]
    data[bad_pos + 70] ^= 0xFF  # inside the third batch: CRC mismatch
    data += b"\x00" * 30  # trailing zeros: length field 0 is corrupt
    seg.write_bytes(bytes(data))
    r = run_cli("dump-log", str(seg))
    assert r.returncode == 1
    assert r.stdout.count("baseOffset:") == 4  # all four still readable
    assert "isvalid: false" in r.stdout
    assert f"at byte {bad_pos}" in r.stderr
    assert f"at byte {len(data) - 30}" in r.stderr and str(seg) in r.stderr


def test_partial_trailing_batch_is_reported(tmp_path: Path) -> None:
    seg = tmp_path / f"{0:020d}.log"
    write_segment(seg, batches=2)
    whole = seg.read_bytes()
    seg.write_bytes(whole + whole[:40])
    r = run_cli("dump-log", str(seg))
    assert r.returncode == 1
    assert "40 invalid bytes" in r.stderr and "partial batch" in r.stderr


def test_verify_index_only_reports_mismatches(tmp_path: Path) -> None:
    seg = tmp_path / f"{0:020d}.log"
    layout = write_segment(seg)
    index = tmp_path / f"{0:020d}.index"
    good = [(last, pos) for _b, last, pos in layout[1:3]]
    bad = (layout[3][1] - 1, layout[3][2])  # wrong offset for that position
    index.write_bytes(b"".join(struct.pack(">ii", o, p) for o, p in [*good, bad]) + bytes(16))
    r = run_cli("dump-log", "--verify-index-only", "--json", str(index))
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert [e["offset"] for e in doc["entries"]] == [bad[0]]
    assert "entry 2 at byte 16" in r.stderr
    ok = run_cli("dump-log", "--json", str(index.with_name(index.name)))
    assert [e["offset"] for e in json.loads(ok.stdout)["entries"]][:2] == [g[0] for g in good]


def test_time_index_entries(tmp_path: Path) -> None:
    seg = tmp_path / f"{0:020d}.log"
    layout = write_segment(seg)
    tindex = tmp_path / f"{0:020d}.timeindex"
    entries = [(1002, layout[1][0] + 2 - 3), (2002, layout[2][1])]
    tindex.write_bytes(b"".join(struct.pack(">qi", t, o) for t, o in entries))
    r = run_cli("dump-log", "--json", str(tindex))
    doc = json.loads(r.stdout)
    assert [(e["timestamp"], e["offset"]) for e in doc["entries"]] == entries
    assert r.returncode == 1  # 1002 is not the max timestamp of the batch holding offset 2
    assert "log max timestamp 2" in r.stderr


def test_missing_file_is_an_error(tmp_path: Path) -> None:
    r = run_cli("dump-log", str(tmp_path / "nope.log"))
    assert r.returncode == 1 and "no such file" in r.stderr


def test_snapshot_and_checkpoint_files(tmp_path: Path) -> None:
    from collections import deque

    from tidelog.storage.checkpoints import OffsetCheckpointFile
    from tidelog.storage.producer_state import BatchMetadata, ProducerStateEntry, write_snapshot
    from tidelog.util.topic_partition import TopicPartition

    snap = tmp_path / f"{42:020d}.snapshot"
    entry = ProducerStateEntry(7, 3, deque([BatchMetadata(9, 41, 4, 1234)]), 5, 1234, None)
    write_snapshot(snap, [entry])
    ckpt = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(ckpt).write({TopicPartition("a", 0): 10, TopicPartition("b", 3): 7})
    r = run_cli("dump-log", "--json", str(snap), str(ckpt))
    assert r.returncode == 0, r.stderr
    snap_doc, ckpt_doc = (json.loads(line) for line in r.stdout.splitlines())
    (e,) = snap_doc["entries"]
    assert (e["producerId"], e["producerEpoch"], e["firstSequence"], e["lastSequence"]) == (7, 3, 5, 9)
    assert (e["lastOffset"], e["offsetDelta"], e["coordinatorEpoch"]) == (41, 4, 5)
    assert [(x["topic"], x["partition"], x["offset"]) for x in ckpt_doc["entries"]] == [
        ("a", 0, 10), ("b", 3, 7)]
    data = bytearray(snap.read_bytes())
    data[-1] ^= 1
    snap.write_bytes(bytes(data))
    bad = run_cli("dump-log", str(snap))
    assert bad.returncode == 1 and "CRC" in bad.stderr and str(snap) in bad.stderr


def test_offsets_decoder(tmp_path: Path) -> None:
    from tidelog.server.coordinator.group import records as gr

    seg = tmp_path / f"{0:020d}.log"
    b = RecordBatchBuilder()
    b.append(5, gr.encode_offset_key("g1", "orders", 2),
             gr.encode_offset_value(gr.OffsetAndMetadata(offset=77, leader_epoch=-1, metadata="",
                                                         commit_timestamp=5, expire_timestamp=None)))
    b.append(6, gr.encode_offset_key("g1", "orders", 3), None)
    seg.write_bytes(b.build())
    r = run_cli("dump-log", "--offsets-decoder", str(seg))
    assert r.returncode == 0, r.stderr
    assert "offset_commit::group=g1,topic=orders,partition=2 => offset=77" in r.stdout
    assert "partition=3 => <tombstone>" in r.stdout


def test_index_whose_name_is_not_an_offset_is_one_error_line(tmp_path: Path) -> None:
    f = tmp_path / "abc.index"
    f.write_bytes(bytes(16))
    r = run_cli("dump-log", str(f))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "the file name must be the segment's base offset" in r.stderr and "'abc'" in r.stderr


def test_progress_line_at_a_terminal_only(tmp_path: Path) -> None:
    import pexpect

    seg = tmp_path / "00000000000000000000.log"
    write_segment(seg, batches=50)
    child = pexpect.spawn(
        sys.executable, ["-m", "tidelog.cli.main", "dump-log", str(seg)], encoding="utf-8"
    )
    child.expect(r"Reading 00000000000000000000\.log: 0\.0 / 0\.0 MB \(0%\)")
    child.expect("baseOffset: 0 ")  # the progress line was erased, then the output came
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    piped = run_cli("dump-log", str(seg))
    assert "Reading" not in piped.stderr + piped.stdout and piped.returncode == 0
