"""NetnsCluster's subnet lease (tidelog.testing.netns): processes picking at the same time
(two pytest-xdist workers starting a network-namespace cluster each) never get the same
10.77.X.0/24, and a lease ends with its holder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tidelog.testing.netns import SubnetLease, lease_subnet

# a process that leases one X among CANDIDATES, prints it, and holds it until its stdin closes
HOLDER = (
    "import sys\n"
    "from pathlib import Path\n"
    "from tidelog.testing.netns import lease_subnet\n"
    "n = int(sys.argv[2])\n"
    "lease = lease_subnet(lock_dir=Path(sys.argv[1]), candidates=range(201, 201 + n))\n"
    "print(lease.subnet, flush=True)\n"
    "sys.stdin.read()\n"
)
PROCESSES = 6


def _holders(lock_dir: Path, candidates: int, n: int) -> list[subprocess.Popen[str]]:
    return [subprocess.Popen([sys.executable, "-c", HOLDER, str(lock_dir), str(candidates)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(n)]


def test_concurrent_picks_differ(tmp_path: Path) -> None:
    """As many processes as candidates, started at once: each gets its own X (a random pick
    without the lock collides with probability 1 - 6!/6^6, about 98%), and while they hold
    them there is none left."""
    procs = _holders(tmp_path, PROCESSES, PROCESSES)
    try:
        picks = []
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            assert line, p.communicate(timeout=30)[1]
            picks.append(int(line))
        assert sorted(picks) == list(range(201, 201 + PROCESSES))
        with pytest.raises(RuntimeError, match="no free"):
            lease_subnet(lock_dir=tmp_path, candidates=range(201, 201 + PROCESSES))
    finally:
        for p in procs:
            p.communicate(input="", timeout=30)
    assert [p.returncode for p in procs] == [0] * PROCESSES


def test_a_lease_ends_with_its_holder(tmp_path: Path) -> None:
    """Released, or its process killed: the X can be taken again."""
    [holder] = _holders(tmp_path, 1, 1)
    assert holder.stdout is not None
    assert int(holder.stdout.readline()) == 201
    assert SubnetLease.try_take(201, tmp_path) is None
    holder.kill()
    holder.wait(timeout=30)
    lease = SubnetLease.try_take(201, tmp_path)
    assert lease is not None and lease.held
    assert SubnetLease.try_take(201, tmp_path) is None  # a second holder in this process too
    lease.release()
    again = SubnetLease.try_take(201, tmp_path)
    assert again is not None
    again.release()
