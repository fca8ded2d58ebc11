"""The import rules of the two new packages: ``tidelog.metrics`` imports nothing of ours but
the native core, itself a leaf (so ``storage`` may import it), and only ``tidelog serve`` and the embedded broker import
``tidelog.http`` (it sits above ``server``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from import_rules import SRC
from import_rules import imported_modules as _imports

HTTP_IMPORTERS = {"cli/serve.py", "testing/embedded.py"}


def _modules(root: Path) -> list[Path]:
    """Every module under ``root``; none found fails (a moved tree must not pass unchecked)."""
    found = sorted(root.rglob("*.py"))
    assert len(found) > 1, f"no modules under {root}: the layering rule checks nothing"
    return found


def test_metrics_imports_nothing_of_ours():
    """Beside itself, only the native core: a leaf that imports nothing of ours either."""
    for path in _modules(SRC / "metrics"):
        ours = {m for m in _imports(path) if m.startswith("tidelog") and
                not m.startswith(("tidelog.metrics", "tidelog._native"))}  # fmt: skip
        assert ours == set(), path
    native = sorted((SRC / "_native").glob("*.py"))
    assert native, "no native core package: the rule checks nothing"
    for path in native:
        ours = {m for m in _imports(path) if m.startswith("tidelog") and
                not m.startswith("tidelog._native")}  # fmt: skip
        assert ours == set(), path


def test_only_serve_and_the_embedded_broker_import_http():
    assert _modules(SRC / "http")
    for path in _modules(SRC):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("http/"):
            continue
        imports_http = any(m.startswith("tidelog.http") for m in _imports(path))
        # the allowed importers do import it (a stale list would allow nothing real)
        assert imports_http == (rel in HTTP_IMPORTERS), rel
