"""The pool of connections to other brokers (transaction markers, the share state
persister, the remote log metadata forwarder): one connection per broker, also when many
callers ask for it at once (the markers of one transaction go out as one task per
partition)."""

from __future__ import annotations

import asyncio
import gc

from tidelog.server.broker_connections import BrokerConnections
from tidelog.server.coordinator.transaction.markers import MARKER_API_RANGES
from tidelog.testing import EmbeddedBroker


def test_callers_asking_at_once_share_one_connection() -> None:
    with EmbeddedBroker() as b:
        node = b.broker.node_id
        cache = b.broker.replica_manager.metadata_cache

        async def run() -> tuple[int, int, bool]:
            pool = BrokerConnections(cache, "PLAINTEXT", None, client_id="test", timeout_s=10,
                                     api_ranges=MARKER_API_RANGES)
            conns = await asyncio.gather(*(pool.get(node) for _ in range(8)))
            distinct = len({id(c) for c in conns})
            again = await pool.get(node)
            await pool.close()
            gc.collect()  # a connection no one holds would show here, its reader pending
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            return distinct, len(pending), again is conns[0]

        distinct, pending, same = asyncio.run(run())
    assert (distinct, pending, same) == (1, 0, True)
