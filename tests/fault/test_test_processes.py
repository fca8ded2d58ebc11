"""tidelog.testing.processes: what a test starts is one process group, and the group goes
whatever ended the test (the leader gone first, a process that ignores SIGTERM)."""

from __future__ import annotations

import os
import subprocess
import time

from tidelog.testing.processes import (
    keep_for_session,
    kill_group,
    kill_started_since,
    spawn,
    started_count,
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_the_group_goes_with_its_leader_gone_first() -> None:
    """A script that starts a server and exits (as a cluster script's ZooKeeper would be
    left): killing its group ends the server too."""
    leader = spawn(["bash", "-c", "sleep 300 & echo $!"], stdout=subprocess.PIPE, text=True)
    assert leader.stdout is not None
    child = int(leader.stdout.readline())
    assert leader.wait(10) == 0 and _alive(child)
    assert os.getpgid(child) == leader.pid != os.getpgid(0)
    kill_group(leader, grace=5)
    assert _gone(child)


def test_what_a_test_left_running_is_killed_after_it() -> None:
    """What the plugin's finalizer does after each test: a process that ignores SIGTERM
    gets SIGKILL."""
    before = started_count()
    stubborn = spawn(["bash", "-c", "trap '' TERM; echo ready; exec sleep 300"],
                     stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"
    assert kill_started_since(before) == [stubborn.pid]
    assert stubborn.returncode == -9
    assert kill_started_since(before) == []


def test_a_server_kept_for_the_session_outlives_the_test_that_started_it() -> None:
    """A session fixture first asked for inside a test (``getfixturevalue``) starts its
    server after the finalizer counted: kept for the session, it is not killed with the
    test's own processes."""
    before = started_count()
    server = spawn(["sleep", "300"])
    keep_for_session(server)
    own = spawn(["sleep", "300"])
    assert kill_started_since(before) == [own.pid]
    assert _alive(server.pid) and _gone(own.pid)
    kill_group(server, grace=5)
    assert _gone(server.pid)
