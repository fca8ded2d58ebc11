"""A consumer's Fetch of many partitions gives the loop back every YIELD_EVERY partition
reads (other connections' produce requests are answered meanwhile), and still answers every
partition."""

from __future__ import annotations

import asyncio
from typing import Any

from broker_wire import fetch_body

from tidelog.server import replica_fetches
from tidelog.server.cluster.fetch_params import FetchParams
from tidelog.storage.log_read import FetchIsolation
from tidelog.testing import EmbeddedBroker

PARTITIONS = 2 * replica_fetches.YIELD_EVERY + 50


def test_a_fetch_of_many_partitions_yields_between_reads() -> None:
    with EmbeddedBroker({"auto.create.topics.enable": "false"}) as b:

        async def create() -> None:
            b.broker.replica_manager.create_topic("many", PARTITIONS)

        b.run(create())
        request: Any = fetch_body(12, "many", dict.fromkeys(range(PARTITIONS), 0))

        async def read() -> tuple[int, int, int]:
            plan = b.broker.fetch_sessions.plan(request, 12)
            params = FetchParams(-1, -1, FetchIsolation.HIGH_WATERMARK, max_wait_ms=0)
            coro = b.broker.replica_manager.fetch_messages(params, plan.partitions,
                                                           lambda key: 0)
            turns = 0
            while True:  # step it as a task would, counting the turns it gives back
                try:
                    assert coro.send(None) is None  # a bare yield: asyncio.sleep(0)
                except StopIteration as done:
                    out = done.value
                    return turns, len(out), sum(len(d.records) + d.error_code for _, d in out)
                turns += 1

        turns, answered, nothing = b.run(read())
    assert turns == PARTITIONS // replica_fetches.YIELD_EVERY
    assert answered == PARTITIONS and nothing == 0
    assert asyncio.iscoroutinefunction(b.broker.replica_manager.fetch_messages)
