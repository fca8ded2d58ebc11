"""What the native twin tests share: the compiled module itself (imported directly, so the
tests also run it under TIDELOG_PURE_PYTHON=1, when tidelog's switch binds the Python
twins), the skip for a machine that could not build it, and the offset map bound to either."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tidelog.storage.cleaner.offset_map import SkimpyOffsetMap

try:
    core: Any = importlib.import_module("tidelog._native._core")
except ImportError:
    core = None
needs_core = pytest.mark.skipif(core is None, reason="native core not built")


class PythonMap(SkimpyOffsetMap):
    __slots__ = ()
    _native = None


class NativeMap(SkimpyOffsetMap):
    __slots__ = ()
    _native = core
