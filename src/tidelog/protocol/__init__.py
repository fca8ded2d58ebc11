"""Kafka wire protocol: framing, request decoding through kio, fast response encoders.

Importing this package first loads kio's type module with Hypothesis hidden: kio registers
Hypothesis strategies for its types whenever Hypothesis is importable, which costs ~200 ms
of start-up and is never needed by a broker or a client. Done only when nothing imported
Hypothesis or kio yet (under pytest, Hypothesis' plugin is already loaded: nothing changes).
"""

from __future__ import annotations

import sys


def _import_kio_fast() -> None:
    if "kio.static._phantom" in sys.modules or "hypothesis" in sys.modules:
        return
    sys.modules["hypothesis"] = None  # type: ignore[assignment]
    try:
        import kio.static._phantom  # noqa: F401
    finally:
        del sys.modules["hypothesis"]


_import_kio_fast()
