"""Orphan files of the topic tables: files under a table's location that no kept snapshot and
no kept metadata file references, older than a safety age, are deleted (Iceberg's
``DeleteOrphanFiles`` / Spark's ``remove_orphan_files``, whose ``older_than`` defaults to 3
days: the broker's ``iceberg.orphan.files.older.than.ms``). They are what commits that failed
or were lost leave: the data files, manifests and manifest list of a broker killed between
writing them and the catalog's commit (when its pending marker is gone with its log dir, or
the broker never comes back), the metadata file a catalog wrote for a commit it then refused.

What is reachable is read from the table as loaded *after* the listing, and the commit uuids
of this broker's commits in flight (their pending markers) are taken after the listing too:
a file the listing saw was written before it, so its commit was either still in flight then
(its marker names it: kept), or done (then the table read after names the file, or the
commit failed and the file is an orphan). A commit's new metadata file is named by its
version, not by its commit uuid: while a commit of this broker is in flight, the metadata
files of versions after the loaded table's are kept (one may be the commit's, written before
the catalog points at it); a refused commit's goes at a pass with none in flight. Another
broker's commit in flight is protected by the age alone, as in Iceberg.

pyiceberg has no orphan-file removal; the listing is pyarrow's file system of the table's
FileIO (local or ``s3://``). Manifest lists and manifests never change once written, so
what each lists is read once and kept between runs (:class:`Reachable`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field

from pyarrow.fs import FileSelector, FileSystem, FileType
from pyiceberg.io import FileIO
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import ManifestFile
from pyiceberg.table import Table

log = logging.getLogger(__name__)

OLDER_THAN_MS_DEFAULT = 3 * 86_400_000  # Iceberg's remove-orphan-files default
KEPT_NAMES = frozenset({"version-hint.text"})  # a Hadoop catalog's pointer: never an orphan


def path_key(location: str) -> str:
    """A file's location as pyarrow's file system names it (``/dir/f`` or ``bucket/key``)."""
    return PyArrowFileIO.parse_location(location)[2]


@dataclass
class Reachable:
    """The files a table's snapshots and metadata reference, manifests read once."""

    lists: dict[str, tuple[ManifestFile, ...]] = field(default_factory=dict)
    manifests: dict[str, frozenset[str]] = field(default_factory=dict)

    def files(self, table: Table) -> set[str]:
        """Every file the table references (``path_key`` form): metadata files (current and
        logged), statistics files, and per snapshot its manifest list, manifests and the data
        and delete files they list (deleted entries too: never too few)."""
        meta = table.metadata
        out = {path_key(table.metadata_location)}
        out.update(path_key(e.metadata_file) for e in meta.metadata_log)
        out.update(path_key(s.statistics_path) for s in meta.statistics)
        out.update(path_key(s.statistics_path) for s in meta.partition_statistics)
        lists: dict[str, tuple[ManifestFile, ...]] = {}
        manifests: dict[str, frozenset[str]] = {}
        for snapshot in table.snapshots():
            listed = self.lists.get(snapshot.manifest_list)
            if listed is None:
                listed = tuple(snapshot.manifests(table.io))
            lists[snapshot.manifest_list] = listed
            out.add(path_key(snapshot.manifest_list))
            for m in listed:
                entries = manifests.get(m.manifest_path) or self.manifests.get(m.manifest_path)
                if entries is None:
                    entries = frozenset(path_key(e.data_file.file_path) for e in
                                        m.fetch_manifest_entry(table.io, discard_deleted=False))
                manifests[m.manifest_path] = entries
                out.add(path_key(m.manifest_path))
                out |= entries
        self.lists, self.manifests = lists, manifests  # only what this table still lists
        return out


@dataclass(frozen=True)
class Listed:
    path: str  # path_key form
    mtime_ms: int


def file_system(table: Table) -> tuple[FileSystem, str] | None:
    """pyarrow's file system of the table's location and the location's path in it (None:
    the table's FileIO is not pyarrow's)."""
    return location_file_system(table.io, table.location())


def location_file_system(io: FileIO, location: str) -> tuple[FileSystem, str] | None:
    if not isinstance(io, PyArrowFileIO):
        return None
    scheme, netloc, path = io.parse_location(location)
    return io.fs_by_scheme(scheme, netloc), path.rstrip("/")


def named_with(fs: FileSystem, root: str, commit_uuid: str) -> list[str]:
    """The files under ``root`` whose names carry ``commit_uuid``."""
    return [f.path for f in list_files(fs, root) if commit_uuid in f.path.rsplit("/", 1)[-1]]


def list_files(fs: FileSystem, root: str) -> Iterator[Listed]:
    """Every file under ``root`` (none when it does not exist)."""
    for info in fs.get_file_info(FileSelector(root, recursive=True, allow_not_found=True)):
        if info.type == FileType.File and info.base_name not in KEPT_NAMES:
            mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
            yield Listed(info.path, mtime)


def delete(fs: FileSystem, paths: Collection[str]) -> int:
    removed = 0
    for path in paths:
        try:
            fs.delete_file(path)
            removed += 1
        except FileNotFoundError:
            pass
    return removed


def files_of_commit(table: Table, commit_uuid: str, reachable: Reachable) -> int:
    """Delete the files named with ``commit_uuid`` (a commit's data files, manifests and
    manifest list carry it) under the table's location that the table does not reference."""
    found = file_system(table)
    if found is None:
        return 0
    fs, root = found
    named = named_with(fs, root, commit_uuid)
    if not named:
        return 0
    keep = reachable.files(table)
    return delete(fs, [p for p in named if p not in keep])


def remove_orphan_files(table: Table, load: Callable[[], Table | None], now_ms: int,
                        older_than_ms: int, in_flight: Callable[[], Collection[str]],
                        reachable: Reachable) -> int:
    """Delete the files under ``table``'s location older than ``older_than_ms`` at ``now_ms``
    that the table (``load``-ed again after the listing) does not reference and whose names
    carry no commit uuid of ``in_flight`` (taken after the listing)."""
    found = file_system(table)
    if found is None:
        log.warning("%s: orphan files not removed (no pyarrow FileIO)", ".".join(table.name()))
        return 0
    fs, root = found
    cutoff = now_ms - older_than_ms
    old = [f.path for f in list_files(fs, root) if f.mtime_ms < cutoff]
    if not old:
        return 0
    busy = tuple(in_flight())
    current = load()
    if current is None or path_key(current.location()).rstrip("/") != root:
        return 0  # dropped, or moved: nothing is known to be an orphan
    keep = reachable.files(current)
    newest = metadata_version(current.metadata_location) if busy else None
    doomed = [p for p in old if p not in keep
              and not any(u in p.rsplit("/", 1)[-1] for u in busy)
              and not _after(p, newest)]
    removed = delete(fs, doomed)
    if removed:
        log.info("%s: removed %d orphan files (older than %d ms)", ".".join(table.name()),
                 removed, older_than_ms)
    return removed


def metadata_version(location: str) -> int | None:
    """The version of a metadata file (``00005-<uuid>.metadata.json``: 5), None for any
    other file."""
    name = location.rsplit("/", 1)[-1]
    head = name.split("-", 1)[0]
    if not name.endswith(".metadata.json") or not head.isdigit():
        return None
    return int(head)


def _after(path: str, version: int | None) -> bool:
    """Whether ``path`` is a metadata file of a version after ``version`` (None: never)."""
    found = metadata_version(path)
    return version is not None and found is not None and found > version
