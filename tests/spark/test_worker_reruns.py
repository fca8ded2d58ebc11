"""The rerun rule for Spark's Python-worker connect-back timeout (session_support.py) on a
synthetic suite: only that failure of a test that uses the SparkSession runs again, twice at
most."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

CONFTEST = f'''
import sys
import pytest
sys.path.insert(0, {str(HERE)!r})
from session_support import rerun_when_a_worker_did_not_connect_back

@pytest.fixture
def spark():
    return object()

def pytest_collection_modifyitems(items):
    rerun_when_a_worker_did_not_connect_back(items, delay_s=0)
    rerun_when_a_worker_did_not_connect_back(items, delay_s=0)  # a second call changes nothing
'''

SUITE = '''
import pathlib

WORKER = "Query terminated with exception: Python worker failed to connect back."

def first_times(name, n=1):
    """True the first ``n`` times it is asked for ``name`` (counted in a file)."""
    mark = pathlib.Path(__file__).parent / ("ran-" + name)
    runs = len(mark.read_text()) if mark.exists() else 0
    mark.write_text("x" * (runs + 1))
    return runs < n

def test_worker_late_once(spark):
    if first_times("late_once"):
        raise RuntimeError(WORKER)

def test_worker_late_twice(spark):
    if first_times("late_twice", 2):
        raise RuntimeError(WORKER)

def test_worker_late_always(spark):
    raise RuntimeError(WORKER)

def test_other_failure(spark):
    if first_times("other"):
        raise AssertionError("a wrong answer")

def test_worker_late_without_spark():
    if first_times("no_spark"):
        raise RuntimeError(WORKER)
'''


def test_only_a_late_worker_of_a_spark_test_runs_again_twice_at_most(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_suite.py").write_text(SUITE)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
         "-o", "addopts=", "-q", "-rA", "test_suite.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    outcome = {m[1]: m[0] for m in re.findall(r"^(PASSED|FAILED|RERUN)\S* test_suite.py::(\w+)",
                                              proc.stdout, re.M)}
    assert outcome == {"test_worker_late_once": "PASSED", "test_worker_late_twice": "PASSED",
                       "test_worker_late_always": "FAILED",
                       "test_other_failure": "FAILED",
                       "test_worker_late_without_spark": "FAILED"}, out
    # late once: 1 rerun; late twice: 2; always late: 2, then it fails
    assert re.search(r"^3 failed, 2 passed, 5 rerun", proc.stdout.splitlines()[-1]), out
