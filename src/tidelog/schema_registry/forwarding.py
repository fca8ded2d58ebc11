"""Writes reach the leader (Confluent's LeaderForwardingClient): a registry that does not
lead sends a write request as it came (method, path, query, body, content type and
credentials) to the leader's URL, answers with the leader's answer, and first waits until its
own reader has applied what the leader wrote, so a read right after sees the write. No known
leader is 50004, a failed forward 50003, as in Confluent's registry."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from . import errors
from .election import GroupLeaderElector
from .store import KafkaStore

FORWARDED_HEADERS = ("Content-Type", "Accept", "Authorization")


class LeaderForwarder:
    def __init__(self, elector: GroupLeaderElector, store: KafkaStore) -> None:
        self.elector = elector
        self.store = store

    async def forward(self, request: web.Request) -> web.Response | None:
        """The leader's answer to this write, or None when this registry leads."""
        if self.elector.is_leader:
            return None
        url = await asyncio.get_running_loop().run_in_executor(None, self.elector.leader_url)
        if url is None:
            raise errors.RegistryError(500, errors.UNKNOWN_LEADER, "Leader not known.")
        if url == self.elector.url:
            return None
        body = await request.read()
        headers = {h: request.headers[h] for h in FORWARDED_HEADERS if h in request.headers}
        try:
            async with aiohttp.ClientSession() as session, session.request(
                request.method, url.rstrip("/") + str(request.rel_url), data=body,
                headers=headers, timeout=aiohttp.ClientTimeout(total=30),
            ) as resp:
                data, status = await resp.read(), resp.status
                ctype = resp.headers.get("Content-Type")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise errors.RegistryError(
                500, errors.REQUEST_FORWARDING_FAILED,
                f"Error while forwarding the request to the leader {url}: {exc}",
            ) from None
        if status < 300:
            await self.store.sync()
        return web.Response(body=data, status=status,
                            headers={"Content-Type": ctype} if ctype else None)
