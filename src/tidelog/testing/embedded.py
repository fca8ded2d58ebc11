"""An in-process broker for tests: own thread and event loop, ephemeral port, temporary
log dir (removed on exit unless one was given).

    from tidelog.testing import EmbeddedBroker

    with EmbeddedBroker() as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

With ``fault_plan=FaultPlan()`` the broker injects the plan's faults (failed produces, delayed
responses, dropped connections, a clock moved forward, a full log dir) into its own answers;
see ``tidelog.server.faults`` and docs/testing.md.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Coroutine, Mapping
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from tidelog.iceberg import start_iceberg
from tidelog.schema_registry import start_schema_registry
from tidelog.server.faults import FaultPlan, install
from tidelog.util.clock import SYSTEM_CLOCK, Clock

if TYPE_CHECKING:
    from tidelog.http.server import HttpListener
    from tidelog.iceberg.service import IcebergService
    from tidelog.schema_registry.listener import SchemaRegistryListener
    from tidelog.server.broker import Broker


T = TypeVar("T")


class EmbeddedBroker:
    """Start with ``start()`` or ``with``; ``bootstrap_servers`` is ``"127.0.0.1:<port>"``."""

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        log_dir: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        fault_plan: FaultPlan | None = None,
    ) -> None:
        self._own_dir = log_dir is None
        self.log_dir = (
            Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="tidelog-"))
        )
        self.props: dict[str, Any] = {
            "listeners": f"PLAINTEXT://{host}:{port}",
            "log.dirs": str(self.log_dir),
        }
        self.props.update(config or {})
        self.fault_plan = fault_plan
        self.broker: Broker | None = None
        self.http: HttpListener | None = None  # the HTTP listener when ``http.listeners`` is set
        # when ``schema.registry.listeners`` is set
        self.schema_registry: SchemaRegistryListener | None = None
        self.iceberg: IcebergService | None = None  # when ``iceberg.enabled``
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self.broker is None:
            raise RuntimeError("broker not started")
        return int(self.broker.bound_port)

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.broker.advertised_host}:{self.port}" if self.broker else ""

    def start(self) -> EmbeddedBroker:
        from tidelog.config.broker_config import BrokerConfig
        from tidelog.server.broker import Broker

        started: Future[None] = Future()
        clock: Clock = self.fault_plan.clock if self.fault_plan is not None else SYSTEM_CLOCK
        self.broker = Broker(BrokerConfig(self.props), clock=clock)
        if self.fault_plan is not None:
            install(self.broker, self.fault_plan)
            self.broker.replica_manager.logs.free_space.override = (
                self.fault_plan.free_bytes_override
            )
        try:
            import uvloop

            self._loop = uvloop.new_event_loop()
        except ImportError:
            self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._run, args=(started,), name="tidelog-broker", daemon=True
        )
        self._thread.start()
        try:
            started.result()
        except BaseException:
            self._thread.join()
            self._cleanup()
            raise
        return self

    def _run(self, started: Future[None]) -> None:
        loop, broker = self._loop, self.broker
        assert loop is not None and broker is not None
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(broker.start())
        except BaseException as exc:
            started.set_exception(exc)
            loop.close()
            return
        try:
            self.http = loop.run_until_complete(self._start_http(broker))
            self.schema_registry = loop.run_until_complete(start_schema_registry(broker))
            self.iceberg = loop.run_until_complete(start_iceberg(broker, self.schema_registry))
            if self.http is not None and self.iceberg is not None:  # lag on /metrics
                self.http.registry.register(self.iceberg.collector())
                self.http.topic_tables = self.iceberg.table_view
        except BaseException as exc:
            if self.schema_registry is not None:
                loop.run_until_complete(self.schema_registry.stop())
                self.schema_registry = None
            if self.http is not None:
                loop.run_until_complete(self.http.stop())
                self.http = None
            loop.run_until_complete(broker.stop())
            started.set_exception(exc)
            loop.close()
            return
        started.set_result(None)
        loop.run_forever()
        if self.iceberg is not None:
            loop.run_until_complete(self.iceberg.stop())
            self.iceberg = None
        if self.schema_registry is not None:
            loop.run_until_complete(self.schema_registry.stop())
            self.schema_registry = None
        if self.http is not None:
            loop.run_until_complete(self.http.stop())
            self.http = None
        loop.run_until_complete(broker.stop())
        loop.close()

    @staticmethod
    async def _start_http(broker: Broker) -> HttpListener | None:
        if not broker.config.values["http.listeners"]:
            return None
        from tidelog.http import start_http_listener

        return await start_http_listener(broker)

    @property
    def http_url(self) -> str:
        """``http://host:port`` of the HTTP listener (/metrics, health, console), or ""."""
        return self.http.urls[0] if self.http is not None and self.http.urls else ""

    @property
    def schema_registry_url(self) -> str:
        """The Schema Registry's URL, or "" (``schema.registry.listeners`` unset)."""
        registry = self.schema_registry
        return registry.url if registry is not None else ""

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        """Run a coroutine on the broker's loop (inspect or poke broker state from a test)."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def stop(self) -> None:
        self._stop_thread()
        self._cleanup()

    def _stop_thread(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._thread = None

    def restart(self) -> EmbeddedBroker:
        """Clean shutdown, then start again on the same port and log dir (clients reconnect
        to the same ``bootstrap_servers``): for testing what survives a broker restart."""
        # every listener keeps its port (a broker may serve several: SSL, SASL_SSL, ...)
        ports = dict(getattr(self.broker, "bound_ports", {}) or {})
        port = self.port
        registry_url = self.schema_registry_url
        self._stop_thread()
        listeners = [u.strip() for u in str(self.props["listeners"]).split(",") if u.strip()]
        pinned = []
        for i, uri in enumerate(listeners):
            name = uri.split("://", 1)[0].upper()
            pinned.append(f"{uri.rsplit(':', 1)[0]}:{ports.get(name, port if i == 0 else 0)}")
        self.props["listeners"] = ",".join(pinned)
        if registry_url:  # the registry keeps its port too
            self.props["schema.registry.listeners"] = registry_url
        return self.start()

    def _cleanup(self) -> None:
        if self._own_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
