"""The broker's GIL switch interval (tidelog.server.gil): a thread running Python holds the
event loop's thread off the GIL for at most about 1 ms, not CPython's 5 ms. Each case runs
in its own interpreter, as the setting is process-wide."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tidelog.server.gil import DISABLE_ENV, SWITCH_INTERVAL_S, tune_switch_interval

# a background thread spinning in Python (a checkpoint over many logs); the main thread
# wakes from short sleeps and measures how long it waited for the GIL each time
_CHILD = """
import json, statistics, sys, threading, time
from tidelog.server.gil import tune_switch_interval
said = tune_switch_interval()
stop = False
def spin():
    n = 0
    while not stop:
        n += 1
t = threading.Thread(target=spin)
t.start()
waits = []
for _ in range(200):
    t0 = time.perf_counter()
    time.sleep(0.0002)
    waits.append((time.perf_counter() - t0) * 1000)
stop = True
t.join()
print(json.dumps({"said": said, "interval": sys.getswitchinterval(),
                  "median_ms": statistics.median(waits)}))
"""


def _run(env: dict[str, str]) -> dict[str, float | str]:
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                         check=True, timeout=60, env={**os.environ, **env})
    result: dict[str, float | str] = json.loads(out.stdout)
    return result


def test_the_switch_interval_is_tuned_unless_disabled() -> None:
    tuned = _run({DISABLE_ENV: "1"})
    default = _run({DISABLE_ENV: "0"})
    assert tuned["interval"] == SWITCH_INTERVAL_S and tuned["said"] == "1 ms"
    assert default["interval"] == 0.005 and "TIDELOG_GIL_TUNING=0" in str(default["said"])
    # what the interval does to a sleeper's wait for the GIL is a measure of the machine (a
    # median of waits against a spinning thread, printed here): bench/, not an assertion
    print(f"median wait: tuned {tuned['median_ms']} ms, default {default['median_ms']} ms")


def test_disable_env_keeps_the_interval() -> None:
    before = sys.getswitchinterval()
    said = tune_switch_interval({DISABLE_ENV: "0"})
    assert sys.getswitchinterval() == before
    assert said.endswith(f"({DISABLE_ENV}=0)")
