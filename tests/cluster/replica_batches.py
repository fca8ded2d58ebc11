"""What a failed fault run leaves for its diagnosis: the batch headers, on every replica, of
the records the checker found duplicated, moved or out of order (producer id, epoch, base
sequence, offsets and leader epoch of each batch that holds one), so that a duplicate's two
copies can be told apart (the same producer id, epoch and sequence twice: an idempotent retry
the leader did not recognise; another epoch or sequence: the client sent it again); and,
with a directory to keep them in, a copy of those partitions' files on every broker."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from tidelog.records import iter_batches


def batches_holding(directory: Path, values: set[bytes]) -> list[str]:
    """One line per batch of the partition directory's segments that holds one of
    ``values``: its header fields and the values of ``values`` it holds."""
    out = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        for batch in iter_batches(data):
            if batch.is_control:
                continue
            held = [r.value for r in batch.iter_records() if r.value in values]
            if held:
                out.append(
                    f"offsets {batch.base_offset}-{batch.last_offset} leader epoch "
                    f"{batch.partition_leader_epoch} producer {batch.producer_id} epoch "
                    f"{batch.producer_epoch} sequence {batch.base_sequence}-"
                    f"{batch.last_sequence} max timestamp {batch.max_timestamp}: "
                    f"{sorted(v.decode() for v in held if v is not None)}")  # fmt: skip
    return out


def report_replicas(replica_dir: Callable[[int, int], Path], brokers: Iterable[int],
                    suspects: dict[int, set[bytes]], keep_in: Path | None) -> None:
    """Prints, for each partition of ``suspects`` (partition -> values), the batches holding
    them on every broker (``replica_dir(broker, partition)``); with ``keep_in``, copies each
    replica's directory under ``keep_in/broker-<id>/``."""
    for partition, values in sorted(suspects.items()):
        for broker in brokers:
            d = replica_dir(broker, partition)
            if not d.exists():
                print(f"partition {partition} on broker {broker}: no replica")
                continue
            for line in batches_holding(d, values):
                print(f"partition {partition} on broker {broker}: {line}")
            if keep_in is not None:
                shutil.copytree(d, keep_in / f"broker-{broker}" / d.name, dirs_exist_ok=True)
