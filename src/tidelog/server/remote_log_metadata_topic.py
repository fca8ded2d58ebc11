"""``__remote_log_metadata`` made at start-up, retried until it exists (Kafka's
TopicBasedRemoteLogMetadataManager.initializeResources).

Kafka creates the topic from an initialization thread as soon as the manager is configured,
with ``rlmm.config.remote.log.metadata.topic.num.partitions`` partitions and
``...replication.factor`` replicas (default 3, never lowered to fit the cluster), retrying
every ``...initialization.retry.interval.ms``. Until it exists nothing is tiered. On a
cluster with fewer live brokers than the replication factor the creation cannot succeed:
Kafka logs each failed attempt and, after ``...initialization.retry.max.timeout.ms``, gives
up and exits the broker at its next metadata call. Here the broker keeps serving (producers
and local reads are not affected) and keeps retrying, and says why, once every
``log_every_ms``, in one line naming the config, the live broker count and the fix (a
warning, an error once Kafka's timeout has passed); ``ready`` is exported on ``/metrics``
(``tidelog_remote_log_metadata_topic_ready``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from tidelog.config.remote_log_config import REMOTE_LOG_METADATA_TOPIC
from tidelog.util.clock import Clock

log = logging.getLogger(__name__)

FIRST_LOG_AFTER_MS = 10_000  # a cluster starting broker by broker is not yet a problem
LOG_EVERY_MS = 60_000
RF_CONFIG = "remote.log.metadata.topic.replication.factor"
PARTITIONS_CONFIG = "remote.log.metadata.topic.num.partitions"

EnsureTopic = Callable[[], Awaitable[bool]]
TopicPartitions = Callable[[], "int | None"]  # the topic's partition count, None: no topic
LiveBrokers = Callable[[], int]


class MetadataTopicInitializer:
    """Creates ``__remote_log_metadata`` (through ``ensure``, which answers True once it
    exists and is led) and reports while it cannot."""

    def __init__(self, *, partitions: TopicPartitions, ensure: EnsureTopic,
                 live_brokers: LiveBrokers | None, num_partitions: int,
                 replication_factor: int, config_prefix: str, retry_interval_ms: int,
                 retry_max_timeout_ms: int, clock: Clock,
                 first_log_after_ms: int = FIRST_LOG_AFTER_MS,
                 log_every_ms: int = LOG_EVERY_MS) -> None:
        self.partitions = partitions
        self.ensure = ensure
        self.num_partitions = num_partitions
        self.live_brokers = live_brokers  # None: one broker, which hosts every replica
        self.replication_factor = replication_factor
        self.config_name = config_prefix + RF_CONFIG
        self.partitions_config = config_prefix + PARTITIONS_CONFIG
        self.retry_interval_ms = retry_interval_ms
        self.retry_max_timeout_ms = retry_max_timeout_ms
        self.clock = clock
        self.first_log_after_ms = first_log_after_ms
        self.log_every_ms = log_every_ms
        self.ready = False
        self.reason = f"{REMOTE_LOG_METADATA_TOPIC} is not created yet"
        self.warnings = 0  # the waiting lines logged
        self._started_ms = clock.milliseconds()
        self._next_log_ms = self._started_ms + first_log_after_ms

    async def run(self) -> None:
        """Try until the topic is there (the broker's start does not wait for it)."""
        while not await self.try_once():
            await asyncio.sleep(self.retry_interval_ms / 1000)

    async def try_once(self) -> bool:
        if self.ready:
            return True
        existing = self.partitions()
        live = self.live_brokers() if self.live_brokers is not None else None
        if existing is not None and existing != self.num_partitions:
            self.reason = self._wrong_partitions(existing)  # Kafka's initialization fails
        elif existing is None and live is not None and live < self.replication_factor:
            self.reason = self._too_few(live)
        else:
            try:
                self.ready = await self.ensure()
            except Exception as exc:  # ZooKeeper away: the next attempt may succeed
                self.reason = f"creating {REMOTE_LOG_METADATA_TOPIC}: {exc!r}"
            else:
                self.reason = f"{REMOTE_LOG_METADATA_TOPIC} is being created"
        if self.ready:
            log.info("%s is ready: tiered storage starts", REMOTE_LOG_METADATA_TOPIC)
            return True
        self._maybe_log()
        return False

    def _wrong_partitions(self, existing: int) -> str:
        return (f"tiered storage is waiting: {REMOTE_LOG_METADATA_TOPIC} has {existing} "
                f"partitions but {self.partitions_config}={self.num_partitions}; set "
                f"{self.partitions_config}={existing} (its records are placed by that count)")

    def _too_few(self, live: int) -> str:
        return (f"tiered storage is waiting: {REMOTE_LOG_METADATA_TOPIC} needs "
                f"{self.config_name}={self.replication_factor} live brokers but "
                f"{live} {'is' if live == 1 else 'are'} live; start "
                f"{self.replication_factor - live} more broker(s) or set "
                f"{self.config_name}={max(1, live)} (nothing is copied to remote storage "
                f"until then)")

    def _maybe_log(self) -> None:
        now = self.clock.milliseconds()
        if now < self._next_log_ms:
            return
        self._next_log_ms = now + self.log_every_ms
        self.warnings += 1
        waited = now - self._started_ms
        if waited > self.retry_max_timeout_ms:
            log.error("%s (waiting %d s, beyond remote.log.metadata.initialization.retry."
                      "max.timeout.ms)", self.reason, waited // 1000)
        else:
            log.warning("%s (waiting %d s)", self.reason, waited // 1000)
