"""Kafka's ReplicaFetcherManager / AbstractFetcherManager: the FetcherManager of a broker in a
cluster. Partitions are grouped by (leader broker, fetcher id), the fetcher id being Kafka's
``abs(31 * topic.hashCode + partition) % num.replica.fetchers``; each group is one
:class:`ReplicaFetcher` task with its own connection to that leader. A fetcher left without
partitions is shut down (Kafka's shutdownIdleFetcherThreads); a leader whose address changed
gets a new fetcher.

Called on the broker's event loop (the ReplicaManager applying a LeaderAndIsr).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from tidelog.client.security import ClientSecurity
from tidelog.util.topic_partition import TopicPartition

from .fetch_state import PartitionFetchState, PartitionLookup
from .fetcher import ReplicaFetcher, TierStateBuilder
from .fetcher_manager import InitialFetchState, fetcher_id
from .leader_endpoint import FetchSettings, LeaderEndPoint, RemoteLeaderEndPoint
from .quota import ReplicationQuotaManager

log = logging.getLogger(__name__)

# broker id -> its inter-broker (host, port), None while unknown
EndpointLookup = Callable[[int], tuple[str, int] | None]
EndpointFactory = Callable[[int, tuple[str, int]], LeaderEndPoint]


@dataclass(frozen=True, slots=True)
class FetcherKey:
    leader_id: int
    fetcher_id: int


class ReplicaFetcherManager:
    """See the module docstring; satisfies the ``FetcherManager`` seam."""

    def __init__(
        self,
        settings: FetchSettings,
        partitions: PartitionLookup,
        endpoints: EndpointLookup,
        *,
        num_fetchers: int = 1,
        broker_epoch: Callable[[], int] = lambda: -1,
        security: ClientSecurity | None = None,
        endpoint_factory: EndpointFactory | None = None,
        on_high_watermark: Callable[[list[TopicPartition]], None] | None = None,
        quota: ReplicationQuotaManager | None = None,
    ) -> None:
        self.settings = settings
        self.quota = quota
        self.num_fetchers = num_fetchers
        self._partitions = partitions
        self._endpoints = endpoints
        self._broker_epoch = broker_epoch
        self._security = security
        self._endpoint_factory = endpoint_factory or self._remote_endpoint
        self._on_high_watermark = on_high_watermark
        # tiered storage: builds a partition's state from remote storage when the leader
        # answers OFFSET_MOVED_TO_TIERED_STORAGE (set by the broker's RemoteLogManager)
        self.tier_state: TierStateBuilder | None = None
        self._fetchers: dict[FetcherKey, ReplicaFetcher] = {}
        self._addresses: dict[FetcherKey, tuple[str, int]] = {}
        # leaders' addresses from LeaderAndIsr's live_leaders (Kafka's source of them), used
        # when the metadata does not know the leader yet; partitions whose leader has no
        # address yet wait here and start when one arrives (retry_waiting)
        self._live_leaders: dict[int, tuple[str, int]] = {}
        self._waiting: dict[TopicPartition, InitialFetchState] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._closed = False

    def _remote_endpoint(self, leader_id: int, address: tuple[str, int]) -> LeaderEndPoint:
        return RemoteLeaderEndPoint(
            leader_id,
            address,
            self.settings,
            broker_epoch=self._broker_epoch,
            security=self._security,
        )

    # -- the seam ---------------------------------------------------------------------------

    def add_fetcher_for_partitions(
        self, states: Mapping[TopicPartition, InitialFetchState]
    ) -> None:
        if self._closed:  # a LeaderAndIsr reaching a stopping broker: nothing to start
            log.info("not fetching %d partitions: shutting down", len(states))
            return
        groups: dict[FetcherKey, dict[TopicPartition, InitialFetchState]] = {}
        for tp, state in states.items():
            key = FetcherKey(state.leader_id, fetcher_id(tp, self.num_fetchers))
            groups.setdefault(key, {})[tp] = state
        for tp in states:
            self._waiting.pop(tp, None)
        for key, group in groups.items():
            address = self._endpoints(key.leader_id) or self._live_leaders.get(key.leader_id)
            if address is None:
                log.info(
                    "no endpoint for leader %d yet: %d partitions wait for it",
                    key.leader_id,
                    len(group),
                )
                self._waiting.update(group)
                for other in self._fetchers.values():
                    other.remove_partitions(group)
                continue
            for other_key, other in self._fetchers.items():
                if other_key != key:
                    other.remove_partitions(group)
            fetcher = self._fetcher_for(key, address)
            fetcher.add_partitions(group)
        self._shutdown_idle()

    def remove_fetcher_for_partitions(self, tps: Iterable[TopicPartition]) -> None:
        self.remove_partitions(tps)

    def update_live_leaders(self, leaders: Mapping[int, tuple[str, int]]) -> None:
        """The leaders' addresses a LeaderAndIsr carries; starts partitions waiting for one."""
        self._live_leaders.update(leaders)
        self.retry_waiting()

    def retry_waiting(self) -> None:
        """Start the partitions whose leader's address was unknown, if it is known now (the
        broker calls this when its metadata changes)."""
        if self._waiting and not self._closed:
            self.add_fetcher_for_partitions(dict(self._waiting))

    def on_metadata_change(self) -> None:
        """The broker's metadata changed: partitions waiting for their leader's address
        start, and a fetcher whose leader now listens elsewhere (a broker restarted on
        another port or host) moves its partitions, at their fetch offsets, to a fetcher to
        the new address instead of retrying the old one forever."""
        if self._closed:
            return
        self.retry_waiting()
        for key, fetcher in list(self._fetchers.items()):
            address = self._endpoints(key.leader_id)
            if address is None or address == self._addresses.get(key):
                continue
            # taken out now: an answer the old fetcher is still waiting for is then ignored
            states = fetcher.remove_partitions(list(fetcher.partition_states()))
            log.info("leader %d moved from %s to %s: %d partitions follow it", key.leader_id,
                     self._addresses.get(key), address, len(states))  # fmt: skip
            del self._fetchers[key]
            self._addresses.pop(key, None)
            self._stop(fetcher)
            if states:
                moved = self._fetcher_for(key, address)
                moved.add_partitions({
                    tp: InitialFetchState(key.leader_id, s.current_leader_epoch, s.fetch_offset,
                                          s.topic_id)
                    for tp, s in states.items()
                })  # fmt: skip

    # -- the rest of Kafka's manager --------------------------------------------------------

    def remove_partitions(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, PartitionFetchState]:
        wanted = set(tps)
        for tp in wanted:
            self._waiting.pop(tp, None)
        removed: dict[TopicPartition, PartitionFetchState] = {}
        for fetcher in self._fetchers.values():
            removed.update(fetcher.remove_partitions(wanted))
        self._shutdown_idle()
        return removed

    def fetch_state(self, tp: TopicPartition) -> PartitionFetchState | None:
        for fetcher in self._fetchers.values():
            state = fetcher.fetch_state(tp)
            if state is not None:
                return state
        return None

    @property
    def fetchers(self) -> dict[FetcherKey, ReplicaFetcher]:
        return dict(self._fetchers)

    @property
    def failed_partitions(self) -> set[TopicPartition]:
        out: set[TopicPartition] = set()
        for fetcher in self._fetchers.values():
            out |= fetcher.failed_partitions
        return out

    def max_lag(self) -> int:
        """ReplicaMaxLag: the largest lag (messages behind the leader's HW) of any partition."""
        return max((f.max_lag() for f in self._fetchers.values()), default=0)

    async def shutdown(self) -> None:
        self._closed = True
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        await asyncio.gather(*(f.shutdown() for f in fetchers), return_exceptions=True)
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)

    # -- internals --------------------------------------------------------------------------

    def _fetcher_for(self, key: FetcherKey, address: tuple[str, int]) -> ReplicaFetcher:
        fetcher = self._fetchers.get(key)
        if fetcher is not None and self._addresses.get(key) != address:
            # the leader moved: its partitions start over on a fetcher to the new address
            self._stop(self._fetchers.pop(key))
            fetcher = None
        if fetcher is None:
            fetcher = ReplicaFetcher(
                f"ReplicaFetcher-{self.settings.replica_id}-{key.fetcher_id}-{key.leader_id}",
                self._endpoint_factory(key.leader_id, address),
                self._partitions,
                self.settings,
                on_high_watermark=self._on_high_watermark,
                quota=self.quota,
                tier_state=self.tier_state,
            )
            self._fetchers[key] = fetcher
            self._addresses[key] = address
            fetcher.start()
        return fetcher

    def _shutdown_idle(self) -> None:
        for key, fetcher in list(self._fetchers.items()):
            if fetcher.partition_count == 0:
                del self._fetchers[key]
                self._addresses.pop(key, None)
                self._stop(fetcher)

    def _stop(self, fetcher: ReplicaFetcher) -> None:
        task = asyncio.get_running_loop().create_task(fetcher.shutdown())
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)
