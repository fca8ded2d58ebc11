"""Connections from this broker to the others, one per broker, found by broker id through the
metadata image on the inter-broker listener (the transaction marker sender and the share
state persister each keep one pool, with the API versions they speak)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.client.conn import KafkaClientError
from tidelog.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from tidelog.client.security import ClientSecurity
    from tidelog.server.metadata.cache import MetadataCache


class BrokerConnections:
    def __init__(self, metadata_cache: MetadataCache, listener: str,
                 security: ClientSecurity | None, *, client_id: str, timeout_s: float,
                 api_ranges: Mapping[int, tuple[int, int]]) -> None:  # fmt: skip
        self.metadata_cache = metadata_cache
        self.listener = listener
        self.security = security
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.api_ranges = api_ranges
        self._conns: dict[int, AsyncBrokerConnection] = {}
        self._connecting: dict[int, asyncio.Lock] = {}  # one connect at a time per broker

    async def get(self, broker: int) -> AsyncBrokerConnection:
        """The open connection to ``broker``, made on first use (BROKER_NOT_AVAILABLE when
        the metadata knows no endpoint of it on the listener). Callers that ask while it is
        being made wait for that one: two connections made at once would leave one
        unreferenced and unclosed (its socket, and its reader task destroyed pending)."""
        conn = self._conns.get(broker)
        if conn is not None and not conn.closed:
            return conn
        lock = self._connecting.setdefault(broker, asyncio.Lock())
        async with lock:
            conn = self._conns.get(broker)
            if conn is not None and not conn.closed:
                return conn
            info = self.metadata_cache.image.broker(broker)
            endpoint = None if info is None else info.endpoint(self.listener)
            if endpoint is None:
                raise KafkaClientError(ErrorCode.BROKER_NOT_AVAILABLE,
                                       f"broker {broker} unknown")
            conn = await AsyncBrokerConnection.connect(
                endpoint[0], endpoint[1], client_id=self.client_id, timeout_s=self.timeout_s,
                security=self.security, api_ranges=self.api_ranges)
            self._conns[broker] = conn
            return conn

    async def drop(self, broker: int) -> None:
        conn = self._conns.pop(broker, None)
        if conn is not None:
            await conn.close()

    async def close(self) -> None:
        for broker in list(self._conns):
            await self.drop(broker)
