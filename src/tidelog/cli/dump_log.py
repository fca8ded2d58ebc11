"""`tidelog dump-log`: the counterpart of kafka-dump-log.sh for .log/.index/.timeindex files.

Corrupt input prints what is readable, then the error with file and byte position, and the
command exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tidelog.records import CorruptRecordError, RecordBatch, RecordError, iter_batches
from tidelog.records.batch import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MIN_LENGTH_FIELD
from tidelog.storage.checkpoints import OffsetCheckpointFile
from tidelog.storage.errors import StorageError
from tidelog.storage.producer_state import read_snapshot

OFFSET_CHECKPOINTS = frozenset({
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
    "replication-offset-checkpoint",
})


TXN_DECODER = "transaction"  # ``decode`` value of --transaction-log-decoder


@dataclass
class DumpResult:
    path: str
    items: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("dump-log", help="print the contents of .log/.index/.timeindex/.txnindex files")
    p.add_argument("paths", nargs="*", help="segment files to dump")
    p.add_argument("--files", default="", help="comma-separated files (kafka-dump-log style)")
    p.add_argument("--deep-iteration", action="store_true", help="decode every record")
    p.add_argument("--print-data-log", action="store_true", help="print keys and values (implies --deep-iteration)")
    p.add_argument("--verify-index-only", action="store_true", help="only report index entries that do not match the log")
    p.add_argument("--offsets-decoder", action="store_true",
                   help="decode __consumer_offsets records (implies --deep-iteration)")
    p.add_argument("--transaction-log-decoder", action="store_true",
                   help="decode __transaction_state records (implies --deep-iteration)")
    p.add_argument("--json", action="store_true", help="one JSON document per file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    paths = list(args.paths) + [f for f in args.files.split(",") if f]
    if not paths:
        print("dump-log: no files given", file=sys.stderr)
        return 2
    deep = (args.deep_iteration or args.print_data_log or args.offsets_decoder
            or args.transaction_log_decoder)
    failed = False
    for p in paths:
        result = dump_file(Path(p), deep=deep, print_data=args.print_data_log,
                           verify_only=args.verify_index_only,
                           offsets_decoder=args.offsets_decoder,
                           txn_decoder=args.transaction_log_decoder)
        emit(result, sys.stdout, as_json=args.json)
        failed |= bool(result.errors)
    return 1 if failed else 0


def dump_file(
    path: Path,
    *,
    deep: bool,
    print_data: bool,
    verify_only: bool,
    offsets_decoder: bool = False,
    txn_decoder: bool = False,
) -> DumpResult:
    result = DumpResult(str(path))
    if not path.exists():
        result.errors.append(f"{path}: no such file")
        return result
    name = path.name
    try:
        if name.endswith(".log"):
            decode: bool | str = TXN_DECODER if txn_decoder else offsets_decoder
            _dump_log(path, result, deep=deep, print_data=print_data, decode=decode)
        elif name.endswith(".index"):
            _dump_index(path, result, entry_size=8, verify_only=verify_only)
        elif name.endswith(".timeindex"):
            _dump_index(path, result, entry_size=12, verify_only=verify_only)
        elif name.endswith(".snapshot"):
            _dump_snapshot(path, result)
        elif name.endswith(".txnindex"):
            from tidelog.cli.txn_decoder import txn_index_items

            items, errors = txn_index_items(path)
            result.items.extend(items)
            result.errors.extend(errors)
        elif name in OFFSET_CHECKPOINTS:
            _dump_checkpoint(path, result)
        else:
            result.errors.append(
                f"{path}: unsupported file type (expected .log, .index, .timeindex, .snapshot, .txnindex "
                f"or one of {', '.join(sorted(OFFSET_CHECKPOINTS))})"
            )
    except (OSError, StorageError) as e:
        result.errors.append(f"{path}: {e}" if str(path) not in str(e) else str(e))
    return result


def _map(path: Path) -> memoryview:
    size = path.stat().st_size
    if size == 0:
        return memoryview(b"")
    with open(path, "rb") as f:
        return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))


def _batch_info(batch: RecordBatch) -> dict[str, Any]:
    ts_type = "LogAppendTime" if batch.timestamp_type == 1 else "CreateTime"
    return {
        "baseOffset": batch.base_offset,
        "lastOffset": batch.last_offset,
        "count": batch.records_count,
        "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "isTransactional": batch.is_transactional,
        "isControl": batch.is_control,
        "deleteHorizonMs": batch.delete_horizon_ms,
        "position": batch.position,
        ts_type: batch.max_timestamp,
        "size": batch.size_in_bytes,
        "magic": batch.magic,
        "compresscodec": batch.compression.label,
        "crc": batch.crc,
        "isvalid": batch.is_valid(),
    }


def _record_infos(batch: RecordBatch, print_data: bool,
                  decode: bool | str) -> list[dict[str, Any]]:
    out = []
    for r in batch.iter_records():
        info: dict[str, Any] = {
            "offset": r.offset,
            "timestamp": r.timestamp,
            "keySize": -1 if r.key is None else len(r.key),
            "valueSize": -1 if r.value is None else len(r.value),
            "sequence": r.sequence,
            "headerKeys": [k for k, _ in r.headers],
        }
        if batch.is_control and r.key is not None and len(r.key) >= 4:
            ctype = struct.unpack_from(">h", r.key, 2)[0]
            info["controlType"] = {0: "ABORT", 1: "COMMIT"}.get(ctype, str(ctype))
        if decode == TXN_DECODER and not batch.is_control:
            from tidelog.cli.txn_decoder import decode_transaction_record

            info["decoded"] = decode_transaction_record(r.key, r.value)
        elif decode and not batch.is_control:
            info["decoded"] = _decode_offsets_record(r.key, r.value)
        if print_data:
            info["key"] = None if r.key is None else r.key.decode("utf-8", "replace")
            info["payload"] = None if r.value is None else r.value.decode("utf-8", "replace")
        out.append(info)
    return out


def _decode_offsets_record(key: bytes | None, value: bytes | None) -> str:
    from tidelog.server.coordinator.group.consumer.records import (
        format_offsets_record as format_record,
    )

    try:
        return format_record(key, value)
    except Exception as e:  # a foreign record in the topic: say so, keep dumping
        return f"<not a __consumer_offsets record: {e}>"


def _dump_snapshot(path: Path, result: DumpResult) -> None:
    for e in read_snapshot(path):
        result.items.append({
            "producerId": e.producer_id,
            "producerEpoch": e.producer_epoch,
            "coordinatorEpoch": e.coordinator_epoch,
            "currentTxnFirstOffset": e.current_txn_first_offset,
            "lastTimestamp": e.last_timestamp,
            "firstSequence": e.first_seq,
            "lastSequence": e.last_seq,
            "lastOffset": e.last_data_offset,
            "offsetDelta": e.last_offset_delta,
        })


def _dump_checkpoint(path: Path, result: DumpResult) -> None:
    for tp, offset in OffsetCheckpointFile(path).read().items():
        result.items.append({"topic": tp.topic, "partition": tp.partition, "offset": offset})


def _dump_log(
    path: Path, result: DumpResult, *, deep: bool, print_data: bool, decode: bool | str = False
) -> None:
    from tidelog.cli.progress import Progress

    buf = _map(path)
    valid_bytes = 0
    progress = Progress(f"Reading {path.name}", len(buf), unit="MB")
    try:
        for batch in iter_batches(buf, path=str(path), validate=False):
            progress.update(batch.position)
            info = _batch_info(batch)
            if not info["isvalid"]:
                result.errors.append(
                    f"{path}: CRC mismatch in batch at byte {batch.position} "
                    f"(offsets {batch.base_offset}..{batch.last_offset})"
                )
            elif deep:
                try:
                    info["records"] = _record_infos(batch, print_data, decode)
                except RecordError as e:
                    result.errors.append(f"{path}: invalid record in batch at byte {batch.position}: {e}")
            result.items.append(info)
            valid_bytes = batch.position + batch.size_in_bytes
    except CorruptRecordError as e:
        result.errors.append(str(e))
        return
    finally:
        progress.close()
    trailing = len(buf) - valid_bytes
    if trailing > 0:
        result.errors.append(
            f"{path}: found {trailing} invalid bytes at the end of the file, from byte {valid_bytes}"
            + _partial_hint(buf, valid_bytes)
        )


def _partial_hint(buf: memoryview, pos: int) -> str:
    if len(buf) - pos <= HEADER_SIZE_UP_TO_MAGIC:
        return " (a partial batch header)"
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    if length >= MIN_LENGTH_FIELD:
        return f" (a partial batch: {len(buf) - pos} of {length + LOG_OVERHEAD} bytes)"
    return ""


def _index_entries(buf: memoryview, entry_size: int) -> Iterator[tuple[int, int, int]]:
    """(slot, key, value): offset index → (rel offset, position); time index → (ts, rel offset)."""
    fmt = ">ii" if entry_size == 8 else ">qi"
    for slot in range(len(buf) // entry_size):
        a, b = struct.unpack_from(fmt, buf, slot * entry_size)
        yield slot, a, b


def _dump_index(path: Path, result: DumpResult, *, entry_size: int, verify_only: bool) -> None:
    stem = path.name.split(".", 1)[0]
    # a remote segment's object adds "-<segment id>" (tiered storage's object keys)
    offset_part = stem.split("-", 1)[0]
    if not offset_part.isdigit():
        # entries hold offsets relative to the base offset that only the name carries
        result.errors.append(
            f"{path}: the file name must be the segment's base offset "
            f"(e.g. 00000000000000000000{path.suffix}, or a remote segment's "
            f"00000000000000000000-<segment id>{path.suffix}), got '{stem}'"
        )
        return
    base = int(offset_part)
    buf = _map(path)
    if len(buf) % entry_size:
        result.errors.append(
            f"{path}: size {len(buf)} is not a multiple of the entry size {entry_size}"
        )
    log_path = path.with_name(path.name.split(".", 1)[0] + ".log")
    batches = _batches_by_last_offset(log_path) if log_path.exists() else None
    last_key = None
    for slot, a, b in _index_entries(buf, entry_size):
        if slot > 0 and a == 0 and b == 0:
            break  # preallocated, unused tail
        if entry_size == 8:
            entry = {"offset": base + a, "position": b}
            problem = _check_offset_entry(entry, batches, last_key)
            last_key = entry["offset"]
        else:
            entry = {"timestamp": a, "offset": base + b}
            problem = _check_time_entry(entry, batches, last_key)
            last_key = entry["timestamp"]
        item: dict[str, Any] = dict(entry)
        if problem:
            result.errors.append(f"{path}: entry {slot} at byte {slot * entry_size}: {problem}")
            item["mismatch"] = problem
        if not verify_only or problem:
            result.items.append(item)


def _batches_by_last_offset(log_path: Path) -> dict[str, dict[int, RecordBatch]] | None:
    by_pos: dict[int, RecordBatch] = {}
    by_last: dict[int, RecordBatch] = {}
    try:
        for batch in iter_batches(_map(log_path), validate=False):
            by_pos[batch.position] = batch
            by_last[batch.last_offset] = batch
    except CorruptRecordError:
        pass  # verify against the readable prefix
    return {"pos": by_pos, "last": by_last}


def _check_offset_entry(entry: dict[str, int], batches: Any, last: int | None) -> str | None:
    if last is not None and entry["offset"] <= last:
        return f"offset {entry['offset']} is not above the previous entry's {last}"
    if batches is None:
        return None
    batch = batches["pos"].get(entry["position"])
    if batch is None:
        return f"no batch starts at log position {entry['position']}"
    if batch.last_offset != entry["offset"]:
        return f"index offset {entry['offset']}, log offset {batch.last_offset}"
    return None


def _check_time_entry(entry: dict[str, int], batches: Any, last: int | None) -> str | None:
    if last is not None and entry["timestamp"] < last:
        return f"timestamp {entry['timestamp']} is below the previous entry's {last}"
    if batches is None:
        return None
    for lo, batch in batches["last"].items():
        if batch.base_offset <= entry["offset"] <= lo:
            if batch.max_timestamp != entry["timestamp"]:
                return (f"index timestamp {entry['timestamp']}, log max timestamp "
                        f"{batch.max_timestamp} for offset {entry['offset']}")
            return None
    return f"offset {entry['offset']} is not in the log"


def emit(result: DumpResult, out: TextIO, *, as_json: bool) -> None:
    if as_json:
        out.write(json.dumps({"file": result.path, "entries": result.items,
                              "errors": result.errors}) + "\n")
    else:
        out.write(f"Dumping {result.path}\n")
        for item in result.items:
            records = item.pop("records", None)
            out.write(" ".join(f"{k}: {_fmt(v)}" for k, v in item.items()) + "\n")
            for rec in records or []:
                out.write("| " + " ".join(f"{k}: {_fmt(v)}" for k, v in rec.items()) + "\n")
    out.flush()
    for err in result.errors:
        print(f"ERROR: {err}", file=sys.stderr)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


def write_demo_segment(directory: Path) -> Path:
    """A small segment for the README's first command (no broker needed)."""
    from tidelog.records import CompressionType, RecordBatchBuilder

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{0:020d}.log"
    with open(path, "wb") as f:
        offset = 0
        for i, codec in enumerate(CompressionType):
            b = RecordBatchBuilder(codec, base_offset=offset)
            for j in range(3):
                b.append(1_700_000_000_000 + i * 10 + j, f"key-{offset + j}".encode(),
                         f"hello from {codec.label} #{j}".encode(), [("source", b"demo")])
            f.write(b.build())
            offset += 3
        os.fsync(f.fileno())
    return path
