"""Kafka's log layer: segments, indexes, Log, loading, retention, producer state.

Names are exported lazily so that importing one submodule (e.g. ``storage.errors``) does
not load the whole layer.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Log": "log",
    "LogAppendInfo": "log_append",
    "FetchIsolation": "log_read",
    "AppendOrigin": "validator",
    "LogLoader": "loader",
    "ProducerStateManager": "producer_state",
    "LogSegment": "segment",
    "LogSegments": "segments",
    "FileRecords": "file_records",
    "FileSlice": "file_records",
    "StorageError": "errors",
    "OffsetOutOfRangeError": "errors",
    "kafka_error_of": "errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tidelog.storage' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
