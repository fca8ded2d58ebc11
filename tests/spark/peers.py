"""Real Kafka-compatible brokers for client and Spark tests.

``kafka_broker()`` yields (kind, bootstrap) of our own ``tidelog.testing.EmbeddedBroker``
by default, or of Tansu (an independent Rust broker, memory storage; the binary from
``$TANSU_BIN``, else the locator ``$TANSU`` or ``../shared/bin/tansu`` beside the repository,
else ``tansu`` on PATH) with ``TIDELOG_TEST_BROKER=tansu`` (or ``kafka_broker("tansu")``).
Tansu 0.6.0 quirks (seen on the wire): ListOffsets "latest" answers the last batch's base
offset + 1 and timestamp lookups answer 0, so tests that check those against Tansu produce
one record per batch or are limited to our broker.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

# A script that prints the Tansu binary's path, kept beside the repository when there is one.
TANSU_LOCATOR = Path(
    os.environ.get("TANSU") or Path(__file__).resolve().parents[2].parent / "shared/bin/tansu"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tansu_binary() -> str | None:
    env = os.environ.get("TANSU_BIN")
    if env:
        return env
    if not TANSU_LOCATOR.exists():
        return shutil.which("tansu")
    out = subprocess.run([str(TANSU_LOCATOR)], capture_output=True, text=True, check=False)
    path = out.stdout.strip()
    return path if out.returncode == 0 and path else None


@contextlib.contextmanager
def tansu() -> Iterator[str]:
    binary = tansu_binary()
    if binary is None:
        raise RuntimeError("tansu binary not found (set TANSU_BIN)")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # blocks until the broker prints that it is ready
            if line.startswith("ready"):
                break
        else:
            raise RuntimeError(f"tansu exited with {proc.wait()}")
        # keep draining its log so a full pipe never blocks the broker
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.contextmanager
def embedded_tidelog(log_dir: Path | None = None) -> Iterator[str]:
    from tidelog.testing import EmbeddedBroker

    with EmbeddedBroker(log_dir=log_dir) as broker:
        yield broker.bootstrap_servers


def has_embedded_tidelog() -> bool:
    try:
        from tidelog.testing import EmbeddedBroker  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def kafka_broker(kind: str | None = None) -> Iterator[tuple[str, str]]:
    """(kind, bootstrap) of a running broker."""
    kind = kind or os.environ.get("TIDELOG_TEST_BROKER") or (
        "tidelog" if has_embedded_tidelog() else "tansu"
    )
    ctx = embedded_tidelog() if kind == "tidelog" else tansu()
    with ctx as bootstrap:
        yield kind, bootstrap
