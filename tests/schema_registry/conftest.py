from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from registry_support import RegistryBroker

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
from session_support import rerun_when_a_worker_did_not_connect_back, spark_test_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The test run's one SparkSession (tests/spark/session_support.py)."""
    yield from spark_test_session()


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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rerun_when_a_worker_did_not_connect_back(items)
