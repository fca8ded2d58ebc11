"""The /config/changes listener over a ZooKeeper connection that flaps within its session: a
TCP relay between the broker's ZooKeeper client and a real ZooKeeper drops the connection,
then lets each new one through its handshake only (kazoo connects, sends what was waiting,
and loses it all). Every change announced before, during and after must reach the handlers:
a read the lost connection failed is made again once connected, the watch included."""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from tidelog.server.zk.change_notifications import ZkNodeChangeNotificationListener
from tidelog.server.zk.client import KafkaZkClient
from tidelog.server.zk.client_metrics_configs import ZkClientMetricsConfigStore
from tidelog.testing.netns import TcpRelay
from tidelog.testing.zookeeper import ZooKeeperServer


class FlappingRelay:
    """Copies bytes between clients and ``target``. ``flap(True)`` drops every connection
    and from then on closes each new one right after ZooKeeper's first answer (the session
    handshake); ``flaps`` counts those."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._flapping = False
        self.flaps = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def flap(self, on: bool) -> None:
        with self._lock:
            self._flapping = on
            if on:
                self._drop_all()

    def _drop_all(self) -> None:
        for s in self._sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self._sockets.clear()

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
                once = self._flapping
            threading.Thread(target=self._pump, args=(down, up), daemon=True).start()
            threading.Thread(target=self._answers, args=(up, down, once), daemon=True).start()

    _pump = staticmethod(TcpRelay._pump)  # copy one way, then shut both down

    def _answers(self, up: socket.socket, down: socket.socket, once: bool) -> None:
        if not once:
            self._pump(up, down)
            return
        try:
            head = self._exactly(up, 4)
            down.sendall(head + self._exactly(up, struct.unpack(">i", head)[0]))
            time.sleep(0.05)  # kazoo is connected and sends what waited: then it is lost
            with self._lock:
                self.flaps += 1
        except OSError:
            pass
        for s in (up, down):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    @staticmethod
    def _exactly(s: socket.socket, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = s.recv(n - len(out))
            if not chunk:
                raise OSError("closed")
            out += chunk
        return out

    def close(self) -> None:
        self._listener.close()
        with self._lock:
            self._drop_all()


def _wait(cond: Callable[[], Any], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_changes_announced_while_the_connection_flaps_all_reach_the_handlers(
        zookeeper_server: ZooKeeperServer) -> None:
    chroot = f"/flap-{uuid.uuid4().hex[:10]}"
    relay = FlappingRelay(("127.0.0.1", zookeeper_server.port))
    writer = KafkaZkClient(zookeeper_server.connect_string(chroot))
    writer.start()
    # a session long enough to outlive the flapping: the connection goes, the session stays
    reader = KafkaZkClient(f"127.0.0.1:{relay.port}{chroot}", session_timeout_ms=30000)
    reader.start()
    try:
        session = reader.zk.client_id
        store = ZkClientMetricsConfigStore(reader)
        store.watch(ZkNodeChangeNotificationListener(reader), 0)
        assert store.loaded
        expected = {"before": {"metrics": "a."}}
        writer.set_or_create_entity_configs("client-metrics", "before", expected["before"])
        _wait(lambda: store.configs == expected, "the change announced before")

        relay.flap(True)
        expected["during"] = {"metrics": "b."}
        writer.set_or_create_entity_configs("client-metrics", "during", expected["during"])
        _wait(lambda: relay.flaps >= 3, "three connections lost after their handshake")
        relay.flap(False)
        _wait(lambda: store.configs == expected, "the change announced while flapping")

        expected["after"] = {"metrics": "c."}
        writer.set_or_create_entity_configs("client-metrics", "after", expected["after"])
        _wait(lambda: store.configs == expected, "the change announced after (the watch is set)")
        assert reader.zk.client_id == session  # one session throughout: no reload did this
    finally:
        reader.close()
        writer.close()
        relay.close()


def test_a_notification_that_does_not_decode_is_skipped(zookeeper_server: ZooKeeperServer) -> None:
    connect = zookeeper_server.connect_string(f"/bad-{uuid.uuid4().hex[:10]}")
    writer, reader = KafkaZkClient(connect), KafkaZkClient(connect)
    writer.start()
    reader.start()
    try:
        store = ZkClientMetricsConfigStore(reader)
        store.watch(ZkNodeChangeNotificationListener(reader), 0)
        writer.zk.create("/config/changes/config_change_", b"{not json", sequence=True)
        writer.set_or_create_entity_configs("client-metrics", "s", {"metrics": "a."})
        _wait(lambda: store.configs == {"s": {"metrics": "a."}}, "the change after it")
    finally:
        reader.close()
        writer.close()
