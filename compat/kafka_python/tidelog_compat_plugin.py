"""pytest plugin loaded into kafka-python's own integration run (``-p tidelog_compat_plugin``):
marks the tests listed in ``allowlist.py`` before they run.

* ``SKIP``: the test cannot apply to one broker or to an external broker at all (it needs a
  KRaft quorum, or spawns its own Kafka JVM). Skipped, with the reason shown.
* ``XFAIL``: tidelog does not do it yet. Marked strict: the day it passes, the run fails until
  the entry is removed (FINDINGS.md says what each one needs). ``run=False`` entries would
  only wait out a timeout, so they are not run.
"""

from __future__ import annotations

from typing import Any

import pytest
from allowlist import SKIP, XFAIL


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    for item in items:
        name = item.nodeid.split("::", 1)[-1]
        if name in SKIP:
            item.add_marker(pytest.mark.skip(reason=f"tidelog: {SKIP[name]}"))
        elif name in XFAIL:
            reason, run = XFAIL[name]
            item.add_marker(pytest.mark.xfail(reason=f"tidelog: {reason}", strict=True, run=run))
