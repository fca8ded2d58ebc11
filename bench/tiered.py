"""Tiered storage against a real S3 server (SeaweedFS's ``weed mini`` on 127.0.0.1).

Uploads: the closed segments of a real Log (tidelog.storage; 1 KiB records, ``--segment-mib``
MiB segments) copied through the RemoteStorageManager (``copy_log_segment_data``: every file
of the segment, the ``.log`` last) against a plain PUT of the same files with the same
client (obstore, one ``obstore.put`` per file), rounds interleaved (and which goes first
alternating) so the machine's load falls on both alike. Printed: MiB/s min..max of each over the rounds, and the ratio
RemoteStorageManager / plain put of each round (min, median, max).

    .venv/bin/python bench/tiered.py [--rounds 5] [--segments 4] [--segment-mib 8]

Measured (SeaweedFS on 127.0.0.1, a shared 2-core machine at load average 7-12; 4 segments,
31.8 MiB with indexes; three runs of 6 rounds): RemoteStorageManager 15.7 .. 37.3 MiB/s,
plain put 15.4 .. 35.3 MiB/s; ratio per round median 1.04 [0.60 .. 1.48], 1.00 [0.78 ..
1.19], 1.02 [0.51 .. 1.30]: the same PUTs of the same files, the manager adds nothing
measurable (the spread is the machine's).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import obstore
from obstore.store import S3Store

from tidelog.config.log_config import LogConfig
from tidelog.records import CompressionType, build_batch
from tidelog.storage.log import Log
from tidelog.storage.remote.factory import create_remote_storage_manager
from tidelog.storage.remote.metadata import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    TopicIdPartition,
)
from tidelog.storage.remote.rsm import RemoteStorageManager
from tidelog.storage.remote.storage_manager import LogSegmentData
from tidelog.testing.seaweedfs import SeaweedFS
from tidelog.util.clock import ManualClock

T0 = 1_700_000_000_000
MIB = 1 << 20


def write_segments(directory: Path, segments: int, segment_mib: int) -> list[LogSegmentData]:
    """A Log of ``segments`` closed segments of 1 KiB records (incompressible bytes)."""
    config = LogConfig.from_props({"segment.bytes": str(segment_mib * MIB)})
    log = Log.open(directory, config, clock=ManualClock(T0))
    try:
        while log.number_of_segments() <= segments:
            records = [(T0, None, os.urandom(1024)) for _ in range(64)]
            log.append_as_leader(build_batch(records, CompressionType.NONE))
        log.flush()
    finally:
        log.close()
    bases = sorted(int(p.stem) for p in directory.glob("*.log"))
    out = []
    for base, next_base in list(itertools.pairwise(bases))[:segments]:
        stem = directory / f"{base:020d}"
        txn = stem.with_suffix(".txnindex")
        out.append(LogSegmentData(stem.with_suffix(".log"), stem.with_suffix(".index"),
                                  stem.with_suffix(".timeindex"), txn if txn.exists() else None,
                                  directory / f"{next_base:020d}.snapshot", f"0\n1\n0 {base}\n".encode()))
    return out


def files_of(data: LogSegmentData) -> list[Path]:
    files = [data.offset_index, data.time_index, data.producer_snapshot_index, data.log_segment]
    return files if data.transaction_index is None else [data.transaction_index, *files]


def upload_rsm(rsm: RemoteStorageManager, tip: TopicIdPartition, segments: list[LogSegmentData]) -> None:
    for data in segments:
        base = int(data.log_segment.stem)
        md = RemoteLogSegmentMetadata(RemoteLogSegmentId.generate_new(tip), base, base, T0, 1, T0, {0: base},
                                      data.log_segment.stat().st_size)
        rsm.copy_log_segment_data(md, data)


def upload_plain(store: S3Store, prefix: str, segments: list[LogSegmentData]) -> None:
    for data in segments:
        for path in files_of(data):
            obstore.put(store, f"{prefix}{path.name}", path)
        obstore.put(store, f"{prefix}{data.log_segment.stem}.leader_epoch_checkpoint", data.leader_epoch_index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--segments", type=int, default=4)
    parser.add_argument("--segment-mib", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, SeaweedFS() as s3:
        segments = write_segments(Path(tmp) / "bench-0", args.segments, args.segment_mib)
        total = sum(p.stat().st_size for d in segments for p in files_of(d)) / MIB
        bucket = s3.create_bucket("bench")
        rsm = create_remote_storage_manager(bucket.rsm_configs)
        assert isinstance(rsm, RemoteStorageManager)
        store = S3Store("bench", endpoint=s3.endpoint_url, region=s3.region, access_key_id=s3.access_key_id,
                        secret_access_key=s3.secret_access_key, virtual_hosted_style_request=False,
                        client_options={"allow_http": True})
        tip = TopicIdPartition(uuid.uuid4(), "bench", 0)
        speeds: dict[str, list[float]] = {"RemoteStorageManager": [], "plain put": []}
        ratios = []
        for r in range(args.rounds):
            runs = {"RemoteStorageManager": lambda: upload_rsm(rsm, tip, segments),
                    "plain put": lambda r=r: upload_plain(store, f"plain/{r}/", segments)}
            took = {}
            for name in sorted(runs, reverse=r % 2 == 1):  # who goes first alternates
                t0 = time.perf_counter()
                runs[name]()
                took[name] = time.perf_counter() - t0
                speeds[name].append(total / took[name])
            ratios.append(took["plain put"] / took["RemoteStorageManager"])
        rsm.close()
    print(f"upload of {args.segments} segments ({total:.1f} MiB with indexes), {args.rounds} rounds:")
    for name, values in speeds.items():
        print(f"  {name:22s} {min(values):7.1f} .. {max(values):7.1f} MiB/s")
    print(f"  ratio RemoteStorageManager / plain put: min {min(ratios):.2f}, "
          f"median {statistics.median(ratios):.2f}, max {max(ratios):.2f}")


if __name__ == "__main__":
    main()
