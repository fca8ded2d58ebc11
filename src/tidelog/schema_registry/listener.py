"""The Schema Registry's listener (``schema.registry.listeners``): Confluent's REST API
served by aiohttp on the broker's event loop, its state kept in ``_schemas`` through the
broker's own Kafka listener (``schema.registry.kafkastore.*`` settings are handed to that
client, e.g. ``schema.registry.kafkastore.security.protocol``)."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from aiohttp import web

from tidelog.config.core import ConfigError
from tidelog.server.security.tls import server_context

from .api import RegistryApi, error_middleware
from .auth import BasicAuth, Credentials
from .election import GroupLeaderElector
from .forwarding import LeaderForwarder
from .registry import SchemaRegistry
from .state import RegistryState
from .store import KafkaStore
from .validation import SchemaIdValidator

if TYPE_CHECKING:
    from tidelog.server.broker import Broker

log = logging.getLogger(__name__)
STORE_PREFIX = "schema.registry.kafkastore."
_REGISTRY_KEYS = {"topic", "timeout.ms"}


def store_client_config(values: Mapping[str, Any], bootstrap_servers: str) -> dict[str, Any]:
    """librdkafka settings of the registry's own client: the bootstrap plus any
    ``schema.registry.kafkastore.<librdkafka key>``."""
    config: dict[str, Any] = {"bootstrap.servers": bootstrap_servers}
    for key, value in values.items():
        if key.startswith(STORE_PREFIX) and key[len(STORE_PREFIX):] not in _REGISTRY_KEYS:
            config[key[len(STORE_PREFIX):]] = value
    return config


class SchemaRegistryListener:
    def __init__(
        self,
        values: Mapping[str, Any],
        originals: Mapping[str, Any],
        bootstrap_servers: str,
        credentials: Credentials | None = None,
        elect: bool = False,
    ) -> None:
        """``elect``: in a cluster, registries elect a leader and forward writes to it."""
        # (scheme, host, port); https listeners use the broker's ssl.keystore.* keys
        self.addresses: list[tuple[str, str, int]] = []
        for url in values["schema.registry.listeners"] or []:
            parts = urlsplit(url.strip())
            assert parts.hostname is not None and parts.port is not None
            self.addresses.append((parts.scheme, parts.hostname, parts.port))
        self.ssl_context: ssl.SSLContext | None = None
        if any(scheme == "https" for scheme, _, _ in self.addresses):
            self.ssl_context = server_context(values.get)
        self.auth: BasicAuth | None = None
        if str(values["schema.registry.authentication.method"]).upper() == "BASIC":
            if credentials is None:
                raise ConfigError("schema.registry.authentication.method", "BASIC",
                                  "needs the broker's SCRAM credentials")
            self.auth = BasicAuth(credentials)
        self.state = RegistryState()
        self.store = KafkaStore(
            topic=str(values["schema.registry.kafkastore.topic"]),
            client_config=store_client_config(originals, bootstrap_servers),
            state=self.state,
            timeout_ms=int(values["schema.registry.kafkastore.timeout.ms"]),
        )
        level = str(values["schema.registry.schema.compatibility.level"])
        self.registry = SchemaRegistry(self.store, self.state, level)
        # validated topics: the produce path's check (see validation.py)
        self.validator = SchemaIdValidator(self.registry)
        self.urls: list[str] = []
        self._runner: web.AppRunner | None = None
        self.elector: GroupLeaderElector | None = None
        if elect:
            self.elector = GroupLeaderElector(
                self.store.client_config, str(values["schema.registry.group.id"]),
                self.store.topic, "", bool(values["schema.registry.leader.eligibility"]))
        self._broker: Broker | None = None  # whose produce path runs the validator

    def app(self) -> web.Application:
        middlewares = [error_middleware] if self.auth is None else [
            self.auth.middleware, error_middleware]
        app = web.Application(middlewares=middlewares)
        forwarder = LeaderForwarder(self.elector, self.store) if self.elector else None
        RegistryApi(self.registry, forwarder).routes(app)
        return app

    @property
    def url(self) -> str:
        return self.urls[0] if self.urls else ""

    async def start(self) -> None:
        await self.store.start()
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await runner.setup()
        self._runner = runner
        try:
            for scheme, host, port in self.addresses:
                context = self.ssl_context if scheme == "https" else None
                site = web.TCPSite(runner, host, port, reuse_address=True, ssl_context=context)
                await site.start()
        except BaseException:
            await self.stop()
            raise
        self.urls = [
            f"{scheme}://{bound[0]}:{bound[1]}"
            for (scheme, _, _), bound in zip(self.addresses, runner.addresses, strict=False)
        ]
        if self.elector is not None:  # named by the URL it serves on
            self.elector.url = self.url
            self.elector.start()
        log.info("Schema Registry on %s (topic %s)", ", ".join(self.urls), self.store.topic)

    def attach(self, broker: Broker) -> None:
        """Validated topics: the broker's produce path checks records with the validator."""
        broker.record_validators.append(self.validator.validate)
        self._broker = broker

    async def stop(self) -> None:
        if self._broker is not None:
            self._broker.record_validators.remove(self.validator.validate)
            self._broker = None
        if self.elector is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.elector.stop)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.store.stop()


async def start_schema_registry(broker: Broker) -> SchemaRegistryListener | None:
    """Start the registry when ``schema.registry.listeners`` is set (None otherwise)."""
    values = broker.config.values
    if not [u for u in values.get("schema.registry.listeners") or [] if u.strip()]:
        return None
    bootstrap = f"{broker.advertised_host}:{broker.advertised_port}"
    in_cluster = bool(values.get("zookeeper.connect"))  # one broker: its registry leads alone
    listener = SchemaRegistryListener(
        values, broker.config.originals, bootstrap, broker.credentials, elect=in_cluster
    )
    await listener.start()
    listener.attach(broker)
    return listener
