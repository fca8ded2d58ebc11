"""The HTTP listener (``http.listeners``): ``/metrics``, ``/healthz``, ``/readyz`` and the web
console, served by aiohttp on the broker's own event loop, so every page and scrape reads
broker state from the thread that owns it.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from aiohttp import web
from multidict import MultiDictProxy
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.process_collector import ProcessCollector

from tidelog.config.core import ConfigError

from . import admin, state
from .client_metrics import ClientMetricsCollector
from .collector import BrokerCollector
from .console import Console
from .group_metrics import GroupCollector
from .lag import LagHistory
from .templates import environment
from .throughput import ThroughputHistory

if TYPE_CHECKING:
    from tidelog.server.broker import Broker

log = logging.getLogger(__name__)
AdminAction = Callable[["HttpListener", web.Request], Awaitable[web.StreamResponse]]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def parse_http_listener(url: str) -> tuple[str, int]:
    parts = urlsplit(url.strip())
    if parts.scheme != "http" or parts.hostname is None or parts.port is None:
        raise ConfigError("http.listeners", url, "expected http://host:port")
    return parts.hostname, parts.port


class HttpListener:
    def __init__(self, broker: Broker, urls: list[str]) -> None:
        values = broker.config.values
        self.broker = broker
        self.addresses = [parse_http_listener(u) for u in urls]
        self.urls: list[str] = []
        self.console_enabled = bool(values["http.console.enable"])
        self.admin = bool(values["http.console.admin.enable"]) and self.console_enabled
        self.csrf = secrets.token_urlsafe(24)  # admin forms: no cross-site posts
        self.sample_interval_ms = int(values["http.console.lag.sample.interval.ms"])
        self.lag_history = LagHistory(broker, history_ms=int(values["http.console.lag.history.ms"]))
        self.throughput = ThroughputHistory(broker, interval_ms=self.sample_interval_ms)
        self.registry = CollectorRegistry(auto_describe=False)
        ProcessCollector(registry=self.registry)
        self.registry.register(BrokerCollector(broker))
        self.registry.register(ClientMetricsCollector(broker))
        self.registry.register(GroupCollector(broker))
        self.env = environment()
        # a topic's table (name, snapshot, committed offsets, lag) for its console page, set
        # by whoever starts Iceberg topics beside the broker (http never imports them)
        self.topic_tables: Callable[[str], object | None] | None = None
        self.console = Console(self)
        self._runner: web.AppRunner | None = None
        self._sampler: asyncio.Task[None] | None = None

    @property
    def bound_ports(self) -> list[int]:
        runner = self._runner
        return [int(a[1]) for a in runner.addresses] if runner is not None else []

    def app(self) -> web.Application:
        app = web.Application()
        r = app.router
        r.add_get("/metrics", self.metrics)
        r.add_get("/healthz", self.healthz)
        r.add_get("/readyz", self.readyz)
        if self.console_enabled:
            c = self.console
            r.add_get("/", c.overview)
            r.add_get("/topics", c.topics)
            r.add_get("/topics/{topic}", c.topic)
            r.add_get("/topics/{topic}/{partition}", c.partition)
            r.add_get("/topics/{topic}/{partition}/messages", c.messages)
            r.add_get("/groups", c.groups)
            r.add_get("/groups/{group}", c.group)
            r.add_get("/cleaner", c.cleaner)
            r.add_post("/admin/topics", self._admin(admin.create_topic))
            r.add_post("/topics/{topic}/config", self._admin(admin.alter_config))
            r.add_post("/groups/{group}/reset-offsets", self._admin(admin.reset_offsets))
        return app

    async def start(self) -> None:
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await runner.setup()
        self._runner = runner
        try:
            for host, port in self.addresses:
                await web.TCPSite(runner, host, port, reuse_address=True).start()
        except BaseException:
            await self.stop()
            raise
        self.urls = [f"http://{h}:{p}" for h, p in ((a[0], a[1]) for a in runner.addresses)]
        if self.console_enabled:
            self.throughput.sample()  # the rates' base: a page before the first interval has one
            self._sampler = asyncio.get_running_loop().create_task(self._sample_lag())
        log.info("HTTP listener on %s (console %s, admin actions %s)", ", ".join(self.urls),
                 "on" if self.console_enabled else "off", "on" if self.admin else "off")

    async def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            self._sampler = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _sample_lag(self) -> None:
        while True:
            await asyncio.sleep(self.sample_interval_ms / 1000)
            try:
                self.lag_history.sample()
                self.throughput.sample()
            except Exception:
                log.exception("console sample failed")

    # -- endpoints ------------------------------------------------------------------------------
    async def metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(self, request: web.Request) -> web.Response:
        """Alive and listening (a process manager restarts the broker when this fails)."""
        b = self.broker
        ok = b.listening and not b.fatal_error
        return web.Response(text="ok\n" if ok else "not listening\n", status=200 if ok else 503)

    async def readyz(self, request: web.Request) -> web.Response:
        ready = state.readiness(self.broker)
        return web.json_response(ready, status=200 if ready["ready"] else 503)

    # -- console helpers ------------------------------------------------------------------------
    def render(self, name: str, title: str, **ctx: object) -> web.Response:
        html = self.env.get_template(name).render(
            title=title, admin=self.admin, csrf=self.csrf,
            degraded=state.degraded_log_dirs(self.broker), **ctx,
        )
        return web.Response(text=html, content_type="text/html")

    def _admin(self, fn: AdminAction) -> Handler:
        async def guarded(request: web.Request) -> web.StreamResponse:
            if not self.admin:
                raise web.HTTPForbidden(
                    text="admin actions are off (http.console.admin.enable=false)"
                )
            result: web.StreamResponse = await fn(self, request)
            return result

        return guarded

    async def admin_form(self, request: web.Request
                         ) -> MultiDictProxy[str | bytes | bytearray | web.FileField]:
        form = await request.post()
        if not secrets.compare_digest(str(form.get("csrf", "")), self.csrf):
            raise web.HTTPForbidden(text="missing or wrong form token")
        return form


async def start_http_listener(broker: Broker) -> HttpListener | None:
    """Start the listener when ``http.listeners`` is set (None otherwise)."""
    urls = [u for u in broker.config.values.get("http.listeners") or [] if u.strip()]
    if not urls:
        return None
    listener = HttpListener(broker, urls)
    await listener.start()
    return listener
