"""The import rules of the two new packages: ``tidelog.metrics`` imports nothing of ours (so
``storage`` may import it), and only ``tidelog serve`` and the embedded broker import
``tidelog.http`` (it sits above ``server``)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tidelog"
HTTP_IMPORTERS = {"cli/serve.py", "testing/embedded.py"}


def _imports(path: Path) -> set[str]:
    out = set()
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                out.add(".".join([*base, node.module or ""]).rstrip("."))
            else:
                out.add(node.module or "")
    return out


def test_metrics_imports_nothing_of_ours():
    for path in (SRC / "metrics").rglob("*.py"):
        ours = {m for m in _imports(path) if m.startswith("tidelog") and
                not m.startswith("tidelog.metrics")}  # fmt: skip
        assert ours == set(), path


def test_only_serve_and_the_embedded_broker_import_http():
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("http/") or rel in HTTP_IMPORTERS:
            continue
        assert not any(m.startswith("tidelog.http") for m in _imports(path)), rel
