"""Whether the other brokers' metadata shows a new topic's leaders yet.

Kafka's CreateTopics (DelayedCreatePartitions) answers once the answering broker's metadata
cache has a leader for every new partition; the other brokers apply the controller's
UpdateMetadata on their own time, each after the LeaderAndIsr queued before it (their log
creation), so a client that creates a topic through one broker and describes it through
another may be told the topic does not exist. A ZooKeeper cluster's CreateTopics here also
waits, within the request's timeout, until every live broker in this broker's metadata
answers a Metadata request with the topic's leaders, at most ``PEER_WAIT_S``. A broker that
does not in time, cannot be reached or answers another error (an authorizer refusing the
inter-broker principal) is logged, and the request answered all the same: the topic exists
and has its leaders.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tidelog.client.conn import API_RANGES, KafkaClientError
from tidelog.protocol.errors import ErrorCode

from ..broker_connections import BrokerConnections

if TYPE_CHECKING:
    from tidelog.client.security import ClientSecurity

    from .cache import MetadataCache

log = logging.getLogger(__name__)
METADATA_KEY = 3
POLL_S = 0.01
PEER_WAIT_S = 2.0  # measured: under 0.2 s on a loaded 2-core machine (docs/operations.md)
NOT_YET = (int(ErrorCode.NONE), int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
           int(ErrorCode.LEADER_NOT_AVAILABLE))  # fmt: skip


class PeerMetadata:
    def __init__(self, broker_id: int, metadata_cache: MetadataCache, listener: str,
                 security: ClientSecurity | None, *, timeout_s: float = 30.0) -> None:  # fmt: skip
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self._conns = BrokerConnections(metadata_cache, listener, security,
                                        client_id=f"broker-{broker_id}-topic-admin",
                                        timeout_s=timeout_s, api_ranges=API_RANGES)  # fmt: skip

    async def wait_for_leaders(self, topic: str, partitions: Sequence[int], deadline: float) -> list[int]:
        """Until every other live broker shows a leader for each of ``partitions`` of
        ``topic``, or the ``time.monotonic()`` deadline; the brokers that did not."""
        deadline = min(deadline, time.monotonic() + PEER_WAIT_S)
        peers = [b for b in self.metadata_cache.image.brokers if b != self.broker_id]
        shown = await asyncio.gather(*(self._within(b, topic, partitions, deadline) for b in peers))
        late = [b for b, ok in zip(peers, shown, strict=True) if not ok]
        if late:
            log.info("CreateTopics answered before brokers %s showed the leaders of %s", late, topic)
        return late

    async def _within(self, broker: int, topic: str, partitions: Sequence[int], deadline: float) -> bool:
        """``_shown`` cut off at the deadline (a connect to an unreachable broker included)."""
        try:
            return await asyncio.wait_for(self._shown(broker, topic, partitions, deadline),
                                          max(deadline - time.monotonic(), 0.0))  # fmt: skip
        except TimeoutError:
            return False

    async def _shown(self, broker: int, topic: str, partitions: Sequence[int], deadline: float) -> bool:
        body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
        while True:
            try:
                conn = await self._conns.get(broker)
                left = max(deadline - time.monotonic(), 0.001)
                resp = await conn.request(METADATA_KEY, body, timeout_s=left)
            except (KafkaClientError, OSError, TimeoutError) as e:
                log.debug("Metadata from broker %d failed: %r", broker, e)
                await self._conns.drop(broker)
                return False
            shown = _has_leaders(resp, partitions)
            if shown is not None:
                return shown
            if time.monotonic() + POLL_S >= deadline or broker not in self.metadata_cache.image.brokers:
                return False
            await asyncio.sleep(POLL_S)

    async def close(self) -> None:
        await self._conns.close()


def _has_leaders(resp: object, partitions: Sequence[int]) -> bool | None:
    """True: every partition has a leader; None: not yet; False: an error that stays."""
    for t in getattr(resp, "topics", ()):
        if int(t.error_code) not in NOT_YET:
            return False
        leaders = {int(p.partition_index): int(p.leader_id) for p in t.partitions}
        return True if all(leaders.get(p, -1) >= 0 for p in partitions) else None
    return None
