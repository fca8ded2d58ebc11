"""The switch between the native core and its pure-Python twins.

``tidelog._native._core`` is an optional C extension holding the per-record loops (the
produce validator's walk, the cleaner's record scan). Each loop keeps its pure-Python twin
where it always lived; the twin is the reference and the fallback. ``core`` is the loaded
extension, or None when it was not built (no compiler at install time) or when the
environment variable ``TIDELOG_PURE_PYTHON`` is set to anything but ``""``/``0``. Callers bind
their loop once at import: ``_walk = core.walk if core else _walk_py``.

Like records, this package imports nothing of ours but ``tidelog.records`` (the extension
raises ``tidelog.records.errors.InvalidRecordError``), so every layer may use it.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from types import ModuleType

PURE_PYTHON_ENV = "TIDELOG_PURE_PYTHON"


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None, f"python ({PURE_PYTHON_ENV} is set)"
    try:
        _core = importlib.import_module("tidelog._native._core")
    except ImportError as e:
        return None, f"python (native core not built: {e})"
    return _core, "native (C extension)"


core, core_description = _load()


def _load_stages() -> ModuleType | None:
    """The small ``_stages`` extension (request_stages.c: Kafka's RequestMetrics in one call
    per request), under the same switch as ``core``."""
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("tidelog._native._stages")
    except ImportError:
        return None


_stages = _load_stages()
observe_stages: Callable[..., None] | None = _stages.observe_stages if _stages else None
observe_request: Callable[..., None] | None = _stages.observe_request if _stages else None
observe_request_bind: Callable[[type], None] | None = (
    _stages.observe_request_bind if _stages else None
)


def core_name() -> str:
    """``native`` or ``python``: which core this process runs."""
    return "native" if core is not None else "python"
