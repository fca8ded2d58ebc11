"""A TCP proxy in front of the test S3 server that can stop forwarding what clients send
(an upload hanging in the middle, S3 unreachable) and resume: a real network fault for a
real broker process, without a mock S3."""

from __future__ import annotations

import socket
import threading


class StallingProxy:
    """Forwards client bytes while ``sent < budget`` (``budget`` None: no limit), then holds
    them until the budget grows (``resume``) or the proxy closes."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.sent = 0
        self.budget: int | None = None
        self.stalled = threading.Event()
        self.cond = threading.Condition()
        self.closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stall_after(self, n: int) -> None:
        """Forward ``n`` more client bytes, then hold the rest."""
        with self.cond:
            self.budget = self.sent + n
            self.stalled.clear()

    def resume(self) -> None:
        with self.cond:
            self.budget = None
            self.cond.notify_all()

    def _accept(self) -> None:
        while not self.closing:
            try:
                client, _ = self.server.accept()
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                return
            for src, dst, limited in ((client, upstream, True), (upstream, client, False)):
                threading.Thread(target=self._pump, args=(src, dst, limited),
                                 daemon=True).start()

    def _take(self, n: int) -> int:
        """How many of ``n`` bytes may go now (blocks while stalled)."""
        with self.cond:
            while True:
                if self.closing:
                    return -1
                allowed = n if self.budget is None else max(0, min(n, self.budget - self.sent))
                if allowed:
                    self.sent += allowed
                    return allowed
                self.stalled.set()
                self.cond.wait(0.1)

    def _pump(self, src: socket.socket, dst: socket.socket, limited: bool) -> None:
        try:
            while data := src.recv(65536):
                while data:
                    n = self._take(len(data)) if limited else len(data)
                    if n < 0:
                        return
                    dst.sendall(data[:n])
                    data = data[n:]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        self.server.close()
