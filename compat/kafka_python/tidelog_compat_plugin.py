"""pytest plugin loaded into kafka-python's own integration run (``-p tidelog_compat_plugin``):
marks the tests listed in ``allowlist.py`` before they run, and reports what the run did.

* ``SKIP``: the test cannot apply to one broker or to an external broker at all (it needs a
  KRaft quorum, or spawns its own Kafka JVM). Skipped, with the reason shown.
* ``XFAIL``: tidelog does not do it yet. Marked strict: the day it passes, the run fails until
  the entry is removed (FINDINGS.md says what each one needs). ``run=False`` entries would
  only wait out a timeout, so they are not run.
* ``RERUN``: the test races inside kafka-python itself, whatever the broker: marked
  ``flaky(reruns=1)`` (pytest-rerunfailures), so it fails the run only when it fails twice
  in a row. Reruns are counted as ``rerun`` in the report.
* An allowlist entry that names no collected test fails the run (a renamed or removed test
  would otherwise leave a stale entry that proves nothing).
* ``CLUSTER_SKIP``: with ``TIDELOG_COMPAT_BROKERS`` above 1 (the cluster run), skipped too:
  the test assumes the suite's one-broker fixture.
* With ``TIDELOG_COMPAT_REPLICAS`` set (the cluster run), the suite's broker fixture creates
  its topics with that replication factor instead of its default of 1 (``KafkaFixture``'s
  ``replicas``, the knob its own multi-broker runs turn).
* With ``TIDELOG_COMPAT_REPORT`` set, the outcome counts (passed, skipped, failed, xfailed,
  xpassed, error, rerun) and the allowlist entries that matched no test are written there as JSON.
"""

from __future__ import annotations

import importlib
import json
import os
from collections import Counter
from typing import Any

import pytest
from allowlist import CLUSTER_SKIP, RERUN, SKIP, XFAIL

OUTCOMES: Counter[str] = Counter()
UNMATCHED: list[str] = []


def pytest_sessionstart(session: Any) -> None:
    replicas = os.environ.get("TIDELOG_COMPAT_REPLICAS")
    if replicas:
        _default_replicas(int(replicas))


def _default_replicas(replicas: int) -> None:
    """``KafkaFixture.instance(..., replicas=1)`` by default; the cluster run's topics get
    ``replicas`` unless a caller names its own."""
    # the suite's own package (on PYTHONPATH in its run only), so looked up here, not imported
    kafka_fixture = importlib.import_module("test.integration.fixtures").KafkaFixture
    instance = kafka_fixture.instance.__func__

    def with_replicas(cls: type, broker_id: int, **kwargs: Any) -> Any:
        kwargs.setdefault("replicas", replicas)
        return instance(cls, broker_id, **kwargs)

    kafka_fixture.instance = classmethod(with_replicas)


@pytest.hookimpl(tryfirst=True)  # before -k/-m deselection: entries match what was collected
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    matched = set()
    skip = {**SKIP, **(CLUSTER_SKIP if int(os.environ.get("TIDELOG_COMPAT_BROKERS", "1")) > 1
                       else {})}
    for item in items:
        name = item.nodeid.split("::", 1)[-1]
        if name in skip:
            matched.add(name)
            item.add_marker(pytest.mark.skip(reason=f"tidelog: {skip[name]}"))
        elif name in XFAIL:
            matched.add(name)
            reason, run = XFAIL[name]
            item.add_marker(pytest.mark.xfail(reason=f"tidelog: {reason}", strict=True, run=run))
        elif getattr(item, "originalname", name) in RERUN:
            matched.add(item.originalname)
            item.add_marker(pytest.mark.flaky(reruns=1))
    UNMATCHED.extend(sorted((set(skip) | set(XFAIL) | set(RERUN)) - matched))


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
