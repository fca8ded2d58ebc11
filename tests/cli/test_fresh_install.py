"""A new user's first run: a wheel built from this repository, installed into a fresh virtual
environment with no extra, runs every command the README names against the broker it started.

The wheel is built from a copy of the repository's files (what a clone holds), so nothing is
written into the source tree; its dependencies come from the package index as ``pip install``
fetches them for a user."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tidelog.testing.processes import kill_group, spawn

REPO = Path(__file__).resolve().parents[2]


# Not in a clone (an unpacked source tree): everything but what a build or a run leaves.
LEFT_BY_RUNS = {".git", ".venv", "__pycache__", "build", ".pytest_cache", ".mypy_cache",
                ".ruff_cache", ".hypothesis"}  # fmt: skip


def _repository_files() -> list[str]:
    """Files a clone holds (tracked, plus new files not ignored), relative to the repository."""
    r = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO, capture_output=True,
    )  # fmt: skip
    if r.returncode == 0:
        return [p for p in r.stdout.decode().split("\0") if p and (REPO / p).is_file()]
    files = []
    for p in REPO.rglob("*"):
        rel = p.relative_to(REPO)
        left = any(part in LEFT_BY_RUNS or part.endswith(".egg-info") for part in rel.parts)
        if p.is_file() and p.suffix != ".so" and not left:
            files.append(str(rel))
    return files


def _run(cmd: list[str], timeout: float = 240, **kw: object) -> subprocess.CompletedProcess[str]:
    """``cmd`` to its end, within ``timeout`` (inside pytest-timeout's 300 s by default, so a
    slow install fails here, its process killed, rather than outliving the test)."""
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
    assert r.returncode == 0, f"{cmd} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


@dataclass
class FreshVenv:
    root: Path
    env: dict[str, str] = field(default_factory=dict)

    def bin(self, name: str) -> str:
        return str(self.root / "bin" / name)

    def tidelog(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            [self.bin("tidelog"), *args], input=stdin, capture_output=True, text=True,
            timeout=120, env=self.env,
        )  # fmt: skip
        if check:
            assert r.returncode == 0, f"tidelog {args} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
        return r


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the repository's files."""
    work = tmp_path_factory.mktemp("fresh-install")
    clone = work / "clone"
    for rel in _repository_files():
        dest = clone / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dest)
    wheels = work / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(clone)])
    (built,) = wheels.glob("tidelog-*.whl")
    return built


def _venv(root: Path, *requirement: str, timeout: float = 240) -> FreshVenv:
    venv = FreshVenv(root)
    # The fresh environment is this venv alone: no PYTHONPATH, no VIRTUAL_ENV of the test run
    # (a PYTHONPATH naming a source tree would make pip take tidelog as installed already).
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    venv.env = env
    _run([sys.executable, "-m", "venv", str(venv.root)], env=env)
    _run([venv.bin("pip"), "install", "-q", *requirement], timeout=timeout, env=env)
    return venv


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path) -> FreshVenv:
    return _venv(wheel.parent.parent / "venv", str(wheel))


@pytest.fixture
def fresh_broker(fresh_venv: FreshVenv, tmp_path: Path) -> Iterator[str]:
    yield from _serve(fresh_venv, tmp_path / "logs")


def _serve(venv: FreshVenv, log_dir: Path) -> Iterator[str]:
    proc = spawn(
        [venv.bin("tidelog"), "serve", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={log_dir}"],
        stderr=subprocess.PIPE, text=True, env=venv.env,
    )  # fmt: skip
    assert proc.stderr is not None
    lines: list[str] = []
    port = 0
    for line in proc.stderr:
        lines.append(line)
        if "listening on" in line:
            port = int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])
            break
    assert port, "tidelog serve exited:\n" + "".join(lines)
    threading.Thread(target=lambda: lines.extend(proc.stderr or []), daemon=True).start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            code = proc.wait(60)
        finally:
            kill_group(proc)
        assert code == 0, "".join(lines)


def test_the_fresh_environment_has_no_test_extra(fresh_venv: FreshVenv) -> None:
    r = subprocess.run(
        [fresh_venv.bin("python"), "-c", "import pytest"], capture_output=True, text=True,
        env=fresh_venv.env,
    )  # fmt: skip
    assert r.returncode != 0 and "No module named 'pytest'" in r.stderr
    assert fresh_venv.tidelog("--version").stdout.startswith("tidelog ")


def test_readme_commands_run_from_the_wheel_alone(fresh_venv: FreshVenv, fresh_broker: str) -> None:
    _first_run(fresh_venv, fresh_broker)


def test_readme_first_command_alone_an_editable_install(wheel: Path, tmp_path: Path) -> None:
    """The README's own first command: ``pip install -e .`` in a clone, then the tools."""
    clone = wheel.parent.parent / "clone"  # the copy the wheel was built from
    venv = _venv(tmp_path / "editable-venv", "-e", str(clone))
    serving = _serve(venv, tmp_path / "logs")
    try:
        _first_run(venv, next(serving))
    finally:
        serving.close()


def _first_run(fresh_venv: FreshVenv, bootstrap: str) -> None:
    """topics, produce, consume (as a group) and groups against a broker it started."""
    bs = ["--bootstrap-server", bootstrap]
    fresh_venv.tidelog("topics", *bs, "--create", "--topic", "orders", "--partitions", "2")
    assert "orders" in fresh_venv.tidelog("topics", *bs, "--list").stdout
    described = fresh_venv.tidelog("topics", *bs, "--describe", "--topic", "orders").stdout
    assert "PartitionCount: 2" in described, described

    lines = [f"k{i}:v{i}" for i in range(20)]
    fresh_venv.tidelog(
        "produce", *bs, "--topic", "orders", "--property", "parse.key=true",
        "--property", "key.separator=:", stdin="\n".join(lines) + "\n",
    )  # fmt: skip
    got = fresh_venv.tidelog(
        "consume", *bs, "--topic", "orders", "--group", "first-run", "--from-beginning",
        "--max-messages", "20", "--property", "print.key=true", "--key-separator", ":",
        "--timeout-ms", "30000",
    ).stdout.split()  # fmt: skip
    assert sorted(got) == sorted(lines)

    assert "first-run" in fresh_venv.tidelog("groups", *bs, "--list").stdout
    described = fresh_venv.tidelog("groups", *bs, "--describe", "--group", "first-run").stdout
    rows = [r.split() for r in described.splitlines() if r.startswith("first-run ")]
    assert len(rows) == 2, described  # both partitions, each committed up to its log end
    assert sum(int(r[3]) for r in rows) == 20 and all(r[3] == r[4] and r[5] == "0" for r in rows)


def test_the_other_readme_tools_run_from_the_wheel_alone(
    fresh_venv: FreshVenv, fresh_broker: str, tmp_path: Path
) -> None:
    bs = ["--bootstrap-server", fresh_broker]
    out = fresh_venv.tidelog("perf", "produce", *bs, "--topic", "bench", "--num-records", "2000",
                             "--record-size", "100", "--throughput", "-1").stdout
    assert "2000 records sent" in out, out
    out = fresh_venv.tidelog("perf", "consume", *bs, "--topic", "bench", "--messages", "2000")
    assert out.returncode == 0
    fresh_venv.tidelog("demo-segment", str(tmp_path / "demo"))
    (segment,) = (tmp_path / "demo").rglob("*.log")
    dumped = fresh_venv.tidelog("dump-log", "--print-data-log", str(segment)).stdout
    assert "baseOffset: 0" in dumped, dumped[:500]


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(1500)  # PySpark's install and a SparkSession: the waits below fit inside
def test_the_spark_example_runs_from_the_wheel_with_the_spark_extra(
    wheel: Path, tmp_path: Path
) -> None:
    """``pip install 'tidelog[spark]'`` and examples/offline_report.py over a broker's log dir
    (a local SparkSession: Java 17+)."""
    venv = _venv(tmp_path / "spark-venv", f"{wheel}[spark]", timeout=900)
    logs = tmp_path / "logs"
    serving = _serve(venv, logs)
    try:
        bootstrap = next(serving)
        lines = "".join(f"k{i}:v{i}\n" for i in range(30))
        venv.tidelog("produce", "--bootstrap-server", bootstrap, "--topic", "report",
                     "--property", "parse.key=true", "--property", "key.separator=:", stdin=lines)
    finally:
        serving.close()  # clean shutdown: the report reads the stopped broker's log dir
    r = subprocess.run([venv.bin("python"), str(REPO / "examples" / "offline_report.py"),
                        str(logs), "--topics", "report"],
                       capture_output=True, text=True, timeout=600, env=venv.env)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    (row,) = [ln for ln in r.stdout.splitlines() if ln.startswith("report-0")]
    assert row.split()[1:3] == ["30", "0..29"], row
