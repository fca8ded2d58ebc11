"""Iceberg topics' place in the layers: a package above ``server`` and ``schema_registry``
that only ``tidelog serve`` and the embedded broker start; storage and server never import
it; the package root loads no optional library; the partition is read through one module."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from import_rules import SRC
from import_rules import imported_modules as _imports

STARTERS = {"cli/serve.py", "testing/embedded.py"}


def test_only_the_starters_import_iceberg() -> None:
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("iceberg/") or rel in STARTERS:
            continue
        found = {m for m in _imports(path) if m.startswith("tidelog.iceberg")}
        assert not found, (rel, found)


def test_the_package_root_loads_no_optional_library() -> None:
    ours = _imports(SRC / "iceberg" / "__init__.py")
    assert ours <= {"tidelog.config.core", "tidelog.config.iceberg_config",
                    "tidelog.server.broker", "tidelog.iceberg.service", "__future__",
                    "importlib", "typing"}


def test_one_module_reads_the_partition() -> None:
    """Only log_source.py knows the broker's partitions (ReplicaManager, Partition, Log)."""
    for path in (SRC / "iceberg").glob("*.py"):
        found = {m for m in _imports(path) if m.startswith(("tidelog.server", "tidelog.storage"))}
        if path.name == "log_source.py":
            continue
        assert found <= {"tidelog.server.broker"}, (path.name, found)


def test_the_table_side_holds_nothing_of_the_log() -> None:
    """What runs in the translation worker process (the table side) imports nothing of the
    log side: the broker's partitions are read in the broker's process only."""
    for name in ("table_writer.py", "worker.py", "rows.py", "tables.py", "file_ranges.py"):
        found = {m for m in _imports(SRC / "iceberg" / name)
                 if m.startswith(("tidelog.server", "tidelog.storage"))
                 or m in {"tidelog.iceberg.log_source", "tidelog.iceberg.translator",
                          "tidelog.iceberg.service"}}
        assert not found, (name, found)
