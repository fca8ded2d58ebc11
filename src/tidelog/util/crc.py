"""CRC-32C (Castagnoli, a RecordBatch's checksum) from the crc32c package's C function.

The function is loaded without the package's ``__init__``: that one reads its own version
through importlib.metadata (which imports email, zipfile, csv...), ~25 ms of every process's
start-up for a version string nobody reads. Where the package is laid out otherwise, it is
imported as usual."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable

Buffer = bytes | bytearray | memoryview


def load_crc32c() -> Callable[[Buffer], int]:
    """The crc32c package's ``crc32c(data) -> int``, hardware-accelerated where it can be."""
    loaded = sys.modules.get("crc32c")
    spec = None if loaded is not None else importlib.util.find_spec("crc32c")
    for where in (spec.submodule_search_locations or []) if spec else []:
        names = sorted(n for n in os.listdir(where) if n.startswith("_crc32c.") and n.endswith(".so"))
        for name in names:
            ext = importlib.machinery.ExtensionFileLoader("_crc32c", os.path.join(where, name))
            ext_spec = importlib.util.spec_from_loader("_crc32c", ext)
            if ext_spec is not None:
                module = importlib.util.module_from_spec(ext_spec)
                ext.exec_module(module)
                crc: Callable[[Buffer], int] = module.crc32c
                return crc
    import crc32c

    return crc32c.crc32c
