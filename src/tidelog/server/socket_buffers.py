"""``socket.send.buffer.bytes`` and ``socket.receive.buffer.bytes`` on every listener.

Kafka's Acceptor sets SO_RCVBUF on the server socket before it binds (a receive buffer
over 64 KiB must be known before the SYN to scale TCP's window) and SO_SNDBUF on each
socket it accepts; -1 leaves both to the OS (Linux autotunes them up to ``tcp_rmem`` and
``tcp_wmem``'s maxima). Here both go on the listening sockets before they listen: each
socket accepted from them starts with the listener's buffers (Linux, as the BSDs, copies
them and their lock against autotuning into the new socket), before any byte flows.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping
from typing import Any

USE_DEFAULT_BUFFER_SIZE = -1  # Kafka's Selectable.USE_DEFAULT_BUFFER_SIZE

_OPTIONS = (
    ("socket.send.buffer.bytes", socket.SO_SNDBUF),
    ("socket.receive.buffer.bytes", socket.SO_RCVBUF),
)


def set_socket_buffers(server: asyncio.Server, values: Mapping[str, Any]) -> None:
    """Sets the configured buffers on ``server``'s sockets (made with
    ``start_serving=False``: bound, not yet listening)."""
    for name, option in _OPTIONS:
        size = int(values[name])
        if size == USE_DEFAULT_BUFFER_SIZE:
            continue
        for sock in server.sockets:
            sock.setsockopt(socket.SOL_SOCKET, option, size)
