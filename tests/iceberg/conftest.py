"""The test session's SparkSession (the same one tests/spark builds: getOrCreate)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
from session_support import spark_test_session


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    yield from spark_test_session()
