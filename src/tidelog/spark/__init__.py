"""PySpark data source "tidelog": ``tidelog.spark.register(spark)`` then
``spark.read.format("tidelog")``. Attributes load lazily so that the pure-Python parts
(options, planning) import without pyspark."""

from __future__ import annotations

import sys
from typing import Any

if "pyspark.sql" in sys.modules:  # a session's user: Spark's Kafka-sink save/output modes
    from .compat import install as _install_compat

    _install_compat()

__all__ = ["TidelogDataSource", "register"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import source

        return getattr(source, name)
    raise AttributeError(f"module 'tidelog.spark' has no attribute {name!r}")
