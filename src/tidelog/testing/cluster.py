"""A real tidelog cluster for tests: a ZooKeeper server and N ``tidelog serve`` processes.

Each broker is its own process (so a test can SIGKILL one, or SIGTERM it for a controlled
shutdown), on an ephemeral port with its own temporary log dir, all joined through one
ZooKeeper chroot::

    from tidelog.testing import EmbeddedCluster

    with EmbeddedCluster(brokers=3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        ...
        cluster.kill(cluster.controller_id())   # SIGKILL: its ZooKeeper session expires
        cluster.restart(2)

Pass ``zookeeper=`` a running :class:`~tidelog.testing.zookeeper.ZooKeeperServer` to share
one between clusters (each cluster takes a fresh chroot); otherwise the cluster starts its
own and stops it on exit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from tidelog.server.zk.client import KafkaZkClient

from .processes import spawn
from .zookeeper import ZooKeeperServer


class BrokerProcess:
    """One ``tidelog serve`` process, the leader of its own process group
    (:func:`~tidelog.testing.processes.spawn`: killed after the test whatever ended it);
    ``port`` is read from its "listening on" log line."""

    def __init__(
        self,
        broker_id: int,
        log_dir: Path,
        props: Mapping[str, str],
        command_prefix: Sequence[str] = (),
    ) -> None:
        self.broker_id = broker_id
        self.command_prefix = list(command_prefix)  # e.g. ``ip netns exec NAME``
        self.log_dir = log_dir
        self.props = dict(props)
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.output: list[str] = []  # since the last start
        self.all_output: list[str] = []  # every start's, each start marked
        self._reader: threading.Thread | None = None  # reads the last start's stderr

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 60.0) -> BrokerProcess:
        cmd = [*self.command_prefix, sys.executable, "-m", "tidelog.cli.main", "serve"]
        for k, v in self.props.items():
            cmd += ["--override", f"{k}={v}"]
        self.output = []
        self.port = 0  # a start that fails must not look ready on the last start's port
        self.all_output.append(f"--- broker {self.broker_id} starts at {time.strftime('%H:%M:%S')}\n")
        self.proc = spawn(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        ready = threading.Event()
        self._reader = threading.Thread(target=self._read, args=(ready,), daemon=True)
        self._reader.start()
        if not ready.wait(timeout) or not self.port:
            self.kill()
            raise RuntimeError(f"broker {self.broker_id} did not start:\n" + "".join(self.output[-30:]))
        return self

    def _read(self, ready: threading.Event) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.output.append(line)
            self.all_output.append(line)
            if not ready.is_set() and "listening on" in line:
                self.port = int(line.split("listening on ", 1)[1].split()[0].rsplit(":", 1)[1])
                ready.set()
        ready.set()  # exited

    def output_tail(self, lines: int = 60, timeout: float = 5.0) -> str:
        """The last ``lines`` of every start's output. Of a process that exited, what it
        wrote last (the line saying why) may still be in the pipe when its exit code is
        known: read to the end first (at most ``timeout`` seconds)."""
        if self.proc is not None and self.proc.poll() is not None and self._reader is not None:
            self._reader.join(timeout)
        return "".join(self.all_output[-lines:])

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: no controlled shutdown, the ZooKeeper session expires on its own."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # its process group (spawn)
            self.proc.wait()

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM: a controlled shutdown, then exit."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc is not None else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return -9


class EmbeddedCluster:
    def __init__(
        self,
        brokers: int = 3,
        config: Mapping[str, Any] | None = None,
        *,
        zookeeper: ZooKeeperServer | None = None,
        racks: Mapping[int, str] | None = None,
        first_broker_id: int = 1,
    ) -> None:
        self.size = brokers
        self.first_broker_id = first_broker_id  # ids first_broker_id .. + brokers - 1
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        self._own_zk = zookeeper is None
        self.zookeeper = zookeeper
        self.racks = dict(racks or {})
        self.chroot = f"/tidelog-{uuid.uuid4().hex[:12]}"
        self.directory: Path | None = None
        self.brokers: dict[int, BrokerProcess] = {}
        self._zk: KafkaZkClient | None = None

    @property
    def zookeeper_connect(self) -> str:
        assert self.zookeeper is not None
        return self.zookeeper.connect_string(self.chroot)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(
            f"{self.broker_host(i)}:{b.port}" for i, b in self.brokers.items() if b.running
        )

    def broker_host(self, broker_id: int) -> str:
        """The address broker ``broker_id`` listens on (a subclass may give each its own)."""
        return "127.0.0.1"

    def broker_command_prefix(self, broker_id: int) -> list[str]:
        """Prepended to the broker's command line (a subclass may run it in a namespace)."""
        return []

    def broker_props(self, broker_id: int) -> dict[str, str]:
        assert self.directory is not None
        props = {
            "broker.id": str(broker_id),
            "listeners": f"PLAINTEXT://{self.broker_host(broker_id)}:0",
            "log.dirs": str(self.directory / f"broker-{broker_id}"),
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.session.timeout.ms": "6000",
            "controlled.shutdown.retry.backoff.ms": "500",
            **self.config,
        }
        if broker_id in self.racks:
            props["broker.rack"] = self.racks[broker_id]
        return props

    def start(self) -> EmbeddedCluster:
        self.directory = Path(tempfile.mkdtemp(prefix="tidelog-cluster-"))
        try:
            if self.zookeeper is None:
                self.zookeeper = ZooKeeperServer().start()
            first = self.first_broker_id
            for broker_id in range(first, first + self.size):
                self.brokers[broker_id] = BrokerProcess(
                    broker_id, self.directory / f"broker-{broker_id}",
                    self.broker_props(broker_id), self.broker_command_prefix(broker_id),
                ).start()  # fmt: skip
            self.wait_for_metadata()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_for_metadata(self, timeout: float = 60.0) -> None:
        """Until every running broker's Metadata shows every running broker and the
        controller (Kafka's waitUntilBrokerMetadataIsPropagated): a client bootstrapping
        from a broker the controller has not reached yet would see no controller."""
        running = sorted(b for b, p in self.brokers.items() if p.running)
        deadline = time.monotonic() + timeout
        for broker_id in running:
            host = self.broker_host(broker_id)
            admin = AdminClient({"bootstrap.servers": f"{host}:{self.brokers[broker_id].port}"})
            while True:
                shown = self._metadata_view(admin, deadline)
                if shown is not None and shown[0] == running and shown[1] in running:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"broker {broker_id} shows brokers, controller {shown}")
                time.sleep(0.05)

    @staticmethod
    def _metadata_view(admin: AdminClient, deadline: float) -> tuple[list[int], int] | None:
        """The brokers and controller one broker's Metadata shows, or None while it shows
        nothing yet: a broker the controller has not sent UpdateMetadata answers with no
        brokers and no topics, which librdkafka reports as a partial response (retriable)."""
        try:
            md = admin.list_topics(timeout=max(1.0, deadline - time.monotonic()))
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._PARTIAL:
                raise
            return None
        return sorted(md.brokers), md.controller_id

    @property
    def zk(self) -> KafkaZkClient:
        """A ZooKeeper client on the cluster's chroot (for reading znodes in tests)."""
        if self._zk is None:
            self._zk = KafkaZkClient(self.zookeeper_connect)
            self._zk.start()
        return self._zk

    def controller_id(self) -> int | None:
        return self.zk.get_controller_id()

    def wait_for_controller(self, timeout: float = 30.0, *, other_than: int | None = None) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = self.controller_id()
            if current is not None and current != other_than:
                return current
            time.sleep(0.05)
        raise TimeoutError("no controller elected")

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def stop_broker(self, broker_id: int) -> int:
        return self.brokers[broker_id].stop()

    def start_broker(self, broker_id: int, timeout: float = 30.0) -> BrokerProcess:
        """Start a stopped or killed broker once ZooKeeper no longer holds its previous
        registration. As Kafka's (KafkaZkClient's CheckedEphemeral), a broker whose id's
        ephemeral ``/brokers/ids`` znode belongs to another session refuses to register and
        exits; after a SIGKILL that is the dead process's session until ZooKeeper expires it
        (``zookeeper.session.timeout.ms``), so an operator's restart waits for it, as here."""
        deadline = time.monotonic() + timeout
        while self.zk.get_broker(broker_id) is not None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {broker_id} still registered after {timeout} s")
            time.sleep(0.05)
        return self.brokers[broker_id].start()

    def restart(self, broker_id: int) -> BrokerProcess:
        b = self.brokers[broker_id]
        b.stop()
        self.start_broker(broker_id)
        self.wait_for_metadata()
        return b

    def stop(self) -> None:
        for b in self.brokers.values():
            b.stop()
        if self._zk is not None:
            self._zk.close()
            self._zk = None
        if self._own_zk and self.zookeeper is not None:
            self.zookeeper.stop()
            self.zookeeper = None
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None and issubclass(exc_type, Exception):
            self.print_output_tails()
        self.stop()

    def print_output_tails(self, lines: int = 60) -> None:
        """Each broker's last log lines (every start's), for a test that failed inside the
        ``with``: pytest shows them with its captured output."""
        for broker_id, broker in sorted(self.brokers.items()):
            code = broker.proc.poll() if broker.proc is not None else None
            print(f"=== broker {broker_id}: exit code {code}, last {lines} log lines ===")
            print(broker.output_tail(lines), end="")
