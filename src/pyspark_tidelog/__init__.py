"""Automatic registration of the "tidelog" data source: PySpark imports every top-level module
named ``pyspark_*`` on its Python path and registers its ``DefaultSource`` under
``DefaultSource.name()``, so ``spark.read.format("tidelog")`` works without
``tidelog.spark.register(spark)`` once tidelog is installed."""

from tidelog.spark.source import TidelogDataSource as DefaultSource

__all__ = ["DefaultSource"]
