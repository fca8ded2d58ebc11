"""pytest plugin loaded into kafka-python's own integration run (``-p tidelog_compat_plugin``):
marks the tests listed in ``allowlist.py`` before they run, and reports what the run did.

* ``SKIP``: the test cannot apply to one broker or to an external broker at all (it needs a
  KRaft quorum, or spawns its own Kafka JVM). Skipped, with the reason shown.
* ``XFAIL``: tidelog does not do it yet. Marked strict: the day it passes, the run fails until
  the entry is removed (FINDINGS.md says what each one needs). ``run=False`` entries would
  only wait out a timeout, so they are not run.
* An allowlist entry that names no collected test fails the run (a renamed or removed test
  would otherwise leave a stale entry that proves nothing).
* With ``TIDELOG_COMPAT_REPORT`` set, the outcome counts (passed, skipped, failed, xfailed,
  xpassed, error) and the allowlist entries that matched no test are written there as JSON.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

import pytest
from allowlist import SKIP, XFAIL

OUTCOMES: Counter[str] = Counter()
UNMATCHED: list[str] = []


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselection: entries match what was collected
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    matched = set()
    for item in items:
        name = item.nodeid.split("::", 1)[-1]
        if name in SKIP:
            matched.add(name)
            item.add_marker(pytest.mark.skip(reason=f"tidelog: {SKIP[name]}"))
        elif name in XFAIL:
            matched.add(name)
            reason, run = XFAIL[name]
            item.add_marker(pytest.mark.xfail(reason=f"tidelog: {reason}", strict=True, run=run))
    UNMATCHED.extend(sorted((set(SKIP) | set(XFAIL)) - matched))


def pytest_runtest_logreport(report: Any) -> None:
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        if hasattr(report, "wasxfail"):
            OUTCOMES["xfailed" if report.outcome == "skipped" else "xpassed"] += 1
        elif report.when == "setup" and report.outcome == "failed":
            OUTCOMES["error"] += 1
        else:
            OUTCOMES[report.outcome] += 1


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if UNMATCHED:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    path = os.environ.get("TIDELOG_COMPAT_REPORT")
    if path:
        with open(path, "w") as f:
            json.dump({**OUTCOMES, "unmatched_allowlist": UNMATCHED}, f)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if UNMATCHED:
        terminalreporter.write_line(
            f"allowlist entries that match no test (remove them): {UNMATCHED}", red=True)
