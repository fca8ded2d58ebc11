"""Two behaviours of Spark's Kafka sink that a Python data source cannot declare to Spark.

* The default save mode. ``df.write.format("kafka").save()`` works in Spark (its Kafka sink
  accepts ErrorIfExists, the default, and Append), but Spark refuses any mode other than
  Append/Overwrite for a Python data source before the source is asked. For
  ``format("tidelog")`` the default and ``error``/``errorifexists`` therefore become append
  (Ignore stays rejected by Spark, Overwrite by the sink, as in Spark's Kafka sink).
* Update output mode. Spark's Kafka sink is ``SupportsStreamingUpdateAsAppend``; a Python
  data source cannot say so and Spark fails the query ("does not support Update mode"). For
  ``format("tidelog")`` with ``outputMode("update")`` the query runs as ``foreachBatch`` with
  a batch append of each micro-batch's updated rows: what Spark's Kafka sink writes.

Both are small wrappers around PySpark's (classic) DataFrameWriter / DataStreamWriter,
installed once by ``tidelog.spark.register`` or ``import tidelog.spark``; every other format
goes through untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_DEFAULT_MODES = ("error", "errorifexists", "default")


def _is_tidelog(fmt: Any) -> bool:
    return isinstance(fmt, str) and fmt.lower() == "tidelog"


def _patch_batch_writer() -> None:
    from pyspark.sql.readwriter import DataFrameWriter

    mode, fmt = DataFrameWriter.mode, DataFrameWriter.format
    save: Callable[..., None] = DataFrameWriter.save  # typed also where pyspark is absent

    def tidelog_mode(self: Any, saveMode: str | None) -> Any:
        if saveMode is not None:
            self._tidelog_mode = saveMode.lower()
        return mode(self, saveMode)

    def tidelog_format(self: Any, source: str) -> Any:
        self._tidelog_format = source
        return fmt(self, source)

    def tidelog_save(self: Any, path: str | None = None, format: str | None = None,
                     mode: str | None = None, partitionBy: Any = None, **options: Any) -> None:
        if _is_tidelog(format or getattr(self, "_tidelog_format", None)):
            chosen = str(mode or getattr(self, "_tidelog_mode", None) or "default").lower()
            if chosen in _DEFAULT_MODES:  # Spark's Kafka sink accepts ErrorIfExists
                mode = "append"
        return save(self, path, format, mode, partitionBy, **options)

    DataFrameWriter.mode = tidelog_mode  # type: ignore[method-assign]
    DataFrameWriter.format = tidelog_format  # type: ignore[method-assign]
    DataFrameWriter.save = tidelog_save  # type: ignore[method-assign]


def _patch_stream_writer() -> None:
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    output_mode, fmt, option, options, start = (
        DataStreamWriter.outputMode, DataStreamWriter.format, DataStreamWriter.option,
        DataStreamWriter.options, DataStreamWriter.start,
    )

    def tidelog_output_mode(self: Any, outputMode: str) -> Any:
        self._tidelog_output_mode = outputMode.lower()
        return output_mode(self, outputMode)

    def tidelog_format(self: Any, source: str) -> Any:
        self._tidelog_format = source
        return fmt(self, source)

    def tidelog_option(self: Any, key: str, value: Any) -> Any:
        self.__dict__.setdefault("_tidelog_options", {})[key] = value
        return option(self, key, value)

    def tidelog_options(self: Any, **opts: Any) -> Any:
        self.__dict__.setdefault("_tidelog_options", {}).update(opts)
        return options(self, **opts)

    def tidelog_start(self: Any, path: str | None = None, format: str | None = None,
                      outputMode: str | None = None, partitionBy: Any = None,
                      queryName: str | None = None, **opts: Any) -> Any:
        self.options(**opts)
        if outputMode is not None:
            self.outputMode(outputMode)
        if format is not None:
            self.format(format)
        update = getattr(self, "_tidelog_output_mode", "append") == "update"
        if update and _is_tidelog(getattr(self, "_tidelog_format", None)):
            self.foreachBatch(_append_batch(dict(getattr(self, "_tidelog_options", {}))))
        return start(self, path, None, None, partitionBy, queryName)

    DataStreamWriter.outputMode = tidelog_output_mode  # type: ignore[method-assign]
    DataStreamWriter.format = tidelog_format  # type: ignore[method-assign]
    DataStreamWriter.option = tidelog_option  # type: ignore[method-assign]
    DataStreamWriter.options = tidelog_options  # type: ignore[method-assign]
    DataStreamWriter.start = tidelog_start  # type: ignore[method-assign]


def _append_batch(options: dict[str, Any]) -> Any:
    sink_options = {k: v for k, v in options.items() if k.lower() != "checkpointlocation"}

    def write(df: Any, batch_id: int) -> None:
        df.write.format("tidelog").options(**sink_options).mode("append").save()

    return write


_installed = False


def install() -> None:
    """Idempotent; a no-op without PySpark's classic writers (e.g. Spark Connect only)."""
    global _installed
    if _installed:
        return
    try:
        _patch_batch_writer()
        _patch_stream_writer()
    except ImportError:
        return
    _installed = True
