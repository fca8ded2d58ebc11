"""kafka-python's own integration suite (from its PyPI sdist) against a real ``tidelog serve``,
through compat/kafka_python/run.py; every test passes except those allowlisted with a reason
in compat/kafka_python/allowlist.py and explained in compat/FINDINGS.md, and the run passes
at least as many tests, and skips no more, than FINDINGS.md records ("1 passed, 66 skipped"
is not a green run)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

from tidelog.testing.processes import kill_group, spawn

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "compat"
# FINDINGS.md's record of the last full run, e.g. "kafka-python 3.0.12 against tidelog: 54
# passed (...), 13 skipped (...), no expected failure"
RECORD = re.compile(r"kafka-python (\S+) against tidelog: (\d+) passed\b.*?, (\d+)\s+skipped\b",
                    re.S)


def _allowlist() -> tuple[dict[str, str], dict[str, tuple[str, bool]]]:
    """SKIP and XFAIL, with RERUN's entries among the first for the FINDINGS.md check."""
    sys.path.insert(0, str(COMPAT / "kafka_python"))
    try:
        from allowlist import RERUN, SKIP, XFAIL
    finally:
        sys.path.pop(0)
    return {**SKIP, **RERUN}, XFAIL


def _recorded() -> tuple[str, int, int]:
    m = RECORD.search((COMPAT / "FINDINGS.md").read_text())
    assert m, "compat/FINDINGS.md no longer records the run's counts"
    return m.group(1), int(m.group(2)), int(m.group(3))


def test_every_allowlisted_test_is_explained() -> None:
    skip, xfail = _allowlist()
    findings = (COMPAT / "FINDINGS.md").read_text()
    missing = [name for name in [*skip, *xfail] if f"`{name}`" not in findings]
    assert not missing, f"allowlisted without a FINDINGS.md entry: {missing}"


def test_findings_record_the_installed_release() -> None:
    """The counts below are only comparable on the release FINDINGS.md measured."""
    assert _recorded()[0] == version("kafka-python")


def test_kafka_python_integration_suite(tmp_path: Path) -> None:
    _, passed, skipped = _recorded()
    _, xfail = _allowlist()
    report = tmp_path / "report.json"
    # run.py (its broker, the suite) in its own process group, killed whatever ends the wait;
    # its deadline inside pytest-timeout's 300 s (the run takes 20-50 s)
    proc = spawn([sys.executable, str(COMPAT / "kafka_python" / "run.py")],
                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                 env={**os.environ, "TIDELOG_COMPAT_REPORT": str(report)})  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        kill_group(proc)
    tail = out[-6000:]
    assert proc.returncode == 0, tail
    got = json.loads(report.read_text())
    assert got["unmatched_allowlist"] == [], tail
    assert got.get("failed", 0) == got.get("error", 0) == got.get("xpassed", 0) == 0, got
    assert got.get("xfailed", 0) <= len(xfail), got
    assert got.get("passed", 0) >= passed, f"fewer passed than FINDINGS.md records: {got}"
    assert got.get("skipped", 0) <= skipped, f"more skipped than FINDINGS.md records: {got}"


def _plugin_run(tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """pytest with the plugin on ``tmp_path``'s test_suite.py and allowlist.py; the run and
    its report's path."""
    report = tmp_path / "report.json"
    env = {**os.environ, "TIDELOG_COMPAT_REPORT": str(report),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(COMPAT / "kafka_python")])}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tidelog_compat_plugin", "-p", "no:cacheprovider",
         "-o", "addopts=", "-q", "test_suite.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    return proc, report


def test_an_allowlist_entry_that_matches_no_test_fails_the_run(tmp_path: Path) -> None:
    """The plugin on a run whose allowlist names a test that no longer exists."""
    (tmp_path / "allowlist.py").write_text(
        'SKIP = {"test_gone": "renamed upstream", "test_here": "skipped"}\nXFAIL = {}\n'
        'CLUSTER_SKIP = {}\nRERUN = {}\n')
    (tmp_path / "test_suite.py").write_text("def test_here():\n    pass\n\n"
                                            "def test_other():\n    pass\n")
    proc, report = _plugin_run(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "match no test" in proc.stdout and "test_gone" in proc.stdout, proc.stdout
    got = json.loads(report.read_text())
    assert (got["unmatched_allowlist"], got["passed"], got["skipped"]) == (["test_gone"], 1, 1)


def test_a_rerun_entry_runs_its_test_again_once(tmp_path: Path) -> None:
    """The plugin on a run whose RERUN entry names a parametrized test that fails the first
    time of each parametrization and one that always fails: the first passes on its rerun,
    the second fails the run after exactly one rerun."""
    (tmp_path / "allowlist.py").write_text(
        'SKIP = {}\nXFAIL = {}\nCLUSTER_SKIP = {}\n'
        'RERUN = {"test_races": "fails once", "test_broken": "fails always"}\n')
    (tmp_path / "test_suite.py").write_text(
        "import pathlib, pytest\n\n"
        "@pytest.mark.parametrize('n', [1, 2])\n"
        "def test_races(n):\n"
        "    mark = pathlib.Path(__file__).parent / f'ran-{n}'\n"
        "    if not mark.exists():\n"
        "        mark.write_text('')\n"
        "        raise AssertionError('the race')\n\n"
        "def test_broken():\n"
        "    raise AssertionError('not a race')\n")
    proc, report = _plugin_run(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    got = json.loads(report.read_text())
    assert (got["unmatched_allowlist"], got["passed"], got["failed"], got["rerun"]) == (
        [], 2, 1, 3), got
