"""The topic tables in the catalog: created with the topic's partition spec, evolved with
``union_by_name`` (new optional columns, nothing rewritten), appended to in one Iceberg commit
per flush whose snapshot summary carries the next offset of every partition the table holds
(``tidelog.offsets``) and the leader epoch that wrote it (``tidelog.leader.epochs``).

A commit is fenced: it goes in only if, in the snapshot it is based on, each of its partitions
is exactly where this flush started (and no newer leader epoch wrote it); the catalog's own
optimistic check (the metadata location it was based on) makes that atomic. So nothing is
committed twice and nothing skipped, even with a deposed leader still flushing.

A commit's data files carry its commit uuid in their names (pyiceberg's writer names them
so). Before writing, a marker naming the uuid is left in ``<dir>/pending``; after the commit
(or its failure) the marker goes. A failed commit's files are deleted at once; a marker found
at start-up (the broker died mid-commit) has its files deleted unless a snapshot names it."""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from pyiceberg.types import DoubleType, FloatType, IntegerType, LongType

from tidelog.config.iceberg_config import SpecField, parse_partition_spec

from .data_files import data_files
from .transaction import FlushTransaction

log = logging.getLogger(__name__)

OFFSETS = "tidelog.offsets"
# pyiceberg retries a commit that lost a race by re-basing the append on the newer snapshot,
# with this flush's summary: offsets computed from the older one. The tables say no retries,
# so a lost race fails the commit (its requirement on the branch's snapshot) instead.
RETRIES = "commit.retry.num-retries"
NO_REBASE = {RETRIES: "0"}
EPOCHS = "tidelog.leader.epochs"
COMMIT_UUID = "tidelog.commit.uuid"


class Fenced(Exception):
    """The table moved on without this flush (another leader committed these partitions)."""


@dataclass(frozen=True)
class TableOffsets:
    offsets: dict[int, int]  # partition -> next offset to commit
    epochs: dict[int, int]  # partition -> leader epoch of the last commit


def table_offsets(snapshot: Snapshot | None) -> TableOffsets:
    if snapshot is None or snapshot.summary is None:
        return TableOffsets({}, {})
    offsets = json.loads(snapshot.summary[OFFSETS] or "{}")
    epochs = json.loads(snapshot.summary[EPOCHS] or "{}")
    return TableOffsets({int(p): int(o) for p, o in offsets.items()},
                        {int(p): int(e) for p, e in epochs.items()})


def _transform(f: SpecField) -> Transform[Any, Any]:
    simple: dict[str, Transform[Any, Any]] = {"identity": IdentityTransform(), "year": YearTransform(),
              "month": MonthTransform(), "day": DayTransform(), "hour": HourTransform(),
              "void": VoidTransform()}
    if f.transform == "bucket":
        return BucketTransform(num_buckets=f.width or 1)
    if f.transform == "truncate":
        return TruncateTransform(width=f.width or 1)
    return simple[f.transform]


def partition_spec(schema: Schema, text: str) -> PartitionSpec:
    """The topic's ``tidelog.iceberg.partition.spec`` over ``schema``; a column the schema
    lacks leaves the table unpartitioned (with a warning), as records must still land."""
    fields = []
    for i, f in enumerate(parse_partition_spec(text)):
        try:
            source = schema.find_field(f.column)
        except ValueError:
            log.warning("partition spec %s names %s, which the table lacks: unpartitioned",
                        text, f.column)
            return UNPARTITIONED_PARTITION_SPEC
        name = f.column.replace(".", "_") + ("" if f.transform == "identity" else
                                             f"_{f.transform}")
        fields.append(PartitionField(source_id=source.field_id, field_id=1000 + i,
                                     transform=_transform(f), name=name))
    return PartitionSpec(*fields)


class Tables:
    def __init__(self, catalog: Catalog, namespace: str, pending_dir: Path) -> None:
        self.catalog = catalog
        self.namespace = namespace
        self.pending_dir = pending_dir
        pending_dir.mkdir(parents=True, exist_ok=True)
        catalog.create_namespace_if_not_exists(namespace)

    def identifier(self, name: str) -> str:
        return f"{self.namespace}.{name}"

    def load(self, name: str) -> Table | None:
        try:
            return self.catalog.load_table(self.identifier(name))
        except NoSuchTableError:
            return None

    def create(self, name: str, schema: Schema, spec_text: str) -> Table:
        return self.catalog.create_table_if_not_exists(
            self.identifier(name), schema, partition_spec=partition_spec(schema, spec_text),
            properties=NO_REBASE)

    def drop(self, name: str) -> None:
        try:
            self.catalog.drop_table(self.identifier(name))
        except NoSuchTableError:
            pass

    @staticmethod
    def evolve(table: Table, schema: Schema) -> Table:
        """The table with every column of ``schema`` (added as optional columns, widened where
        Iceberg allows); raises when the table cannot take it."""
        if _covers(table.schema(), schema):
            return table
        with table.update_schema() as update:
            update.union_by_name(schema)
        return table

    def commit(self, table: Table, data: pa.Table, starts: Mapping[int, int],
               ends: Mapping[int, int], epochs: Mapping[int, int]) -> Table:
        """Append ``data`` as one snapshot moving each partition from ``starts`` to ``ends``."""
        if table.properties.get(RETRIES) != "0":
            table = table.transaction().set_properties(NO_REBASE).commit_transaction()
        txn = FlushTransaction(table)
        base = table_offsets(txn.table_metadata.current_snapshot())
        for p, start in starts.items():
            have = base.offsets.get(p)
            if (have is not None and have != start) or base.epochs.get(p, -1) > epochs[p]:
                raise Fenced(f"partition {p}: table at {have} (epoch {base.epochs.get(p)}), "
                             f"this flush started at {start} (epoch {epochs[p]})")
        props = {OFFSETS: json.dumps({str(p): o for p, o in {**base.offsets, **ends}.items()}),
                 EPOCHS: json.dumps({str(p): e for p, e in {**base.epochs, **epochs}.items()})}
        commit_uuid = uuid.uuid4()
        props[COMMIT_UUID] = str(commit_uuid)
        marker = self._mark(table, commit_uuid)
        try:
            with txn.update_snapshot(snapshot_properties=props).fast_append() as append:
                append.commit_uuid = commit_uuid
                if data.num_rows:
                    for data_file in data_files(txn.table_metadata, data, table.io,
                                                commit_uuid):
                        append.append_data_file(data_file)
            committed = txn.commit_transaction()
        except BaseException:
            remove_files_of(table.location(), str(commit_uuid))
            marker.unlink(missing_ok=True)
            raise
        marker.unlink(missing_ok=True)
        return committed

    def _mark(self, table: Table, commit_uuid: uuid.UUID) -> Path:
        marker = self.pending_dir / f"{commit_uuid}.json"
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(json.dumps({"table": ".".join(table.name()),
                                   "location": table.location()}))
        os.replace(tmp, marker)
        return marker

    def clean_pending(self) -> int:
        """Files of commits a crash interrupted: deleted unless a snapshot names them."""
        removed = 0
        for marker in sorted(self.pending_dir.glob("*.json")):
            commit_uuid = marker.stem
            try:
                info = json.loads(marker.read_text())
                table = self.catalog.load_table(info["table"])
            except NoSuchTableError:
                table = None
            except (OSError, ValueError, KeyError):
                marker.unlink(missing_ok=True)
                continue
            committed = table is not None and any(
                s.summary is not None and s.summary[COMMIT_UUID] == commit_uuid
                for s in table.snapshots())
            if not committed:
                removed += remove_files_of(info["location"], commit_uuid)
            marker.unlink(missing_ok=True)
        return removed


_WIDER = {(IntegerType(), LongType()), (FloatType(), DoubleType())}


def _covers(have: Schema, want: Schema) -> bool:
    """Whether ``have`` already holds every column (nested ones too) of ``want``, each leaf
    with the same type or one it widens to."""
    for name in want._name_to_id:
        try:
            have_type = have.find_field(name).field_type
        except ValueError:
            return False
        want_type = want.find_field(name).field_type
        if want_type.is_primitive and want_type != have_type and (
                (want_type, have_type) not in _WIDER):
            return False
    return True


def remove_files_of(location: str, commit_uuid: str) -> int:
    """Delete the files named with ``commit_uuid`` under a local table location (data files,
    manifests, manifest list); an object-store location is left to Iceberg's orphan-file
    maintenance."""
    parts = urlsplit(location)
    if parts.scheme not in ("", "file"):
        return 0
    root = Path(parts.path)
    removed = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if commit_uuid in f:
                try:
                    os.unlink(os.path.join(dirpath, f))
                    removed += 1
                except FileNotFoundError:
                    pass
    return removed
