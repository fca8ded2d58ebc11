"""The broker's glibc settings: a ~1 MB request buffer reuses heap pages instead of
faulting in fresh ones (tidelog.server.allocator). Each case runs in its own interpreter,
as the setting is process-wide."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tidelog.server.allocator import DISABLE_ENV, _mallopt, tune_allocator

pytestmark = pytest.mark.skipif(_mallopt() is None, reason="glibc only (musl: no mallopt)")

# one produce frame's life, 200 times: a few ~1 MB buffers alive at once (read buffer,
# frame, records, a copy), then all freed; glibc's defaults trim the freed heap each time
_CHILD = """
import json, resource, sys
from tidelog.server.allocator import tune_allocator
said = tune_allocator()
frame = b"x" * 1_000_000
def request():
    a = bytearray(frame); b = bytes(a); c = bytearray(b); d = bytes(c)
for _ in range(20):  # warm-up: glibc's dynamic threshold moves after the first frees
    request()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(200):
    request()
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"said": said, "faults": faults}))
"""


def _run(extra_env: dict[str, str]) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("MALLOC_") or k == DISABLE_ENV)}
    out = subprocess.run([sys.executable, "-c", _CHILD], env={**env, **extra_env},
                         capture_output=True, text=True, check=True, timeout=60)
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_tuned_frames_reuse_heap_pages() -> None:
    tuned, untuned = _run({}), _run({DISABLE_ENV: "0"})
    assert str(tuned["said"]).startswith("glibc, mmap threshold 4 MiB")
    assert untuned["said"] == f"glibc defaults ({DISABLE_ENV}=0)"
    # 200 requests x 4 MB = 195,000 pages: glibc's defaults fault most of them in afresh
    # (measured ~189,000); tuned, the same heap pages serve every request
    assert int(untuned["faults"]) > 50_000, untuned  # type: ignore[call-overload]
    assert int(tuned["faults"]) < 2_000, tuned  # type: ignore[call-overload]


def test_glibc_variables_from_the_environment_win() -> None:
    said = tune_allocator({"MALLOC_ARENA_MAX_": "2"})
    assert said == "glibc defaults with MALLOC_ARENA_MAX_ from the environment"
    assert tune_allocator({DISABLE_ENV: "0"}).endswith(f"({DISABLE_ENV}=0)")
