"""Stand-in for kafka-python's ``test/service.py``, which its PyPI sdist leaves out.

Copied into the extracted sdist as ``test/service.py``. With ``KAFKA_URI`` set the suite
only wraps an already-running broker (``ExternalService``); spawning a Kafka JVM
(``SpawnedService``) is what this compatibility run never does, so it refuses loudly.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


class ExternalService:
    def __init__(self, host: str, port: int) -> None:
        log.info("Using already running service at %s:%d", host, port)
        self.host = host
        self.port = port

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def dump_logs(self) -> None:
        pass

    def wait_for(self, pattern: str, timeout: float = 30) -> bool:
        return True


class SpawnedService:
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("the tidelog compatibility run only talks to an external broker "
                           "(set KAFKA_URI)")
