"""``bootstrap.servers`` parsing for tidelog's own clients (conn.py, pipelined.py); imports
nothing, so the start-up-bound perf client can use it without the general client's kio."""

from __future__ import annotations

from collections.abc import Iterable


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out
