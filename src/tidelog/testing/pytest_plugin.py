"""pytest plugin entry point (registered as ``tidelog`` in pyproject).

Fixtures:
* ``tidelog_broker``: an :class:`~tidelog.testing.EmbeddedBroker`, one per test module;
  use ``tidelog_broker.bootstrap_servers`` as the clients' bootstrap address.
* ``tidelog_broker_factory``: call it with config overrides to get more brokers (stopped
  at the end of the test).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .embedded import EmbeddedBroker


@pytest.fixture(scope="module")
def tidelog_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as broker:
        yield broker


@pytest.fixture
def tidelog_broker_factory() -> Iterator[Callable[..., EmbeddedBroker]]:
    started: list[EmbeddedBroker] = []

    def factory(config: dict[str, Any] | None = None, **kw: Any) -> EmbeddedBroker:
        b = EmbeddedBroker(config, **kw).start()
        started.append(b)
        return b

    yield factory
    for b in started:
        b.stop()
