"""A consumer's Fetch of many partitions gives the loop back every YIELD_EVERY partition
reads (other connections' produce requests are answered meanwhile), and still answers every
partition."""

from __future__ import annotations

import asyncio
from typing import Any

from broker_wire import fetch_body

from tidelog.protocol.codec import RequestHeader
from tidelog.server.context import RequestContext
from tidelog.server.handlers import fetch
from tidelog.storage.log_read import FetchIsolation
from tidelog.testing import EmbeddedBroker

PARTITIONS = 2 * fetch.YIELD_EVERY + 50


def test_a_fetch_of_many_partitions_yields_between_reads() -> None:
    with EmbeddedBroker({"auto.create.topics.enable": "false"}) as b:

        async def create() -> None:
            b.broker.replica_manager.create_topic("many", PARTITIONS)

        b.run(create())
        request: Any = fetch_body(12, "many", dict.fromkeys(range(PARTITIONS), 0))

        async def read() -> tuple[int, int, int]:
            ctx = RequestContext(RequestHeader(1, 12, 7, "test", 2), b.broker)
            plan = b.broker.fetch_sessions.plan(request, 12)
            scope = fetch._Scope.of(ctx, fetch._fetcher(request, 12),
                                    FetchIsolation.HIGH_WATERMARK, False)
            coro = fetch._read_all(scope, request, plan)
            turns = 0
            while True:  # step it as a task would, counting the turns it gives back
                try:
                    assert coro.send(None) is None  # a bare yield: asyncio.sleep(0)
                except StopIteration as done:
                    out, total, error = done.value
                    return turns, len(out), total + int(error)
                turns += 1

        turns, answered, nothing = b.run(read())
    assert turns == PARTITIONS // fetch.YIELD_EVERY
    assert answered == PARTITIONS and nothing == 0
    assert asyncio.iscoroutinefunction(fetch._read_all)
