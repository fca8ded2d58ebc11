"""Which path each Produce frame of a live broker takes: put this directory on PYTHONPATH and
name a directory in ``TIDELOG_PATH_PROBE``; each tidelog process started so counts, until it
exits, what the connection's native call (``take_one_now``, server/connection_now.py)
returned for each read it was given and the frames it took, and the frames of every read
handed to the general steps (``KafkaConnection._take``), and writes the counts to
``<dir>/paths.<pid>``:

    PYTHONPATH=bench/path_probe TIDELOG_PATH_PROBE=/tmp/paths .venv/bin/python \\
        bench/tail_latency.py --brokers tidelog --no-consume --loads paced,rdkperf \\
        --beside quiet,busy --scenarios 5000x1000 --runs 1 --seconds 6 --warmup 4
    cat /tmp/paths/paths.*

``answered``, ``rest``, ``declined`` and ``none taken`` are the native call's returns (its
answers written; a frame handed back to ``_one_rest``; declined to the twin; no frame
taken); ``native frames`` the frames it took (answered, or the one handed back), ``native
reads of several`` its reads that held more than one; ``general reads`` the reads the
general steps took (or the rest of one), ``general frames`` and ``general produce frames``
the whole frames they held. The wrapping is done from a thread once the connection's
modules are imported (a process that never imports them is left alone after 30 s), so the
first reads of a process may go uncounted.
"""

from __future__ import annotations

import atexit
import collections
import os
import sys
import threading
import time
from typing import Any

_DIR = os.environ.get("TIDELOG_PATH_PROBE", "")
_counts: collections.Counter[str] = collections.Counter()


def _count(data: Any, start: int, end: int) -> tuple[int, int]:
    """The whole frames in ``data[start:end]`` and the Produce frames among them."""
    pos, frames, produce = start, 0, 0
    while end - pos >= 6:
        size = int.from_bytes(bytes(data[pos:pos + 4]), "big")
        if size < 2 or end - pos - 4 < size:
            break
        frames += 1
        produce += data[pos + 4] == 0 and data[pos + 5] == 0
        pos += 4 + size
    return frames, produce


def _wrap() -> None:
    for _ in range(3000):  # (polled: wrapped before the broker takes connections)
        conn = sys.modules.get("tidelog.server.connection")
        now = sys.modules.get("tidelog.server.connection_now")
        if conn is not None and now is not None and hasattr(conn, "KafkaConnection"):
            break
        time.sleep(0.01)
    else:
        return
    native = now.take_one_now
    if native is not None:
        def take(c: Any, data: Any, end: int) -> Any:
            r = native(c, data, end)
            taken = r if type(r) is int else r[6] if type(r) is tuple else 0
            _counts["declined" if r is None else "none taken" if r == 0 else
                    "answered" if type(r) is int else "rest"] += 1
            frames = _count(data, 0, taken)[0]
            _counts["native frames"] += frames
            _counts["native reads of several"] += frames > 1
            return r

        vars(now)["take_one_now"] = take
    general = conn.KafkaConnection._take

    def _take(self: Any, data: Any, end: int, start: int = 0) -> None:
        _counts["general reads"] += 1
        frames, produce = _count(data, start, end)
        _counts["general frames"] += frames
        _counts["general produce frames"] += produce
        general(self, data, end, start)

    conn.KafkaConnection._take = _take
    atexit.register(_write)


def _write() -> None:
    os.makedirs(_DIR, exist_ok=True)
    with open(os.path.join(_DIR, f"paths.{os.getpid()}"), "w") as f:
        f.write(f"{dict(_counts)}\n")


if _DIR:
    threading.Thread(target=_wrap, daemon=True).start()
