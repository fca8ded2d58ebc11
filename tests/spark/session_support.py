"""The test run's one local SparkSession, built the same way wherever a directory's conftest
asks for it (``getOrCreate``: the first asker creates it)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

# Spark's PythonWorkerFactory.createSimpleWorker waits a hard-coded 10 s (no setting changes
# it) for a new Python worker, such as a streaming source's runner, to start and connect back.
# On a loaded 2-core machine the interpreter's start can take longer, and the query fails with
# this message whatever the data source does. Only that failure runs the test again, once.
WORKER_DID_NOT_CONNECT_BACK = (r"Python worker failed to connect back"
                               r"|Timed out while waiting for the Python worker to connect back")


def spark_test_session() -> Iterator[Any]:
    """A generator for a session-scoped fixture: yields the session, stops it at the end."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import tidelog.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tidelog-tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    tidelog.spark.register(session)
    yield session
    session.stop()


def rerun_when_a_worker_did_not_connect_back(items: list[pytest.Item], fixture: str = "spark",
                                             reruns: int = 2, delay_s: float = 5.0) -> None:
    """Each test that uses the SparkSession runs again, up to ``reruns`` times and ``delay_s``
    after its failure, if, and only if, it failed because Spark gave up on a Python worker's
    connect-back (``WORKER_DID_NOT_CONNECT_BACK``: Spark waits a fixed 10 s for a new worker
    to start, which a machine running several brokers beside the suite can exceed twice in a
    row); any other failure, or that one every time, fails it. For
    ``pytest_collection_modifyitems`` of every conftest that offers the session as
    ``fixture`` (idempotent)."""
    for item in items:
        if fixture in getattr(item, "fixturenames", ()) and not item.get_closest_marker("flaky"):
            item.add_marker(pytest.mark.flaky(reruns=reruns, reruns_delay=delay_s,
                                              only_rerun=[WORKER_DID_NOT_CONNECT_BACK]))
