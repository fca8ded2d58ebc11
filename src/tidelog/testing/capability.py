"""One rule for tests that need something a machine may lack: skip locally, fail under CI.

A test that needs root, a tool, a loop mount, a network namespace or a ZooKeeper
asks for it with :func:`require_capability` (or one of the helpers below, built on it) before
using it. Where the capability is missing:

* on a developer's machine the test is **skipped**, with the reason (what is missing and how
  to get it), so ``pytest`` stays usable without root or Debian's packages;
* under CI (the ``CI`` environment variable set and not ``0``/``false``, as ``.ci/run``
  sets it) the test **fails** with the same reason: ``.ci/run`` installs every peer and runs
  as root, so a missing capability there means the run no longer proves what it claims.

Never gate such a test with ``pytest.mark.skipif`` or a bare ``pytest.skip``: both stay green
under CI. Call the rule from the test or from its fixture::

    from tidelog.testing.capability import require_capability, require_netns

    def test_leader_cut_off(tmp_path):
        require_netns()
        require_capability("tc", shutil.which("tc") is not None, "tc is not installed (iproute2)")
        ...

A check that can only be decided by trying (a ``mount`` that the kernel refuses, a namespace
that cannot be created, a ZooKeeper server whose jar is not installed) passes ``False`` once it
has tried, with what failed in ``reason``::

    except ZooKeeperUnavailable as e:
        require_capability("zookeeper", False, str(e))
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Callable

import pytest


def in_ci() -> bool:
    """True under CI: the ``CI`` environment variable is set to something other than
    ``""``, ``0`` or ``false`` (``.ci/run`` exports ``CI=1``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def require_capability(name: str, check: bool | Callable[[], bool], reason: str) -> None:
    """Go on if ``check`` (a bool, or a callable returning one) holds; otherwise skip the
    test with ``reason``, or fail it under CI. ``name`` says what is missing ("root",
    "mkfs.xfs", "network namespaces", ...) and heads the message."""
    ok = check() if callable(check) else check
    if ok:
        return
    if in_ci():
        pytest.fail(f"{name}: {reason} -- CI (CI={os.environ.get('CI')}) provides every "
                    "capability a test needs, so a missing one fails the run instead of "
                    "skipping", pytrace=False)
    pytest.skip(f"{name}: {reason}")


def require_root(what: str) -> None:
    """``what`` ("loop-mounting a file system", ...) needs root; CI runs as root."""
    require_capability("root", os.geteuid() == 0, f"{what} needs root (CI runs as root)")


def require_tools(*tools: str, package: str) -> None:
    """Every one of ``tools`` is on PATH; ``package`` names the Debian package(s) that
    install them (``.ci/run`` installs them)."""
    for tool in tools:
        require_capability(tool, shutil.which(tool) is not None,
                           f"{tool} is not installed (Debian package {package})")


def _run_ok(*cmd: str) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=30, check=False).returncode == 0
    except OSError:
        return False


@functools.cache
def _netns_works() -> bool:
    """Create and delete a network namespace: the only sure test that the kernel and this
    process allow it (root alone is not enough inside some containers)."""
    name = f"tidelog-probe-{os.getpid()}"
    if not _run_ok("ip", "netns", "add", name):
        return False
    return _run_ok("ip", "netns", "delete", name)


def require_netns() -> None:
    """``ip netns`` can create network namespaces here (root, iproute2, a kernel and a
    container that allow it)."""
    require_root("creating network namespaces")
    require_tools("ip", package="iproute2")
    require_capability("network namespaces", _netns_works,
                       "`ip netns add` failed (the kernel or the container refuses them)")


def require_zookeeper() -> None:
    """A Java runtime and Debian's ZooKeeper jar, for a test that starts a ZooKeeper server
    itself (or runs a script that does) rather than through the ``zookeeper_server``
    fixture."""
    from .zookeeper import ZooKeeperUnavailable, find_zookeeper_jar

    require_capability("java", shutil.which("java") is not None,
                       "no Java runtime (Debian package default-jre-headless)")
    try:
        find_zookeeper_jar()
    except ZooKeeperUnavailable as e:
        require_capability("zookeeper", False, str(e))
