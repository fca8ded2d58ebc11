"""The registry's storage: the compacted ``_schemas`` topic, written and read back through a
broker like any client does (Confluent's KafkaStore and KafkaStoreReaderThread). One reader
thread consumes the topic from the start and hands each record to the event loop, which
applies it to the state; a write produces its record and returns once the reader has applied
it, so every answer reflects the topic and a restart rebuilds exactly the same state."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ClusterMetadata, NewTopic

from . import errors
from .records import StoreKey
from .state import RegistryState

log = logging.getLogger(__name__)
Record = tuple[bytes | None, bytes | None, int]


# what a broker answers before it knows its cluster (librdkafka: _PARTIAL for an answer with
# no brokers and no topics, a cluster broker's before the controller's first UpdateMetadata)
_NOT_YET = {KafkaError._PARTIAL, KafkaError._TRANSPORT, KafkaError._TIMED_OUT,
            KafkaError._ALL_BROKERS_DOWN}


def _cluster_metadata(admin: AdminClient, timeout_s: float) -> ClusterMetadata:
    """The cluster's metadata, asked again while the broker does not know its cluster yet
    (the registry starts with its broker: in a cluster, maybe before the controller told the
    broker who is alive), until ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            return admin.list_topics(timeout=max(left, 0.1))
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if not (isinstance(err, KafkaError) and err.code() in _NOT_YET) or left <= 0.2:
                raise
            log.info("the cluster's metadata is not known yet (%s): asking again", err.str())
            time.sleep(0.2)


class KafkaStore:
    def __init__(
        self,
        *,
        topic: str,
        client_config: dict[str, Any],
        state: RegistryState,
        timeout_ms: int,
        on_applied: Callable[[], None] | None = None,
    ) -> None:
        self.topic = topic
        self.client_config = dict(client_config)
        self.state = state
        self.timeout = timeout_ms / 1000
        self.on_applied = on_applied
        self._loop: asyncio.AbstractEventLoop | None = None
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, init_timeout_s: float = 60.0) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        await loop.run_in_executor(None, self._ensure_topic, init_timeout_s)
        self._producer = Producer(
            {**self.client_config, "acks": "all", "linger.ms": 0, "message.timeout.ms": 30000}
        )
        self._consumer = Consumer(
            {
                **self.client_config,
                "group.id": f"{self.topic}-reader",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 100,
            }
        )
        self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        self._thread = threading.Thread(target=self._read_loop, name="schema-registry-reader")
        self._thread.daemon = True
        self._thread.start()
        # a NOOP record (Confluent writes one too): its offset is the end to catch up to
        await self.put(StoreKey("NOOP"), None, timeout_s=init_timeout_s)

    async def stop(self) -> None:
        self._stopping.set()
        loop = asyncio.get_running_loop()
        if self._thread is not None:
            await loop.run_in_executor(None, self._thread.join)
            self._thread = None
        if self._consumer is not None:
            await loop.run_in_executor(None, self._consumer.close)
            self._consumer = None
        if self._producer is not None:
            await loop.run_in_executor(None, self._producer.flush, 5)
            self._producer = None
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_exception(errors.store_error("The schema registry is shutting down"))
        self._waiters.clear()

    def _ensure_topic(self, timeout_s: float) -> None:
        """Create ``_schemas`` (one partition, compacted) when missing, as Confluent does."""
        admin = AdminClient(self.client_config)
        metadata = _cluster_metadata(admin, timeout_s)
        found = metadata.topics.get(self.topic)
        if found is not None and found.error is None:
            return
        replicas = min(3, max(1, len(metadata.brokers)))
        new = NewTopic(
            self.topic, num_partitions=1, replication_factor=replicas,
            config={"cleanup.policy": "compact"},
        )
        future = admin.create_topics([new], operation_timeout=timeout_s)[self.topic]
        try:
            future.result(timeout_s)
        except Exception as exc:
            err = exc.args[0] if exc.args else None
            if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                raise
        log.info("created the schema registry topic %s (%d replicas)", self.topic, replicas)

    # -- reading ------------------------------------------------------------------------------
    def _read_loop(self) -> None:
        consumer, loop = self._consumer, self._loop
        assert consumer is not None and loop is not None
        while not self._stopping.is_set():
            try:
                messages = consumer.consume(num_messages=500, timeout=0.2)
            except Exception:
                log.exception("schema registry reader failed; retrying")
                continue
            batch: list[Record] = []
            for m in messages:
                error = m.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        log.warning("schema registry reader: %s", error)
                    continue
                batch.append((m.key(), m.value(), int(m.offset() or 0)))
            if batch and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(self._apply, batch)
                except RuntimeError:  # the loop closed under us
                    return

    def _apply(self, batch: list[Record]) -> None:
        for key, value, offset in batch:
            self.state.apply(key, value, offset)
        if self.on_applied is not None:
            self.on_applied()
        done = self.state.offset
        still = []
        for target, fut in self._waiters:
            if target <= done:
                if not fut.done():
                    fut.set_result(None)
            else:
                still.append((target, fut))
        self._waiters = still

    async def wait_until(self, offset: int, timeout_s: float) -> None:
        if self.state.offset >= offset:
            return
        assert self._loop is not None
        fut: asyncio.Future[None] = self._loop.create_future()
        self._waiters.append((offset, fut))
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            raise errors.operation_timeout(
                "Write to the Kafka store timed out while waiting for the reader"
            ) from None

    async def sync(self, timeout_s: float | None = None) -> None:
        """Wait until the reader has applied everything in the topic now (after a write
        another registry made, e.g. one forwarded to the leader): a NOOP record's offset is
        the end to reach, as Confluent's KafkaStore finds it."""
        await self.put(StoreKey("NOOP"), None, timeout_s=timeout_s)

    # -- writing ------------------------------------------------------------------------------
    async def put(
        self, key: StoreKey, value: bytes | None, *, timeout_s: float | None = None
    ) -> int:
        """Produce one record and wait until the reader has applied it; returns its offset."""
        loop, producer = self._loop, self._producer
        if loop is None or producer is None:
            raise errors.store_error("The schema registry's store is not running")
        timeout = self.timeout if timeout_s is None else timeout_s
        fut: asyncio.Future[int] = loop.create_future()

        def delivered(err: KafkaError | None, msg: Any) -> None:
            loop.call_soon_threadsafe(_settle, fut, err, msg)

        producer.produce(
            self.topic, key=key.to_bytes(), value=value, partition=0, on_delivery=delivered
        )
        await loop.run_in_executor(None, producer.flush, timeout)
        try:
            offset = await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            raise errors.operation_timeout("Write to the Kafka store timed out") from None
        await self.wait_until(offset, timeout)
        return offset


def _settle(fut: asyncio.Future[int], err: KafkaError | None, msg: Any) -> None:
    if fut.done():
        return
    if err is not None:
        fut.set_exception(errors.store_error(f"Error while writing to the Kafka store: {err}"))
    else:
        fut.set_result(int(msg.offset()))
