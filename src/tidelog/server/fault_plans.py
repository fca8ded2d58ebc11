"""Which broker follows which fault plan (testing only): ``faults.install`` ties a plan to
a broker, each new connection asks ``plan_for``. Apart from ``faults`` so that a broker
without a plan (every real one) never imports the fault machinery."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .broker import Broker
    from .faults import FaultPlan

PLANS: weakref.WeakKeyDictionary[Broker, FaultPlan] = weakref.WeakKeyDictionary()


def plan_for(broker: Broker) -> FaultPlan | None:
    return PLANS.get(broker)
