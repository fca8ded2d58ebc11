"""The commit of a flush over a table's life: the time of ``Tables.commit`` (one flush of a
few rows into a topic's table in the embedded SQLite catalog) at the first flushes and after
N flushes, for table settings side by side in one run:

- ``none``: no maintenance (metadata files kept, no manifest merging, no snapshot expiry);
- ``metadata``: ``write.metadata.delete-after-commit.enabled`` (old metadata files deleted);
- ``merge``: that and ``commit.manifest-merge.enabled`` (tidelog's defaults);
- ``expire``: that and snapshot expiry every ``--expire-every`` flushes, with a clock moved
  so that all but the newest ``--keep`` snapshots are past ``history.expire.max-snapshot-age-ms``.

Each setting runs with each catalog of ``--catalogs``, in turn: ``pyiceberg`` (pyiceberg's
SqlCatalog, whose commit loads the table again) and ``in-hand`` (the broker's, which commits
from the table in hand on a write-ahead-log database: iceberg/catalog.py).

Printed per setting and catalog: the median commit time (wall, and CPU of the process) of
flushes 2-11 and of the last ten, the
metadata files left in the table's metadata directory, and the snapshots in the metadata.

    .venv/bin/python bench/iceberg_maintenance.py [--flushes 500] [--rows 100]
        [--settings none,metadata,merge,expire] [--catalogs pyiceberg,in-hand]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import TableProperties

from tidelog.iceberg.catalog import InHandSqlCatalog
from tidelog.iceberg.columns import table_schema
from tidelog.iceberg.maintenance import expire_snapshots
from tidelog.iceberg.tables import Tables

SETTINGS = {
    "none": {TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "false",
             TableProperties.MANIFEST_MERGE_ENABLED: "false"},
    "metadata": {TableProperties.MANIFEST_MERGE_ENABLED: "false"},
    "merge": {},
    "expire": {},
}
CATALOGS: dict[str, type[SqlCatalog]] = {"pyiceberg": SqlCatalog, "in-hand": InHandSqlCatalog}


def rows(table_arrow: pa.Schema, partition: int, start: int, n: int) -> pa.Table:
    now = int(time.time() * 1000)
    kafka = [{"partition": partition, "offset": start + i, "timestamp": now * 1000,
              "headers": [], "key": b"k%d" % i} for i in range(n)]
    return pa.Table.from_pylist([{"kafka": k, "value": b"v" * 50} for k in kafka],
                                schema=table_arrow)


def run(name: str, flushes: int, n: int, expire_every: int, keep: int,
        catalog_class: type[SqlCatalog] = SqlCatalog) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        home = Path(tmp)
        catalog = catalog_class("tidelog", uri=f"sqlite:///{home}/catalog.db",
                                warehouse=f"file://{home}/warehouse")
        tables = Tables(catalog, "kafka", home / "pending")
        table = tables.create("t", table_schema(None), "(hour(kafka.timestamp))")
        props = dict(SETTINGS[name])
        if name == "expire":
            props[TableProperties.MIN_SNAPSHOTS_TO_KEEP] = str(keep)
        with table.transaction() as txn:
            txn.set_properties(props)
        table = tables.load("t")
        assert table is not None
        arrow = table.schema().as_arrow()
        took: list[float] = []
        cpu: list[float] = []
        offset = 0
        for i in range(flushes):
            data = rows(arrow, 0, offset, n)
            t0, c0 = time.perf_counter(), time.process_time()
            table = tables.commit(table, data, {0: offset} if i else {}, {0: offset + n},
                                  {0: 0})
            took.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            offset += n
            if name == "expire" and (i + 1) % expire_every == 0:
                expire_snapshots(table, int(time.time() * 1000) + 6 * 86_400_000)
                table = tables.load("t")
                assert table is not None
        meta = Path(table.location().removeprefix("file://")) / "metadata"
        return {"first": statistics.median(took[1:11]), "last": statistics.median(took[-10:]),
                "cpu_first": statistics.median(cpu[1:11]),
                "cpu_last": statistics.median(cpu[-10:]),
                "json": sum(1 for f in os.listdir(meta) if f.endswith(".metadata.json")),
                "avro": sum(1 for f in os.listdir(meta) if f.endswith(".avro")),
                "snapshots": len(table.snapshots()),
                "manifests": len(table.current_snapshot().manifests(table.io))}  # type: ignore[union-attr]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flushes", type=int, default=500)
    ap.add_argument("--rows", type=int, default=100)
    ap.add_argument("--expire-every", type=int, default=50)
    ap.add_argument("--keep", type=int, default=10)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--catalogs", default=",".join(CATALOGS))
    args = ap.parse_args()
    for name in args.settings.split(","):
        for kind in args.catalogs.split(","):
            report(name, kind, run(name, args.flushes, args.rows, args.expire_every,
                                   args.keep, CATALOGS[kind]))


def report(name: str, kind: str, r: dict[str, float]) -> None:
    print(f"{name:9s} {kind:9s} commit flushes 2-11 {r['first'] * 1000:7.1f} ms, last ten "
          f"{r['last'] * 1000:7.1f} ms ({r['last'] / r['first']:.1f}x); CPU "
          f"{r['cpu_first'] * 1000:.1f} -> {r['cpu_last'] * 1000:.1f} ms; metadata json "
          f"{r['json']:.0f}, avro {r['avro']:.0f}, snapshots {r['snapshots']:.0f}, "
          f"manifests {r['manifests']:.0f}", flush=True)


if __name__ == "__main__":
    main()
