"""``socket.send.buffer.bytes`` / ``socket.receive.buffer.bytes`` as Kafka: SO_SNDBUF and
SO_RCVBUF of every socket each listener accepts (102400 by default; Linux reports twice the
size set), the OS's own buffers at -1; read-only in DescribeConfigs."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tidelog.config.broker_config import BrokerConfig
from tidelog.config.core import ConfigError
from tidelog.testing import EmbeddedBroker

ck = pytest.importorskip("confluent_kafka")
adm = pytest.importorskip("confluent_kafka.admin")

TWO_LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
}


def _accepted_buffers(b: EmbeddedBroker, port: int) -> tuple[int, int]:
    """(SO_SNDBUF, SO_RCVBUF) of the broker's end of a connection made to ``port``."""
    with socket.create_connection(("127.0.0.1", port)) as client:
        me = client.getsockname()[:2]
        deadline = time.monotonic() + 10
        while True:
            conn = next((c for c in list(b.broker.connections) if c.peer == me), None)
            if conn is not None:
                sock = conn.transport.get_extra_info("socket")
                return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                        sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
            assert time.monotonic() < deadline, "the broker never accepted the connection"
            time.sleep(0.01)


def _os_default_buffers() -> tuple[int, int]:
    """What the kernel gives a socket accepted from a listener that sets no buffer."""
    with socket.create_server(("127.0.0.1", 0)) as server, \
            socket.create_connection(server.getsockname()[:2]), server.accept()[0] as sock:
        return (sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))


@contextmanager
def _broker(tmp_path: Path, **extra: str) -> Iterator[tuple[EmbeddedBroker, list[int]]]:
    with EmbeddedBroker({"log.dirs": str(tmp_path), **TWO_LISTENERS, **extra}) as b:
        yield b, [b.broker.bound_ports[name] for name in ("PLAINTEXT", "OTHER")]


def test_kafkas_default_on_every_listener(tmp_path: Path) -> None:
    assert _os_default_buffers() != (2 * 102400, 2 * 102400)  # else the test proves nothing
    with _broker(tmp_path) as (b, ports):
        for port in ports:
            assert _accepted_buffers(b, port) == (2 * 102400, 2 * 102400)


def test_configured_sizes(tmp_path: Path) -> None:
    sizes = {"socket.send.buffer.bytes": "50000", "socket.receive.buffer.bytes": "60000"}
    with _broker(tmp_path, **sizes) as (b, ports):
        for port in ports:
            assert _accepted_buffers(b, port) == (100000, 120000)


def test_minus_one_leaves_the_os_default(tmp_path: Path) -> None:
    sizes = {"socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "-1"}
    with _broker(tmp_path, **sizes) as (b, ports):
        for port in ports:
            assert _accepted_buffers(b, port) == _os_default_buffers()


def test_only_minus_one_or_a_positive_size() -> None:
    for name in ("socket.send.buffer.bytes", "socket.receive.buffer.bytes"):
        for bad in ("0", "-2"):
            with pytest.raises(ConfigError, match=name):
                BrokerConfig({name: bad})
        assert BrokerConfig({name: "-1"}).values[name] == -1


def test_described_read_only(tmp_path: Path) -> None:
    with EmbeddedBroker({"log.dirs": str(tmp_path), "socket.send.buffer.bytes": "-1"}) as b:
        a: Any = adm.AdminClient({"bootstrap.servers": b.bootstrap_servers})
        res = adm.ConfigResource(adm.ResourceType.BROKER, str(b.broker.node_id))
        entries = a.describe_configs([res])[res].result(timeout=30)
        send, receive = entries["socket.send.buffer.bytes"], entries["socket.receive.buffer.bytes"]
        assert (send.value, send.source, send.is_read_only) == (
            "-1", adm.ConfigSource.STATIC_BROKER_CONFIG.value, True)
        assert (receive.value, receive.source, receive.is_read_only) == (
            "102400", adm.ConfigSource.DEFAULT_CONFIG.value, True)
        assert entries["socket.request.max.bytes"].is_read_only is True
