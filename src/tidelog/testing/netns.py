"""A tidelog cluster whose brokers each run in their own network namespace, so a test can cut
the network between them (Jepsen's ``partition`` nemesis). Needs root and ``ip`` (iproute2).

Layout (``X`` leased per cluster under a lock file shared by every process, so several
clusters can coexist, also in two pytest-xdist workers)::

    root namespace: bridge with 10.77.X.254 (clients, the test) and 10.77.X.253 (ZooKeeper,
                    a TCP relay to the ZooKeeper server on 127.0.0.1)
    namespace of broker N: veth ``eth0`` 10.77.X.N on the bridge, ``lo``

A cut is a blackhole route in a namespace (``ip -n NS route add blackhole ADDR/32``): packets
to that address are dropped, so connections hang and new ones time out, as in a real network
partition. The clients in the root namespace still reach every broker::

    with NetnsCluster(brokers=3, zookeeper=zk) as cluster:
        cluster.isolate(1)                 # broker 1 from the other brokers and ZooKeeper
        cluster.cut_from_zookeeper(2)
        cluster.split([1], [2, 3])
        cluster.heal()

With ``log_dir_bytes`` each broker has two log dirs, ``a`` and ``b``, each a tmpfs of that
size: ``fill_log_dir(N, "a")`` fills one with a file until the file system answers ENOSPC (the
broker's next write there fails as on a full disk), ``free_log_dirs(N)`` deletes the fillers.

Everything (namespaces, links, the relay, the mounts) is removed on exit, also when the start
fails.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .cluster import EmbeddedCluster
from .zookeeper import ZooKeeperServer


def ip(*args: str, check: bool = True) -> None:
    subprocess.run(["ip", *args], check=check, capture_output=True, timeout=30)


LOG_DIR_NAMES = ("a", "b")
FILLER = "filler"
_CHUNK = b"\0" * (1 << 20)


def fill(directory: Path) -> int:
    """Write ``directory/filler`` until the file system refuses (ENOSPC); the bytes written."""
    written = 0
    with open(directory / FILLER, "ab", buffering=0) as f:
        while True:
            try:
                written += f.write(_CHUNK)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                break
        for size in (4096, 1):  # the last pages of a tmpfs a megabyte did not fit in
            try:
                while True:
                    written += f.write(b"\0" * size)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
    return written


def _lease_dir() -> Path:
    """Where the leases live: one directory for every process of the machine (``/run/lock``
    when writable, else the temp dir)."""
    base = Path("/run/lock") if os.access("/run/lock", os.W_OK) else Path(tempfile.gettempdir())
    return base / "tidelog-netns-subnets"


def _routed_subnets() -> set[str]:
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, timeout=30)
    return {line.split()[0] for line in routes.stdout.splitlines() if line}


class SubnetLease:
    """This process's hold on 10.77.X.0/24: an exclusive ``flock`` on ``<dir>/X.lock``, kept
    open until ``release()``. Another process (a second pytest-xdist worker) cannot take the
    same X meanwhile, and the kernel drops the lock with its holder, so a killed test leaves
    no stale lease behind."""

    def __init__(self, subnet: int, fd: int) -> None:
        self.subnet = subnet
        self._fd: int | None = fd

    @classmethod
    def try_take(cls, subnet: int, lock_dir: Path | None = None) -> SubnetLease | None:
        """The lease of ``subnet``, or None when another holder has it or a route to it exists
        (a network that is not ours, or left over)."""
        d = lock_dir or _lease_dir()
        d.mkdir(parents=True, exist_ok=True)
        fd = os.open(d / f"{subnet}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        # checked under the lock: a holder releases only once its bridge (and route) is gone
        if f"10.77.{subnet}.0/24" in _routed_subnets():
            os.close(fd)
            return None
        return cls(subnet, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None


def lease_subnet(*, lock_dir: Path | None = None, candidates: Iterable[int] = range(1, 250),
                 rng: random.Random | None = None) -> SubnetLease:
    """A free ``X``, held until released: tried in random order (clusters of one process
    spread out), each under its lock. RuntimeError when every candidate is taken."""
    order = list(candidates)
    (rng or random.Random()).shuffle(order)
    for x in order:
        lease = SubnetLease.try_take(x, lock_dir)
        if lease is not None:
            return lease
    raise RuntimeError(f"no free 10.77.X.0/24 subnet among {len(order)} candidates")


class TcpRelay:
    """Accepts on ``(host, 0)`` and copies bytes both ways to ``target``, one thread pair per
    connection; ``close()`` ends the listener and every connection."""

    def __init__(self, host: str, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server((host, 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self._listener.accept()
                up = socket.create_connection(self.target, timeout=10)
            except OSError:
                return
            up.settimeout(None)
            with self._lock:
                self._sockets += [down, up]
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                s.close()
            self._sockets.clear()


class NetnsCluster(EmbeddedCluster):
    """An :class:`EmbeddedCluster` with one network namespace per broker (see the module)."""

    def __init__(
        self,
        brokers: int = 3,
        config: Mapping[str, Any] | None = None,
        *,
        zookeeper: ZooKeeperServer | None = None,
        log_dir_bytes: int | None = None,
    ) -> None:
        super().__init__(brokers, config, zookeeper=zookeeper)
        self.log_dir_bytes = log_dir_bytes
        self._mounts: list[Path] = []
        self._lease: SubnetLease | None = lease_subnet()
        self.subnet = self._lease.subnet
        self.tag = f"{os.getpid() % 100000}{self.subnet}"
        self.bridge = f"tlb{self.tag}"
        self._relay: TcpRelay | None = None
        self._namespaces: list[str] = []
        self.cuts: set[tuple[int, str]] = set()  # (broker id, address) blackholed in its ns

    def address(self, last: int) -> str:
        return f"10.77.{self.subnet}.{last}"

    @property
    def client_address(self) -> str:
        return self.address(254)

    @property
    def zookeeper_address(self) -> str:
        return self.address(253)

    def namespace(self, broker_id: int) -> str:
        return f"tidelog-{self.tag}-{broker_id}"

    def veth(self, broker_id: int) -> str:
        """The root namespace's end of the broker's veth pair (on the bridge)."""
        return f"tlv{self.tag}{broker_id}"

    def broker_host(self, broker_id: int) -> str:
        return self.address(broker_id)

    def broker_command_prefix(self, broker_id: int) -> list[str]:
        return ["ip", "netns", "exec", self.namespace(broker_id)]

    def broker_props(self, broker_id: int) -> dict[str, str]:
        props = super().broker_props(broker_id)
        if self.log_dir_bytes is not None:
            dirs = [Path(props["log.dirs"]) / name for name in LOG_DIR_NAMES]
            for d in dirs:  # mounted before the broker starts (it sees them in its namespace)
                self._mount(d)
            props["log.dirs"] = ",".join(str(d) for d in dirs)
        return props

    def _mount(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.log_dir_bytes}", "tmpfs",
                        str(directory)], check=True, capture_output=True, timeout=30)  # fmt: skip
        self._mounts.append(directory)

    def log_dir(self, broker_id: int, name: str) -> Path:
        assert self.directory is not None and name in LOG_DIR_NAMES
        return self.directory / f"broker-{broker_id}" / name

    def fill_log_dir(self, broker_id: int, name: str) -> int:
        """Fill the broker's log dir ``name`` to the last byte; the bytes written."""
        return fill(self.log_dir(broker_id, name))

    def free_log_dirs(self, broker_id: int) -> None:
        for name in LOG_DIR_NAMES:
            (self.log_dir(broker_id, name) / FILLER).unlink(missing_ok=True)

    @property
    def zookeeper_connect(self) -> str:
        if self._relay is None:  # the test's own clients in the root namespace
            return super().zookeeper_connect
        return f"{self.zookeeper_address}:{self._relay.port}{self.chroot}"

    def start(self) -> NetnsCluster:
        if self._lease is None:  # started again after a stop: the same X, held again
            self._lease = SubnetLease.try_take(self.subnet)
            if self._lease is None:
                raise RuntimeError(f"subnet 10.77.{self.subnet}.0/24 was taken meanwhile")
        try:
            if self.zookeeper is None:
                self.zookeeper = ZooKeeperServer().start()
            self._build_network()
            self._relay = TcpRelay(self.zookeeper_address, ("127.0.0.1", self.zookeeper.port))
        except BaseException:
            self.stop()
            raise
        super().start()
        return self

    def _build_network(self) -> None:
        ip("link", "add", self.bridge, "type", "bridge")
        self._namespaces.append("")  # marks the bridge as made
        for last in (254, 253):
            ip("addr", "add", f"{self.address(last)}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for broker_id in range(1, self.size + 1):
            ns = self.namespace(broker_id)
            host_end = self.veth(broker_id)
            ip("netns", "add", ns)
            self._namespaces.append(ns)
            ip("link", "add", host_end, "type", "veth", "peer", "name", "eth0", "netns", ns)
            ip("link", "set", host_end, "master", self.bridge, "up")
            ip("-n", ns, "addr", "add", f"{self.address(broker_id)}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")

    def stop(self) -> None:
        try:
            for b in self.brokers.values():  # before the mounts under their log dirs go
                b.stop()
            for d in reversed(self._mounts):
                subprocess.run(["umount", "-l", str(d)], check=False, capture_output=True,
                               timeout=30)  # fmt: skip
            self._mounts.clear()
            super().stop()
        finally:
            if self._relay is not None:
                self._relay.close()
                self._relay = None
            for ns in reversed(self._namespaces):
                if ns:  # the veth pair first: deleting a namespace frees its links lazily
                    ip("link", "delete", self.veth(int(ns.rsplit("-", 1)[1])), check=False)
                    ip("netns", "delete", ns, check=False)
            if self._namespaces:
                ip("link", "delete", self.bridge, check=False)
            self._namespaces.clear()
            self.cuts.clear()
            if self._lease is not None:  # the bridge and its route are gone: X is free
                self._lease.release()
                self._lease = None

    # -- nemesis operations ---------------------------------------------------------------

    def _cut(self, broker_id: int, address: str) -> None:
        if (broker_id, address) not in self.cuts:
            ns = self.namespace(broker_id)
            ip("-n", ns, "route", "add", "blackhole", f"{address}/32")
            self.cuts.add((broker_id, address))

    def cut_between(self, a: int, b: int) -> None:
        """Drop traffic between brokers ``a`` and ``b`` (both directions)."""
        self._cut(a, self.address(b))
        self._cut(b, self.address(a))

    def cut_from_zookeeper(self, broker_id: int) -> None:
        """The broker cannot reach ZooKeeper (its session expires); brokers still talk."""
        self._cut(broker_id, self.zookeeper_address)

    def cut_from_brokers(self, broker_id: int) -> None:
        """The broker cannot reach the other brokers (nor they it); ZooKeeper still can."""
        for other in self.brokers:
            if other != broker_id:
                self.cut_between(broker_id, other)

    def split(self, side: Iterable[int], other_side: Iterable[int]) -> None:
        """No traffic between the two sides; ZooKeeper stays with ``other_side``."""
        minority = list(side)
        for a in minority:
            self.cut_from_zookeeper(a)
            for b in other_side:
                self.cut_between(a, b)

    def isolate(self, broker_id: int) -> None:
        """The broker alone: cut from every other broker and from ZooKeeper."""
        self.split([broker_id], [b for b in self.brokers if b != broker_id])

    def heal(self) -> None:
        """Remove every cut."""
        for broker_id, address in sorted(self.cuts):
            ip("-n", self.namespace(broker_id), "route", "del", "blackhole", f"{address}/32",
               check=False)  # fmt: skip
        self.cuts.clear()
