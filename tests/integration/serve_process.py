"""A real ``tidelog serve`` process on an ephemeral port (tests/integration, tests/fault)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path


class ServeProcess:
    def __init__(
        self,
        log_dir: Path,
        overrides: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.log_dir = log_dir
        self.extra_args = list(extra_args or [])
        self.overrides = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(log_dir),
            **(overrides or {}),
        }
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.stderr_lines: list[str] = []

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, port: int = 0) -> ServeProcess:
        if port:
            self.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "tidelog.cli.main", "serve", *self.extra_args]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        self.proc = subprocess.Popen(
            cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
        assert self.proc.stderr is not None
        # Block on the broker's own "listening on" log line (no polling, no sleeps).
        for line in self.proc.stderr:
            self.stderr_lines.append(line)
            if "listening on" in line:
                self.port = int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])
                break
        else:
            raise RuntimeError("tidelog serve exited:\n" + "".join(self.stderr_lines))
        threading.Thread(target=self._drain, daemon=True).start()
        return self

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)
