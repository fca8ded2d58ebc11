"""Table maintenance of the topic tables, with Iceberg's own table properties and defaults.

- Old metadata files: the tables tidelog creates carry
  ``write.metadata.delete-after-commit.enabled=true`` and
  ``write.metadata.previous-versions-max`` (Iceberg's default, 100); pyiceberg's commit then
  deletes each metadata file that leaves the metadata log, as Iceberg's Java commit does. A
  table's own setting of either is kept.
- Snapshot expiry: snapshots older than ``history.expire.max-snapshot-age-ms`` (default 5
  days) go, keeping at least ``history.expire.min-snapshots-to-keep`` (default 1) of the
  newest and every branch head and tag (so the current snapshot, whose summary holds the
  translator's offsets, always stays). pyiceberg's ``ExpireSnapshots`` removes them from
  the metadata; it deletes no file, so the manifest lists of the expired snapshots and the
  manifests only they listed are deleted here after the commit (Iceberg's expireSnapshots
  deletes those too). Data files are not: tidelog only appends, so a data file an expired
  snapshot holds is still in the current one; files a user's own deletes or rewrites left
  only in expired snapshots are left to Iceberg's orphan-file maintenance.
- Manifests: the tables carry ``commit.manifest-merge.enabled=true`` (Iceberg's Java default
  for appends) and flushes use pyiceberg's merge append when it is on, which rewrites the
  manifests into one once ``commit.manifest.min-count-to-merge`` (default 100) of them
  gather, so a snapshot's manifest list stays short."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from pyiceberg.catalog import delete_files
from pyiceberg.io import FileIO
from pyiceberg.table import Table, TableProperties
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.utils.properties import property_as_bool, property_as_int

log = logging.getLogger(__name__)

# What tidelog sets on the tables it creates (Iceberg's property names; the values are
# Iceberg's defaults, but for delete-after-commit (false in Iceberg) and manifest merging
# (false in pyiceberg, true for Java's appends)).
TABLE_DEFAULTS: dict[str, str] = {
    TableProperties.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true",
    TableProperties.METADATA_PREVIOUS_VERSIONS_MAX:
        str(TableProperties.METADATA_PREVIOUS_VERSIONS_MAX_DEFAULT),
    TableProperties.MANIFEST_MERGE_ENABLED: "true",
}


def missing_defaults(properties: dict[str, str]) -> dict[str, str]:
    """The maintenance properties a table lacks (a table's own setting is kept)."""
    return {k: v for k, v in TABLE_DEFAULTS.items() if k not in properties}


def merge_manifests(properties: dict[str, str]) -> bool:
    return property_as_bool(properties, TableProperties.MANIFEST_MERGE_ENABLED,
                            TableProperties.MANIFEST_MERGE_ENABLED_DEFAULT)


@dataclass(frozen=True)
class Expired:
    snapshots: int = 0
    files: int = 0  # manifest lists and manifests deleted
    orphans: int = 0  # orphan files deleted


def snapshots_to_expire(table: Table, now_ms: int) -> list[int]:
    """The ids of the snapshots older than the table's ``history.expire.max-snapshot-age-ms``
    at ``now_ms``, but for the newest ``history.expire.min-snapshots-to-keep`` and the heads
    of branches and tags."""
    props = table.properties
    max_age = property_as_int(props, TableProperties.MAX_SNAPSHOT_AGE_MS,
                              TableProperties.MAX_SNAPSHOT_AGE_MS_DEFAULT)
    keep = property_as_int(props, TableProperties.MIN_SNAPSHOTS_TO_KEEP,
                           TableProperties.MIN_SNAPSHOTS_TO_KEEP_DEFAULT)
    assert max_age is not None and keep is not None
    newest = sorted(table.snapshots(), key=lambda s: (s.timestamp_ms, s.sequence_number or 0))
    kept = {s.snapshot_id for s in newest[len(newest) - max(1, keep):]}
    kept |= {ref.snapshot_id for ref in table.metadata.refs.values()}
    return [s.snapshot_id for s in newest
            if s.timestamp_ms < now_ms - max_age and s.snapshot_id not in kept]


def expire_snapshots(table: Table, now_ms: int) -> Expired:
    """Expire the table's old snapshots (one catalog commit, none when nothing is old) and
    delete the metadata files only they referenced."""
    ids = snapshots_to_expire(table, now_ms)
    if not ids:
        return Expired()
    expired = [s for s in table.snapshots() if s.snapshot_id in set(ids)]
    linear = _linear(table)
    table.maintenance.expire_snapshots().by_ids(ids).commit()
    doomed = _only_in(table.io, expired, _listing(table, linear))
    delete_files(table.io, doomed, "metadata")
    log.info("%s: expired %d snapshots, deleted %d manifest files", ".".join(table.name()),
             len(ids), len(doomed))
    return Expired(len(ids), len(doomed))


def _line(table: Table) -> list[Snapshot]:
    """The current snapshot and its ancestors in the table, newest first."""
    by_id = {s.snapshot_id: s for s in table.snapshots()}
    line: list[Snapshot] = []
    current = table.current_snapshot()
    while current is not None and len(line) <= len(by_id):
        line.append(current)
        parent = current.parent_snapshot_id
        current = by_id.get(parent) if parent is not None else None
    return line


def _linear(table: Table) -> bool:
    """One branch and every snapshot on its line (tidelog's own tables)."""
    return len(table.metadata.refs) <= 1 and len(_line(table)) == len(table.snapshots())


def _listing(table: Table, linear: bool) -> list[Snapshot]:
    """The kept snapshots whose manifests a manifest of an expired snapshot may still be in
    (``table`` as committed). When the history was ``linear`` a manifest is listed by a run
    of consecutive snapshots, so one still listed is listed by the oldest kept snapshot:
    that one is enough (Java's incremental cleanup makes the same cut); otherwise every
    kept snapshot."""
    line = _line(table)
    return line[-1:] if linear and line else table.snapshots()


def _only_in(io: FileIO, expired: Iterable[Snapshot], retained: Iterable[Snapshot]
             ) -> set[str]:
    """The manifest lists of ``expired`` and the manifests they list that no retained
    snapshot lists."""
    keep: set[str] = set()
    for s in retained:
        keep.add(s.manifest_list)
        keep.update(m.manifest_path for m in s.manifests(io))
    doomed: set[str] = set()
    for s in expired:
        doomed.add(s.manifest_list)
        doomed.update(m.manifest_path for m in s.manifests(io))
    return doomed - keep
