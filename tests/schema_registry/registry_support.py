"""A broker with its Schema Registry for tests: an EmbeddedBroker whose loop also serves the
registry (``schema.registry.listeners`` on an ephemeral port), restartable on the same ports
and log dir, plus a tiny JSON client for asserting on raw REST answers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from tidelog.schema_registry import start_schema_registry
from tidelog.schema_registry.listener import SchemaRegistryListener
from tidelog.testing import EmbeddedBroker

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryBroker:
    def __init__(
        self, config: Mapping[str, Any] | None = None, log_dir: str | None = None
    ) -> None:
        props = {"schema.registry.listeners": "http://127.0.0.1:0", **(config or {})}
        self.embedded = EmbeddedBroker(props, log_dir=log_dir)
        self.listener: SchemaRegistryListener | None = None

    @property
    def url(self) -> str:
        assert self.listener is not None
        return self.listener.url

    @property
    def bootstrap_servers(self) -> str:
        return self.embedded.bootstrap_servers

    def _start_registry(self) -> None:
        self.listener = self.embedded.run(start_schema_registry(self.embedded.broker))

    def _stop_registry(self) -> None:
        if self.listener is not None:
            self.embedded.run(self.listener.stop())
            self.listener = None

    def start(self) -> RegistryBroker:
        self.embedded.start()
        self._start_registry()
        return self

    def restart(self) -> None:
        """Clean stop of registry and broker, then both again on the same ports and log dir."""
        url = self.url
        self._stop_registry()
        self.embedded.props["schema.registry.listeners"] = url
        self.embedded.restart()
        self._start_registry()

    def stop(self) -> None:
        self._stop_registry()
        self.embedded.stop()

    def __enter__(self) -> RegistryBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def call(
    base: str, method: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None
) -> tuple[int, Any, str]:
    """(status, decoded JSON body, Content-Type) of one REST call."""
    data = None if body is None else json.dumps(body).encode()
    hdrs = {"Content-Type": CONTENT_TYPE, **(headers or {})}
    req = urllib.request.Request(base + path, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None, resp.headers["Content-Type"]
    except urllib.error.HTTPError as err:
        raw = err.read()
        return err.code, json.loads(raw) if raw else None, err.headers["Content-Type"]
