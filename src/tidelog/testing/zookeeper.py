"""A real Apache ZooKeeper server for tests: Debian's ``zookeeper`` package, standalone.

``ZooKeeperServer`` writes a ``zoo.cfg`` in a temporary directory, starts
``ZooKeeperServerMain`` on a free 127.0.0.1 port (no admin HTTP server), waits until the
four-letter command ``ruok`` answers ``imok`` and stops the process (and its data) on exit::

    with ZooKeeperServer() as zk:
        config = {"zookeeper.connect": zk.connect_string("/cluster-a")}

A missing Java runtime or ZooKeeper jar raises :class:`ZooKeeperUnavailable`; the pytest
fixtures turn it into a skip, or a failure when ``CI`` is set.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from .processes import kill_group, spawn

ZOOKEEPER_JARS = ("/usr/share/java/zookeeper.jar",)
ZOOKEEPER_CONF = "/etc/zookeeper/conf_example"  # log4j.properties of the Debian package


class ZooKeeperUnavailable(RuntimeError):
    """No Java runtime or ZooKeeper jar on this machine (apt-get install zookeeper)."""


def find_zookeeper_jar() -> str:
    for jar in (os.environ.get("TIDELOG_ZOOKEEPER_JAR", ""), *ZOOKEEPER_JARS):
        if jar and Path(jar).is_file():
            return jar
    raise ZooKeeperUnavailable("ZooKeeper is not installed (apt-get install zookeeper)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def four_letter(port: int, command: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command (``ruok``, ``srvr``, ``mntr``) and read the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(command.encode())
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server process on a free port with a temporary data dir."""

    def __init__(self, *, tick_time_ms: int = 500, start_timeout: float = 30.0) -> None:
        self.tick_time_ms = tick_time_ms
        self.start_timeout = start_timeout
        self.port = 0
        self.directory: Path | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def connect_string(self, chroot: str = "") -> str:
        """``zookeeper.connect`` for this server, with an optional chroot (``/name``)."""
        return self.hosts + chroot

    def start(self) -> ZooKeeperServer:
        java = shutil.which("java")
        if java is None:
            raise ZooKeeperUnavailable("no java runtime (apt-get install default-jre-headless)")
        jar = find_zookeeper_jar()
        self.directory = Path(tempfile.mkdtemp(prefix="tidelog-zk-"))
        for _ in range(5):
            self.port = free_port()
            self.process = self._spawn(java, jar)
            if self._wait_ready():
                return self
            self._kill()
        self.stop()
        raise RuntimeError(f"ZooKeeper did not answer ruok in {self.start_timeout}s: {self.log_tail()}")

    def _spawn(self, java: str, jar: str) -> subprocess.Popen[bytes]:
        assert self.directory is not None
        data = self.directory / "data"
        data.mkdir(exist_ok=True)
        cfg = self.directory / "zoo.cfg"
        cfg.write_text(
            f"tickTime={self.tick_time_ms}\ndataDir={data}\nclientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\nminSessionTimeout=1000\nmaxSessionTimeout=60000\n"
            "admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr,mntr,stat\n"
            "maxClientCnxns=0\n"
        )
        log = (self.directory / "zookeeper.log").open("ab")
        cmd = [
            java, "-Xmx256m", "-XX:+UseSerialGC", "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.root.logger=INFO,CONSOLE", "-Dzookeeper.console.threshold=WARN",
            "-cp", f"{ZOOKEEPER_CONF}:{jar}",
            "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg),
        ]  # fmt: skip
        with log:
            return spawn(cmd, stdout=log, stderr=subprocess.STDOUT)

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                return False
            with contextlib.suppress(OSError):
                # ruok answers imok before the server serves; srvr says when it does
                if four_letter(self.port, "ruok") == "imok" and "Mode:" in four_letter(
                    self.port, "srvr"
                ):
                    return True
            time.sleep(0.05)
        return False

    def log_tail(self, lines: int = 20) -> str:
        if self.directory is None:
            return ""
        path = self.directory / "zookeeper.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def _kill(self) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        kill_group(proc)

    def stop(self) -> None:
        self._kill()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
