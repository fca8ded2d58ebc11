"""The registry's place in the layers: a package above ``server`` that only ``tidelog serve``
and the embedded broker start; Spark reads schemas through its two pure modules (the ``_schemas`` record format and
the state built from it), which import nothing else of ours."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from import_rules import SRC
from import_rules import imported_modules as _imports

IMPORTERS = {"cli/serve.py": {"tidelog.schema_registry",
                             "tidelog.schema_registry.listener"},  # for its type
             "testing/embedded.py": {"tidelog.schema_registry",
                                     "tidelog.schema_registry.listener"},  # for its type
             "spark/avro_values.py": {"tidelog.schema_registry.records",
                                      "tidelog.schema_registry.state"},
             "spark/protobuf_values.py": {"tidelog.schema_registry.records"},
             # Iceberg topics decode values with the registry's schemas (a package above it)
             "iceberg/schemas.py": {"tidelog.schema_registry.avro_type",
                                    "tidelog.schema_registry.json_type",
                                    "tidelog.schema_registry.protobuf_type",
                                    "tidelog.schema_registry.records",
                                    "tidelog.schema_registry.registry",
                                    "tidelog.schema_registry.schema_types"},
             # ... and the translation worker process parses them itself (the broker sends
             # the stored schemas it asks for)
             "iceberg/worker.py": {"tidelog.schema_registry",
                                   "tidelog.schema_registry.records",
                                   "tidelog.schema_registry.schema_types"}}
PURE = ("records.py", "state.py")


def test_who_imports_the_registry() -> None:
    modules = sorted(SRC.rglob("*.py"))
    # a moved tree must not pass unchecked: the registry and every allowed importer are there
    assert any(p.relative_to(SRC).as_posix().startswith("schema_registry/") for p in modules)
    assert all((SRC / rel).is_file() for rel in IMPORTERS), IMPORTERS
    for path in modules:
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("schema_registry/"):
            continue
        found = {m for m in _imports(path) if m.startswith("tidelog.schema_registry")}
        assert found <= IMPORTERS.get(rel, set()), (rel, found)
        assert rel not in IMPORTERS or found, f"{rel} no longer imports the registry"


def test_the_pure_modules_import_only_each_other() -> None:
    for name in PURE:
        ours = {m for m in _imports(SRC / "schema_registry" / name) if m.startswith("tidelog")}
        assert ours <= {"tidelog.schema_registry.records"}, (name, ours)


def test_the_package_root_loads_no_optional_library() -> None:
    ours = _imports(SRC / "schema_registry" / "__init__.py")
    assert ours <= {"tidelog.config.core", "tidelog.server.broker",
                    "tidelog.schema_registry.listener", "__future__", "importlib", "typing"}
