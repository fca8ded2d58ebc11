"""Run ``tidelog`` as a person does: a subprocess on a pipe, or on a pseudo-terminal (pexpect)
where lines are typed, the tool's prompt is awaited and Ctrl-C is a real SIGINT from the tty."""

from __future__ import annotations

import os
import subprocess
import sys

import pexpect

TIDELOG = [sys.executable, "-m", "tidelog.cli.main"]


def cli(
    *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TIDELOG, *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )


def popen(*args: str) -> subprocess.Popen[str]:
    """A tool reading lines from a pipe the test keeps open (stdout/stderr captured)."""
    return subprocess.Popen(
        [*TIDELOG, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def terminal(*args: str, timeout: float = 30) -> pexpect.spawn:
    """The tool on a pty (stdin and stdout are a terminal, as when a person runs it)."""
    child = pexpect.spawn(
        TIDELOG[0], [*TIDELOG[1:], *args], timeout=timeout, encoding="utf-8", echo=False
    )
    return child


def ctrl_c(child: pexpect.spawn) -> int:
    """Ctrl-C typed at the terminal; the tool's exit status once it has finished."""
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus is not None, child.signalstatus
    return int(child.exitstatus)
