"""The example test in docs/testing.md runs as written: each of its ``test_*`` functions is
collected here and run against a real broker with a fault plan."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def _example_tests() -> dict[str, Callable[[], None]]:
    text = DOC.read_text()
    section = text.split("### Example:", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    namespace: dict[str, object] = {"__name__": "docs_testing_example"}
    exec(compile(code, str(DOC), "exec"), namespace)
    tests = {k: v for k, v in namespace.items() if k.startswith("test_") and callable(v)}
    assert len(tests) == 2, sorted(tests)
    return tests  # type: ignore[return-value]


EXAMPLE = _example_tests()


@pytest.mark.parametrize("name", sorted(EXAMPLE))
def test_the_documented_example_passes(name: str) -> None:
    EXAMPLE[name]()
