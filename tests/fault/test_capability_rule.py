"""The capability rule (tidelog.testing.capability): a missing capability skips a test with
its reason on a developer's machine and fails it under CI; a present one lets it run. Also end
to end: a real pytest run of a loop-mount test on a PATH without mkfs.ext4 fails under CI=1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tidelog.testing.capability import (
    in_ci,
    require_capability,
    require_netns,
    require_root,
    require_tools,
)

FAULT_DIR = Path(__file__).resolve().parent


@pytest.mark.parametrize(("value", "want"), [("1", True), ("true", True), ("yes", True),
                                             ("", False), ("0", False), ("false", False)])
def test_ci_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch, value: str,
                                         want: bool) -> None:
    monkeypatch.setenv("CI", value)
    assert in_ci() is want


def test_a_missing_capability_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="widget: not here"):
        require_capability("widget", False, "not here")


def test_a_missing_capability_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match=r"widget: not here .*fails the run"):
        require_capability("widget", lambda: False, "not here")


def test_a_present_capability_lets_the_test_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "1")
    calls = []
    require_capability("widget", lambda: calls.append(1) or True, "unused")
    require_capability("widget", True, "unused")
    assert calls == [1]


def test_a_tool_off_path_is_named_with_its_package(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    monkeypatch.setenv("CI", "1")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match=r"mkfs\.ext4 is not installed .*e2fsprogs"):
        require_tools("mkfs.ext4", package="e2fsprogs")


LOOP_TEST = '''
from fault_loopfs import loop_fs

def test_mounts(tmp_path):
    with loop_fs(tmp_path, "ext4") as fs:
        assert fs.mountpoint.is_dir()
'''


def _pytest_loop_test(tmp_path: Path, ci: str | None, drop: str = "mkfs.ext4"
                      ) -> subprocess.CompletedProcess[str]:
    """pytest on a loop-mount test, with a PATH holding every tool but ``drop``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for d in os.environ["PATH"].split(os.pathsep):
        for tool in Path(d).glob("*") if Path(d).is_dir() else []:
            if tool.name != drop and not (bin_dir / tool.name).exists():
                (bin_dir / tool.name).symlink_to(tool)
    (tmp_path / "test_loop.py").write_text(LOOP_TEST)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(PATH=str(bin_dir), PYTHONPATH=str(FAULT_DIR))
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "-o", "addopts=", str(tmp_path / "test_loop.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def test_ci_fails_a_loop_mount_test_when_mkfs_is_missing(tmp_path: Path) -> None:
    res = _pytest_loop_test(tmp_path, "1")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "1 failed" in res.stdout and "mkfs.ext4 is not installed" in res.stdout, res.stdout


def test_outside_ci_the_same_test_is_skipped_with_the_reason(tmp_path: Path) -> None:
    res = _pytest_loop_test(tmp_path, None)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 skipped" in res.stdout and "mkfs.ext4 is not installed" in res.stdout, res.stdout


def test_with_the_tool_back_the_same_test_passes_under_ci(tmp_path: Path) -> None:
    """The control: the same run with mkfs.ext4 on PATH mounts and passes (needs root: CI
    runs as root; elsewhere this one skips)."""
    require_root("loop-mounting a file system")
    res = _pytest_loop_test(tmp_path, "1", drop="")
    assert res.returncode == 0 and "1 passed" in res.stdout, res.stdout + res.stderr


def test_the_cluster_capabilities_hold_where_ci_runs() -> None:
    """Network namespaces, which the cluster's fault tests cut networks in (blackhole
    routes): under CI they must work (.ci/run installs iproute2 and runs as root); the probe
    namespace is gone afterwards."""
    require_netns()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    assert f"tidelog-probe-{os.getpid()}" not in left.stdout
