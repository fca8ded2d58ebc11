"""The README's shell blocks, taken from README.md and run in order, line by line, against a
broker started for the test as the README's first command starts one: a README example that
stops working (a command renamed, a step missing, an example the broker refuses) fails here.

What is adapted, and only this: the broker's address (``localhost:9092``; a ``tidelog``
broker command without ``--bootstrap-server`` gets the test broker's), its log dir
(``/tmp/kafka-logs``) and the registry's URL, so that tests never need fixed ports. A
``tidelog serve`` line restarts the broker on the same log dir with that line's options, as a
user stops the first broker and serves again. Install blocks (``pip install``: the fresh
install tests and .ci/extras run those) and the benchmarks (minutes each) are not run."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.testing.capability import require_capability

REPO = Path(__file__).resolve().parents[2]
NOT_RUN_SECTIONS = ("## Benchmarks",)
BROKER_COMMANDS = re.compile(
    r"\btidelog (perf produce|perf consume|topics|produce|consume|groups|configs|acls|reassign)\b")


def readme_lines(text: str) -> list[str]:
    """The logical lines (``\\`` continuations joined) of the README's ```bash blocks, in
    order, without install blocks and the sections not run."""
    out: list[str] = []
    section, block, in_bash = "", [], False
    for line in text.splitlines():
        if line.startswith("#") and not in_bash:
            section = line
        elif line.startswith("```"):
            if in_bash:
                if "pip install" not in "\n".join(block) and section not in NOT_RUN_SECTIONS:
                    out += "\n".join(block).replace("\\\n", " ").splitlines()
                block, in_bash = [], False
            else:
                in_bash = line.strip() == "```bash"
        elif in_bash:
            block.append(line)
    return [line for line in out if line.strip() and not line.lstrip().startswith("#")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    """``tidelog serve`` on an ephemeral port over one log dir, restartable with options."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env, self.log_dir = env, log_dir
        self.proc: subprocess.Popen[str] | None = None
        self.bootstrap = ""
        self.lines: list[str] = []

    def start(self, extra: list[str]) -> None:
        self.stop()
        cmd = ["tidelog", "serve", *extra, "--override", "listeners=PLAINTEXT://127.0.0.1:0",
               "--override", f"log.dirs={self.log_dir}"]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=self.env)
        assert self.proc.stderr is not None
        registry = any("schema.registry.listeners" in a for a in extra)
        for line in self.proc.stderr:
            self.lines.append(line)
            if "listening on" in line and "tidelog broker" in line:
                self.bootstrap = line.split("listening on ", 1)[1].split()[0]
            if self.bootstrap and (not registry or "Schema Registry on" in line):
                break
        assert self.bootstrap, "tidelog serve exited:\n" + "".join(self.lines)
        threading.Thread(target=self.lines.extend, args=(self.proc.stderr,), daemon=True).start()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            assert self.proc.wait(60) == 0, "".join(self.lines[-50:])
            self.proc, self.bootstrap = None, ""


@pytest.fixture
def shell_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """PATH with a ``tidelog`` that runs this checkout (as ``source .venv/bin/activate``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "tidelog"
    script.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m tidelog.cli.main "$@"\n')
    script.chmod(0o755)
    src = str(REPO / "src")
    yield {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_readme_shell_blocks_run_in_order_from_a_clean_start(
    shell_env: dict[str, str], tmp_path: Path
) -> None:
    require_capability("kcat", shutil.which("kcat") is not None,
                       "the README's first examples use kcat (apt-get install kcat)")
    lines = readme_lines((REPO / "README.md").read_text())
    assert any("--value-format avro" in line for line in lines)  # the registry block is run
    work = tmp_path / "work"
    work.mkdir()
    registry = f"http://127.0.0.1:{_free_port()}"
    broker = Broker(shell_env, tmp_path / "kafka-logs")
    broker.start([])  # the README's first command
    outputs: list[tuple[str, str]] = []
    try:
        for line in lines:
            line = line.replace("http://127.0.0.1:8081", registry)
            line = line.replace("/tmp/kafka-logs", str(broker.log_dir))
            if line.startswith("tidelog serve"):
                broker.start(shlex.split(line.split("#")[0])[2:])
                continue
            line = line.replace("localhost:9092", broker.bootstrap)
            line = BROKER_COMMANDS.sub(rf"tidelog \1 --bootstrap-server {broker.bootstrap}", line)
            started = time.monotonic()
            r = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=work, env=shell_env,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=180)
            print(f"{time.monotonic() - started:5.1f} s  {line[:100]}")
            assert r.returncode == 0, f"README line failed ({r.returncode}): {line}\n" \
                                      f"{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
            # the registry client's HTTP lines are not the user's business
            assert "HTTP Request" not in r.stderr, r.stderr
            outputs.append((line, r.stdout))
    finally:
        broker.stop()
    printed = dict(outputs)
    [consumed] = [out for line, out in outputs if "--group my-app --from-beginning" in line]
    assert consumed.strip() == "hello", printed
    [typed] = [out for line, out in outputs if "consume --bootstrap-server" in line
               and "--value-format avro" in line]
    assert typed.split("\t")[0] == "order-1" and '"id": 1' in typed, typed
