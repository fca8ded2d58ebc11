"""kafka-python's own integration suite (from its PyPI sdist) against ZooKeeper and three
``tidelog serve`` processes, through ``compat/kafka_python/run.py --brokers 3``: held to the
one-broker run's floor that compat/FINDINGS.md records, less only the cluster-only allowlist
(``CLUSTER_SKIP``, each entry explained in FINDINGS.md). A SIGTERM of the run stops its
brokers and its ZooKeeper."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tidelog.testing.capability import require_zookeeper
from tidelog.testing.processes import kill_group, spawn

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "compat"
RUN = COMPAT / "kafka_python" / "run.py"
# the one-broker record, e.g. "kafka-python 3.0.12 against tidelog: 54 passed (...), 13 skipped"
RECORD = re.compile(r"kafka-python (\S+) against tidelog: (\d+) passed\b.*?, (\d+)\s+skipped\b",
                    re.S)
CLUSTER_SECTION = "## kafka-python integration suite against a three-broker cluster"


def _cluster_skip() -> dict[str, str]:
    sys.path.insert(0, str(COMPAT / "kafka_python"))
    try:
        from allowlist import CLUSTER_SKIP
    finally:
        sys.path.pop(0)
    return CLUSTER_SKIP


def _one_broker_record() -> tuple[int, int]:
    m = RECORD.search((COMPAT / "FINDINGS.md").read_text())
    assert m, "compat/FINDINGS.md no longer records the one-broker run's counts"
    return int(m.group(2)), int(m.group(3))


def _run(args: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """run.py with ``args``, the leader of its own process group (its ZooKeeper and brokers
    in it); on timeout, or whatever else ends the wait, the group gets SIGTERM (run.py stops
    its cluster) and SIGKILL for what is left."""
    proc = spawn([sys.executable, str(RUN), *args], env=env, text=True,
                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc, grace=60)
        out = proc.stdout.read() if proc.stdout is not None else ""
        raise AssertionError(f"run.py --brokers 3 took over {timeout} s:\n{out[-6000:]}") from None
    finally:
        kill_group(proc)
    return proc.returncode, out


def _processes_naming(text: str) -> dict[int, str]:
    """Live processes whose command line contains ``text``."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # exited meanwhile
        if text in cmdline:
            found[int(entry.name)] = cmdline
    return found


def _suite_started(pid: int) -> bool:
    """Whether run.py ``pid`` has started pytest on the suite (its cluster is up)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return False
    for child in children:
        try:
            if b"tidelog_compat_plugin" in Path(f"/proc/{child}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def test_every_cluster_allowlisted_test_is_explained() -> None:
    findings = (COMPAT / "FINDINGS.md").read_text()
    assert CLUSTER_SECTION in findings
    cluster_part = findings.split(CLUSTER_SECTION, 1)[1]
    missing = [name for name in _cluster_skip() if f"`{name}`" not in cluster_part]
    assert not missing, f"cluster-only allowlist entries without a FINDINGS.md reason: {missing}"


# measured 3 min 46 s (compat/FINDINGS.md): run.py's own deadline inside pytest-timeout's,
# so on a slow run its cluster is stopped by the test, not left to outlive it
@pytest.mark.timeout(540)
def test_kafka_python_integration_suite_on_three_brokers(tmp_path: Path) -> None:
    require_zookeeper()  # run.py starts its own
    passed, skipped = _one_broker_record()
    cluster_only = len(_cluster_skip())
    report = tmp_path / "report.json"
    # the cluster's temp dirs under this test's TMPDIR: its ZooKeeper and brokers (each in a
    # process group of its own) are the processes naming it, killed whatever ended the run
    run_tmp = tmp_path / "run"
    run_tmp.mkdir()
    env = {**os.environ, "TIDELOG_COMPAT_REPORT": str(report), "TMPDIR": str(run_tmp),
           "TIDELOG_COMPAT_CACHE": os.environ.get(
               "TIDELOG_COMPAT_CACHE", str(Path(tempfile.gettempdir()) / "tidelog-compat-cache"))}
    try:
        rc, out = _run(["--brokers", "3"], env, timeout=420)
    finally:
        left = _processes_naming(str(run_tmp))
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert not left, f"run.py left its cluster running: {left}"
    tail = out[-6000:]
    assert rc == 0, tail
    got = json.loads(report.read_text())
    assert got["unmatched_allowlist"] == [], tail
    assert got.get("failed", 0) == got.get("error", 0) == got.get("xpassed", 0) == 0, got
    assert got.get("passed", 0) >= passed - cluster_only, f"below the one-broker floor: {got}"
    assert got.get("skipped", 0) <= skipped + cluster_only, f"above the one-broker floor: {got}"


def test_sigterm_stops_the_cluster_and_its_zookeeper(tmp_path: Path) -> None:
    """The cluster's temp dirs (ZooKeeper's zoo.cfg, the brokers' log.dirs) go under this
    test's TMPDIR, so its processes are the ones naming ``tmp_path``."""
    require_zookeeper()  # run.py starts its own
    env = {**os.environ, "TMPDIR": str(tmp_path),
           "TIDELOG_COMPAT_CACHE": os.environ.get(
               "TIDELOG_COMPAT_CACHE", str(Path(tempfile.gettempdir()) / "tidelog-compat-cache"))}
    proc = spawn([sys.executable, str(RUN), "--brokers", "3", "-k", "test_delete_groups"],
                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        while not _suite_started(proc.pid):
            assert proc.poll() is None, f"run.py exited {proc.returncode} before its suite ran"
            assert time.monotonic() < deadline, "the suite did not start in 180 s"
            time.sleep(0.2)
        running = _processes_naming(str(tmp_path))
        assert any("ZooKeeperServerMain" in c for c in running.values()), running
        assert sum("tidelog.cli.main serve" in c for c in running.values()) == 3, running
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 128 + signal.SIGTERM
    finally:
        kill_group(proc)
    assert _processes_naming(str(tmp_path)) == {}
