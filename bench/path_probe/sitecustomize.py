"""Which path each Produce frame of a live broker takes: put this directory on PYTHONPATH and
name a directory in ``TIDELOG_PATH_PROBE``; each tidelog process started so counts, until it
exits, what the connection's native call (``take_one_now``, server/connection_now.py)
returned for each read it was given, and the frames of every read handed to the general
steps (``KafkaConnection._take``), and writes the counts to ``<dir>/paths.<pid>``:

    PYTHONPATH=bench/path_probe TIDELOG_PATH_PROBE=/tmp/paths .venv/bin/python \\
        bench/tail_latency.py --brokers tidelog --no-consume --loads paced,rdkperf \\
        --beside quiet,busy --scenarios 5000x1000 --runs 1 --seconds 6 --warmup 4
    cat /tmp/paths/paths.*

``answered``, ``rest``, ``declined`` and ``not one`` are the native call's returns (its
answer written; handed back to ``_one_rest``; declined to the twin; not one whole frame);
``general reads`` the reads the general steps took, ``general frames`` and ``general
produce frames`` the whole frames they held. The wrapping is done from a thread once the
connection's modules are imported (a process that never imports them is left alone after
30 s), so the first reads of a process may go uncounted.
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


def _frames(data: Any, end: int) -> None:
    pos = 0
    while end - pos >= 6:
        size = int.from_bytes(bytes(data[pos:pos + 4]), "big")
        if size < 2 or end - pos - 4 < size:
            break
        _counts["general frames"] += 1
        if data[pos + 4] == 0 and data[pos + 5] == 0:
            _counts["general produce frames"] += 1
        pos += 4 + size


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
        names = {True: "answered", False: "not one"}

        def take(c: Any, data: Any, end: int) -> Any:
            r = native(c, data, end)
            _counts[names[r] if type(r) is bool else "declined" if r is None else "rest"] += 1
            return r

        vars(now)["take_one_now"] = take
    general = conn.KafkaConnection._take

    def _take(self: Any, data: Any, end: int) -> None:
        _counts["general reads"] += 1
        _frames(data, end)
        general(self, data, end)

    conn.KafkaConnection._take = _take
    atexit.register(_write)


def _write() -> None:
    os.makedirs(_DIR, exist_ok=True)
    with open(os.path.join(_DIR, f"paths.{os.getpid()}"), "w") as f:
        f.write(f"{dict(_counts)}\n")


if _DIR:
    threading.Thread(target=_wrap, daemon=True).start()
