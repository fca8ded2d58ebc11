"""The import rules of the ZooKeeper package: only ``server/zk/`` imports kazoo, and the
folders ``controller``, ``metadata``, ``security`` and ``zk`` reach each other one way only
at run time (imports under ``if TYPE_CHECKING:`` do not run)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
SERVER = SRC / "tidelog" / "server"
FOLDERS = ("controller", "metadata", "security", "zk")


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in (SRC / "tidelog").rglob("*.py")}


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _runtime_imports(path: Path) -> set[str]:
    """Every module an import statement names (module level and in functions), except
    under ``if TYPE_CHECKING:``."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for stmt in child.orelse:
                    visit(stmt)
                continue
            if isinstance(child, ast.Import):
                out.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*up, *([child.module] if child.module else [])])
                out.add(base)
                out.update(f"{base}.{a.name}" for a in child.names)
            visit(child)

    visit(ast.parse(path.read_text()))
    return out


def _ours(name: str, importer: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    if not name or name == importer or importer.startswith(name + "."):
        return None  # not ours, itself, or a package it is inside (initialised first)
    return name


GRAPH = {n: {m for i in _runtime_imports(p) if (m := _ours(i, n))} for n, p in MODULES.items()}


def _folder(module: str) -> str | None:
    for f in FOLDERS:
        if module.startswith(f"tidelog.server.{f}.") or module == f"tidelog.server.{f}":
            return f
    return None


def _reaches(folder: str) -> set[str]:
    """The folders of FOLDERS that ``folder``'s modules reach at run time, through any
    module (a path through ``server/*.py`` counts)."""
    todo = [n for n in GRAPH if _folder(n) == folder]
    seen = set(todo)
    while todo:
        for m in GRAPH[todo.pop()]:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return {f for n in seen if (f := _folder(n)) is not None} - {folder}


def test_only_the_zk_package_imports_kazoo() -> None:
    importers = {p.relative_to(SERVER.parent).as_posix() for n, p in MODULES.items()
                 if any(i == "kazoo" or i.startswith("kazoo.") for i in _runtime_imports(p))}
    assert importers and all(i.startswith("server/zk/") for i in importers), importers


def test_controller_metadata_security_and_zk_form_no_import_loop() -> None:
    reach = {f: _reaches(f) for f in FOLDERS}
    loops = {(a, b) for a in FOLDERS for b in reach[a] if a in reach[b] and a < b}
    assert loops == set(), reach
    assert "zk" in reach["controller"]  # the check sees real arrows: controller -> zk
