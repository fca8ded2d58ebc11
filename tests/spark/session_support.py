"""The test run's one local SparkSession, built the same way wherever a directory's conftest
asks for it (``getOrCreate``: the first asker creates it)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any


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
