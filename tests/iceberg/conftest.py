"""The test session's SparkSession (the same one tests/spark builds: getOrCreate)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
from session_support import rerun_when_a_worker_did_not_connect_back, spark_test_session


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    yield from spark_test_session()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rerun_when_a_worker_did_not_connect_back(items, "spark_session")
