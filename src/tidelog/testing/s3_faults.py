"""moto's S3 server with faults on demand: what a real S3 server cannot be made to do
(answer 5xx, answer slowly). For everything else use the real one (``seaweedfs.py``).

    with FaultyS3Server() as s3:
        s3.client().create_bucket(Bucket="tiered")
        s3.faults.fail(503, times=2)       # the next two requests answer 503 SlowDown
        s3.faults.delay(2.0)               # every request waits 2 s before it is served
        s3.faults.clear()

``faults.requests`` counts the requests seen (retries included).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING

from .seaweedfs import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
else:
    S3Client = object

StartResponse = Callable[[str, list[tuple[str, str]]], object]
WsgiApp = Callable[[dict[str, object], StartResponse], Iterable[bytes]]

_CODES = {500: "InternalError", 503: "SlowDown", 502: "BadGateway"}


@dataclass
class S3Faults:
    """What the server does to the next requests (thread-safe)."""

    status: int | None = None
    remaining: int | None = None  # None: every request while set
    delay_s: float = 0.0
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(self, status: int = 503, times: int | None = None) -> None:
        with self.lock:
            self.status, self.remaining = status, times

    def delay(self, seconds: float) -> None:
        with self.lock:
            self.delay_s = seconds

    def clear(self) -> None:
        with self.lock:
            self.status, self.remaining, self.delay_s = None, None, 0.0

    def take(self) -> tuple[int | None, float]:
        """(status to answer or None, delay) for one request."""
        with self.lock:
            self.requests += 1
            status = self.status
            if status is not None and self.remaining is not None:
                self.remaining -= 1
                if self.remaining <= 0:
                    self.status = self.remaining = None
            return status, self.delay_s


def fault_middleware(app: WsgiApp, faults: S3Faults) -> WsgiApp:
    def wrapped(environ: dict[str, object], start_response: StartResponse) -> Iterable[bytes]:
        status, delay = faults.take()
        if delay:
            time.sleep(delay)
        if status is None:
            return app(environ, start_response)
        code = _CODES.get(status, "InternalError")
        body = (f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code>"
                f"<Message>injected fault</Message></Error>").encode()
        start_response(f"{status} {code}", [("Content-Type", "application/xml"),
                                            ("Content-Length", str(len(body)))])
        return [body]

    return wrapped


class FaultyS3Server:
    """moto's S3 server on a free 127.0.0.1 port, in this process, behind :class:`S3Faults`."""

    def __init__(self) -> None:
        self.faults = S3Faults()
        self.port = 0
        self._server: object | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FaultyS3Server:
        from moto.moto_server.threaded_moto_server import MotoRequestHandler
        from moto.server import DomainDispatcherApplication, create_backend_app
        from werkzeug.serving import make_server

        app = fault_middleware(DomainDispatcherApplication(create_backend_app), self.faults)
        server = make_server("127.0.0.1", 0, app, True, request_handler=MotoRequestHandler)
        self.port = int(server.server_address[1])
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True,
                                        name="moto-s3")
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()  # type: ignore[attr-defined]
            server.server_close()  # type: ignore[attr-defined]
        if self._thread is not None:
            self._thread.join(timeout=10)

    def client(self) -> S3Client:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.endpoint_url, region_name=REGION,
            aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))

    def rsm_configs(self, bucket: str) -> dict[str, str]:
        return {
            "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.s3.S3Storage",
            "rsm.config.storage.s3.endpoint.url": self.endpoint_url,
            "rsm.config.storage.s3.bucket.name": bucket,
            "rsm.config.storage.s3.region": REGION,
            "rsm.config.storage.s3.path.style.access.enabled": "true",
            "rsm.config.storage.aws.access.key.id": ACCESS_KEY_ID,
            "rsm.config.storage.aws.secret.access.key": SECRET_ACCESS_KEY,
        }

    def __enter__(self) -> FaultyS3Server:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
