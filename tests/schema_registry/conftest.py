from __future__ import annotations

from collections.abc import Iterator

import pytest
from registry_support import RegistryBroker


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryBroker]:
    """One broker with its registry per test module; tests use their own subjects."""
    with RegistryBroker() as rb:
        yield rb


@pytest.fixture
def fresh_registry() -> Iterator[RegistryBroker]:
    """A broker and registry of the test's own (restarts, global config and mode)."""
    with RegistryBroker() as rb:
        yield rb
