"""Processes a test starts, each the leader of its own process group, killed whatever ends
the test.

:func:`spawn` starts a command as the leader of a new session (``start_new_session``), so
the process and everything it starts (a cluster script's ZooKeeper and brokers) share one
process group, and records it. :func:`kill_group` ends the whole group (SIGTERM, then SIGKILL
after ``grace``). The pytest plugin's autouse fixture calls :func:`kill_started_since` after
every test, so a group a test started is gone even when the test ended on an exception or on
pytest-timeout's alarm before its own cleanup ran; :func:`kill_all` runs at exit::

    from tidelog.testing.processes import spawn, kill_group

    proc = spawn([sys.executable, "run.py"], stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=200)
    finally:
        kill_group(proc)
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any

_lock = threading.Lock()
_started: list[subprocess.Popen[Any]] = []
_session_owned: set[int] = set()  # leaders' pids of groups a longer-lived fixture owns


def spawn(cmd: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(cmd, **kwargs)`` in a new process group, recorded for the finalizers."""
    proc: subprocess.Popen[Any] = subprocess.Popen(list(cmd), start_new_session=True, **kwargs)
    with _lock:
        _started.append(proc)
    return proc


def started_count() -> int:
    with _lock:
        return len(_started)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_group(proc: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """SIGTERM to the process group ``proc`` leads, SIGKILL to what is left of it after
    ``grace`` seconds; ``proc`` reaped. (A group whose leader exited may still hold its
    children: the group is signalled, not the leader.)"""
    pgid = proc.pid
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while _group_alive(pgid) and time.monotonic() < deadline:
        try:
            proc.wait(0.05)  # reaps the leader: a zombie still counts as the group's
        except subprocess.TimeoutExpired:
            continue
        time.sleep(0.05)  # the leader gone, its children exiting
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def keep_for_session(proc: subprocess.Popen[Any]) -> None:
    """``proc``'s group belongs to a session- or module-scoped fixture (a server the tests
    share): the per-test finalizer leaves it, even when a test's ``getfixturevalue`` started
    it; :func:`kill_all` still ends it at exit."""
    with _lock:
        _session_owned.add(proc.pid)


def kill_started_since(count: int) -> list[int]:
    """Kills the groups started after the first ``count`` that are still alive, but those
    kept for the session; returns their leaders' pids."""
    with _lock:
        late = _started[count:]
        del _started[count:]
        _started.extend(p for p in late if p.pid in _session_owned)
    alive = [p for p in late if p.pid not in _session_owned and _group_alive(p.pid)]
    for proc in alive:
        kill_group(proc, grace=5.0)
    return [p.pid for p in alive]


def kill_all() -> None:
    with _lock:
        _session_owned.clear()
    kill_started_since(0)


atexit.register(kill_all)
