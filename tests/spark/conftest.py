"""One local SparkSession per test session, one broker per test session, shared helpers."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import kafka_broker
from session_support import rerun_when_a_worker_did_not_connect_back, spark_test_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    yield from spark_test_session()


@pytest.fixture(scope="session")
def broker() -> Iterator[tuple[str, str]]:
    """(kind, bootstrap) of a real Kafka-compatible broker (see peers.py)."""
    with kafka_broker() as kb:
        yield kb


@pytest.fixture(scope="session")
def bootstrap(broker: tuple[str, str]) -> str:
    return broker[1]


@pytest.fixture
def client(bootstrap: str) -> Iterator[Any]:
    from tidelog.client.kafka_client import KafkaClient

    with KafkaClient(bootstrap, retry_backoff_ms=20) as c:
        yield c


@pytest.fixture
def new_topic(client: Any) -> Any:
    def make(partitions: int = 1) -> str:
        name = f"s-{uuid.uuid4().hex[:10]}"
        client.create_topics({name: partitions})
        return name

    return make


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rerun_when_a_worker_did_not_connect_back(items)
