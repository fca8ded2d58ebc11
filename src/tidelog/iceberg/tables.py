"""The topic tables in the catalog: created with the topic's partition spec, evolved with
``union_by_name`` (new optional columns, nothing rewritten), appended to in one Iceberg commit
per flush whose snapshot summary carries the next offset of every partition the table holds
(``tidelog.offsets``) and the leader epoch that wrote it (``tidelog.leader.epochs``).

A commit is fenced: it goes in only if, in the snapshot it is based on, each of its partitions
is exactly where this flush started (and no newer leader epoch wrote it); the catalog's own
optimistic check (the metadata location it was based on) makes that atomic. So nothing is
committed twice and nothing skipped, even with a deposed leader still flushing.

A commit's data files, manifests and manifest list carry its commit uuid in their names
(pyiceberg names them so). Before writing, a marker naming the uuid is left in
``<dir>/pending``; after the commit the marker goes. A commit that certainly did not land
(it failed before the catalog was asked, or the catalog refused it) has its files deleted at
once. One whose outcome is unknown (the catalog failed while committing: a REST catalog's
5xx, a lost connection, a database error; it may have taken the commit) keeps its marker, and
so does one a crash interrupted: :meth:`Tables.clean_pending` (at start-up, before the next
commit after such a failure, and at each maintenance pass) deletes the files of such a commit that the table does not reference, by the files every
kept snapshot lists (not by the snapshot naming the commit, which expiry may have removed
while its data files are still the table's). Files no marker names any more (a broker that
never came back) are orphan-file removal's (``orphans``)."""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.io import load_file_io
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
from .maintenance import TABLE_DEFAULTS, merge_manifests, missing_defaults
from .orphans import (
    Reachable,
    delete,
    file_system,
    files_of_commit,
    location_file_system,
    named_with,
    remove_orphan_files,
)
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


def fenced_properties(base: TableOffsets, starts: Mapping[int, int], ends: Mapping[int, int],
                      epochs: Mapping[int, int]) -> dict[str, str]:
    """The snapshot properties of a commit moving each partition from ``starts`` to ``ends``
    on top of ``base``; raises ``Fenced`` when a partition of ``base`` is not where this
    flush started or a newer leader epoch wrote it."""
    for p, start in starts.items():
        have = base.offsets.get(p)
        if (have is not None and have != start) or base.epochs.get(p, -1) > epochs[p]:
            raise Fenced(f"partition {p}: table at {have} (epoch {base.epochs.get(p)}), "
                         f"this flush started at {start} (epoch {epochs[p]})")
    return {OFFSETS: json.dumps({str(p): o for p, o in {**base.offsets, **ends}.items()}),
            EPOCHS: json.dumps({str(p): e for p, e in {**base.epochs, **epochs}.items()})}


def _with_commit_settings(table: Table) -> Table:
    """``table`` with the properties a commit relies on (missing from a table created before
    them) and no rebase by the catalog client."""
    settings = missing_defaults(table.properties)
    if table.properties.get(RETRIES) != "0":
        settings.update(NO_REBASE)
    if settings:
        table = table.transaction().set_properties(settings).commit_transaction()
    return table


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
        self._lock = threading.Lock()
        self._in_flight: set[str] = set()  # commit uuids of the commits running here
        self._unknown: set[str] = set()  # commits here of unknown outcome, not yet resolved
        self.reachable: dict[str, Reachable] = {}  # table -> its manifests as read
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
            properties={**NO_REBASE, **TABLE_DEFAULTS})

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
        table = _with_commit_settings(table)
        txn = FlushTransaction(table)
        props = fenced_properties(table_offsets(txn.table_metadata.current_snapshot()),
                                  starts, ends, epochs)
        if self._unknown:  # the catalog answers again: did those land?
            self.clean_pending()
        commit_uuid = uuid.uuid4()
        props[COMMIT_UUID] = str(commit_uuid)
        marker = self._mark(table, commit_uuid)
        try:
            try:
                snapshot = txn.update_snapshot(snapshot_properties=props)
                with (snapshot.merge_append() if merge_manifests(txn.table_metadata.properties)
                      else snapshot.fast_append()) as append:
                    append.commit_uuid = commit_uuid
                    if data.num_rows:
                        for data_file in data_files(txn.table_metadata, data, table.io,
                                                    commit_uuid):
                            append.append_data_file(data_file)
            except BaseException:  # the catalog was not asked: nothing names the files
                self._discard(table, commit_uuid, marker)
                raise
            try:
                committed = txn.commit_transaction()
            except CommitFailedException:  # refused by the catalog: nothing names them
                self._discard(table, commit_uuid, marker)
                raise
            except BaseException:  # unknown: the marker stays for clean_pending
                with self._lock:
                    self._unknown.add(str(commit_uuid))
                log.warning("%s: commit %s failed with its outcome unknown; its files stay "
                            "until the table shows whether it landed", ".".join(table.name()),
                            commit_uuid)
                raise
        finally:
            with self._lock:
                self._in_flight.discard(str(commit_uuid))
        marker.unlink(missing_ok=True)
        return committed

    def remove_orphans(self, name: str, table: Table, now_ms: int, older_than_ms: int) -> int:
        """Delete the orphan files of table ``name`` (``table`` as loaded) older than
        ``older_than_ms`` (see ``orphans``)."""
        return remove_orphan_files(table, lambda: self.load(name), now_ms, older_than_ms,
                                   self.in_flight, self.reachable.setdefault(
                                       self.identifier(name), Reachable()))

    @staticmethod
    def _discard(table: Table, commit_uuid: uuid.UUID, marker: Path) -> None:
        """The files of a commit that certainly did not land (nothing references them)."""
        found = file_system(table)
        if found is not None:
            delete(found[0], named_with(*found, str(commit_uuid)))
        marker.unlink(missing_ok=True)

    def in_flight(self) -> set[str]:
        """The commit uuids whose files must stay: the commits running here and those whose
        markers are still down (interrupted, or of unknown outcome). The set is read before
        the markers: a commit that ends in between and keeps its marker is in the second."""
        with self._lock:
            running = set(self._in_flight)
        return running | {m.stem for m in self.pending_dir.glob("*.json")}

    def _mark(self, table: Table, commit_uuid: uuid.UUID) -> Path:
        with self._lock:
            self._in_flight.add(str(commit_uuid))
        marker = self.pending_dir / f"{commit_uuid}.json"
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(json.dumps({"table": ".".join(table.name()),
                                   "location": table.location()}))
        os.replace(tmp, marker)
        return marker

    def clean_pending(self) -> int:
        """Files of commits a crash interrupted or whose outcome was unknown (not those
        running now): deleted unless the table references them. A marker whose table the
        catalog cannot be asked about now stays for the next call."""
        removed = 0
        # markers first, then whether each one's commit runs: a commit is in the set before
        # its marker is written, so a marker seen whose uuid is not (or no longer) in it is
        # of a commit that is done (landed: the table loaded after names its files) or of an
        # earlier life of the broker; reading the set first would miss a commit that started
        # in between, and delete the files it is still writing
        for marker in sorted(self.pending_dir.glob("*.json")):
            commit_uuid = marker.stem
            with self._lock:
                if commit_uuid in self._in_flight:
                    continue
            try:
                info = json.loads(marker.read_text())
                name, location = str(info["table"]), str(info["location"])
            except (OSError, ValueError, KeyError):
                marker.unlink(missing_ok=True)
                continue
            try:
                removed += self._clean_commit(name, location, commit_uuid)
            except Exception as exc:  # the catalog or warehouse is away: next time
                log.warning("files of commit %s of %s not checked yet (%s: %s)", commit_uuid,
                            name, type(exc).__name__, exc)
                continue
            marker.unlink(missing_ok=True)
            with self._lock:
                self._unknown.discard(commit_uuid)
        return removed

    def _clean_commit(self, name: str, location: str, commit_uuid: str) -> int:
        try:
            table = self.catalog.load_table(name)
        except NoSuchTableError:
            table = None
        if table is not None and table.location().rstrip("/") == location.rstrip("/"):
            reachable = self.reachable.setdefault(name, Reachable())  # name: as identifier()
            return files_of_commit(table, commit_uuid, reachable)
        # the table is gone (or another now has its name): nothing references the files
        found = location_file_system(load_file_io(self.catalog.properties, location), location)
        return 0 if found is None else delete(found[0], named_with(*found, commit_uuid))


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
