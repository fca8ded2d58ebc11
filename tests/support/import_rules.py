"""What a module of ours imports, read from its source (the layering tests' one reader)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tidelog"


def imported_modules(path: Path) -> set[str]:
    """Every module an import statement of ``path`` names, relative imports resolved."""
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
