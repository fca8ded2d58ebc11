"""The GIL switch interval of the broker process (``tidelog serve`` only).

The event loop shares the interpreter with the threads of the log manager's scheduler: the
checkpoints of recovery points and log start offsets (every 60 s), the retention check (every
5 minutes), the flusher. At 1,000 partitions each of those runs 1 to 9 ms of Python, and a
thread that runs Python keeps the GIL until CPython's switch interval, 5 ms by default, asks it
to hand over. The loop then reads no socket for up to 5 ms at a time, and under a steady
produce load of one-record requests (librdkafka: one partition per request, 5 in flight) each
such wait grows into a backlog: produce->ack p99.9 10-18 ms, max 20-28 ms with those tasks
made frequent (bench: checkpoints every 5 s, retention every 10 s), against 6-11 ms and
12-18 ms with a 1 ms interval. A thread waiting on I/O holds no GIL, so the shorter interval
only adds hand-overs while two threads run Python at once (at most 1,000 a second).

The setting is the process owner's, so only ``serve`` applies it, never an embedded broker;
``TIDELOG_GIL_TUNING=0`` keeps CPython's.
"""

from __future__ import annotations

import os
import sys

SWITCH_INTERVAL_S = 0.001
DISABLE_ENV = "TIDELOG_GIL_TUNING"


def tune_switch_interval(environ: dict[str, str] | None = None) -> str:
    """Apply SWITCH_INTERVAL_S unless the environment says not to: what was done."""
    env = os.environ if environ is None else environ
    if env.get(DISABLE_ENV, "1") == "0":
        return f"{sys.getswitchinterval() * 1000:g} ms, CPython's ({DISABLE_ENV}=0)"
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    return f"{SWITCH_INTERVAL_S * 1000:g} ms"
