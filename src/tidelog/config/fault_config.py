"""The testing-only ``tidelog.fault.plan.file`` setting (see ``tidelog.server.fault_file``).

Declared apart from the fault plan itself so that ``tidelog serve`` knows the key (and warns
about no unused setting) without importing the fault machinery a default broker never runs."""

from __future__ import annotations

from .core import ConfigDef

FAULT_PLAN_FILE = "tidelog.fault.plan.file"
FAULT_CONFIG_DEF = ConfigDef().define(
    FAULT_PLAN_FILE, "string", None,
    "Testing only: a file of fault-plan calls the broker follows ({broker.id} is replaced by "
    "the broker's id); see tidelog.server.fault_file.",
)  # fmt: skip
