"""kafka-python's own integration suite (from its PyPI sdist) against a real ``tidelog serve``,
through compat/kafka_python/run.py; every test passes except those allowlisted with a reason
in compat/kafka_python/allowlist.py and explained in compat/FINDINGS.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "compat"


def test_every_allowlisted_test_is_explained() -> None:
    sys.path.insert(0, str(COMPAT / "kafka_python"))
    try:
        from allowlist import SKIP, XFAIL
    finally:
        sys.path.pop(0)
    findings = (COMPAT / "FINDINGS.md").read_text()
    missing = [name for name in [*SKIP, *XFAIL] if f"`{name}`" not in findings]
    assert not missing, f"allowlisted without a FINDINGS.md entry: {missing}"


def test_kafka_python_integration_suite() -> None:
    proc = subprocess.run(
        [sys.executable, str(COMPAT / "kafka_python" / "run.py")],
        capture_output=True, text=True, timeout=600, check=False,
    )
    tail = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout, tail
