"""The coordinator runtime (Kafka's CoordinatorRuntime) over a small shard of its own: internal
topics served by registration (no topic is known by name), partition load states, a load
answering in order after the ones before it, a stopped coordinator installing nothing, and
a timer stopped with its coordinator."""

from __future__ import annotations

import asyncio

from tidelog.records import RecordBatch, RecordBatchBuilder
from tidelog.server.coordinator.runtime import (
    CoordinatorPartitions,
    CoordinatorRuntime,
    CoordinatorState,
    ReplayShard,
)
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.server.coordinator.timer import CoordinatorTimer
from tidelog.util.topic_partition import TopicPartition

TOPIC = "__some_state"


class KeyCounts(ReplayShard[dict[bytes, int]]):
    """Per partition: how many records each key had, installed as a dict."""

    def __init__(self, store: InMemoryOffsetsStore) -> None:
        super().__init__(CoordinatorPartitions(), store.read_batches)
        self.installed: dict[int, dict[bytes, int]] = {}

    def new_load(self) -> dict[bytes, int]:
        return {}

    def replay_into(self, loaded: dict[bytes, int], partition: int, batch: RecordBatch) -> None:
        for rec in batch.iter_records():
            assert rec.key is not None
            loaded[rec.key] = loaded.get(rec.key, 0) + 1

    def install(self, partition: int, loaded: dict[bytes, int]) -> None:
        self.installed[partition] = loaded

    def forget(self, partition: int) -> int:
        return len(self.installed.pop(partition, {}))


def _store(batches: int) -> InMemoryOffsetsStore:
    store = InMemoryOffsetsStore()
    for i in range(batches):
        builder = RecordBatchBuilder()
        builder.append(0, b"k%d" % (i % 3), b"v")
        store.append(0, builder.build())
    return store


def test_only_registered_topics_are_loaded_and_unloaded() -> None:
    shard = KeyCounts(_store(7))
    runtime = CoordinatorRuntime()
    runtime.register(TOPIC, shard)

    async def run() -> None:
        assert runtime.schedule_load(TopicPartition("orders", 0)) is None
        task = runtime.schedule_load(TopicPartition(TOPIC, 0))
        assert task is not None
        assert shard.partitions.state(0) == CoordinatorState.LOADING
        await task

    asyncio.run(run())
    assert shard.partitions.state(0) == CoordinatorState.ACTIVE
    assert shard.installed == {0: {b"k0": 3, b"k1": 2, b"k2": 2}}
    assert runtime.schedule_unload(TopicPartition("orders", 0)) == 0
    assert runtime.schedule_unload(TopicPartition(TOPIC, 0)) == 3
    assert shard.partitions.state(0) == CoordinatorState.CLOSED
    assert shard.installed == {}


def test_a_one_broker_start_answers_loading_until_each_partition_is_in() -> None:
    shard = KeyCounts(_store(200))
    runtime = CoordinatorRuntime()
    runtime.register(TOPIC, shard)

    async def run() -> None:
        task = runtime.load_all(TOPIC, range(3))
        assert task is not None
        assert shard.partitions.loading == {0, 1, 2}  # before the task's first turn
        await task

    asyncio.run(run())
    assert shard.partitions.owned == {0, 1, 2} and not shard.partitions.loading
    assert sum(shard.installed[0].values()) == 200


def test_a_coordinator_stopped_during_its_load_installs_nothing() -> None:
    shard = KeyCounts(_store(200))  # enough batches for the load to yield to the loop
    runtime = CoordinatorRuntime()
    runtime.register(TOPIC, shard)

    async def run() -> None:
        task = runtime.schedule_load(TopicPartition(TOPIC, 0))
        assert task is not None
        await asyncio.sleep(0)
        runtime.unregister(TOPIC)
        await task

    asyncio.run(run())
    assert shard.installed == {}
    assert shard.partitions.state(0) == CoordinatorState.LOADING  # nobody serves it now


def test_elect_owns_nothing_then_loads_what_is_led() -> None:
    shard = KeyCounts(_store(2))
    runtime = CoordinatorRuntime()
    runtime.register(TOPIC, shard)
    shard.partitions.activate(5)  # a stale ownership from before

    async def run() -> None:
        tasks = runtime.elect([TopicPartition(TOPIC, 0), TopicPartition("orders", 0)])
        assert len(tasks) == 1
        assert shard.partitions.owned == set() and shard.partitions.loading == {0}
        await asyncio.gather(*tasks)

    asyncio.run(run())
    assert shard.partitions.owned == {0}


def test_the_timer_stops_with_its_coordinator() -> None:
    runs: list[int] = []

    async def run() -> None:
        runtime = CoordinatorRuntime()
        timer = CoordinatorTimer(asyncio.get_running_loop())
        runtime.register(TOPIC, KeyCounts(InMemoryOffsetsStore()), timer)
        task = timer.schedule("tick", lambda: runs.append(1), 0, 1)
        for _ in range(50):
            if runs:
                break
            await asyncio.sleep(0.01)
        runtime.unregister(TOPIC)
        seen = len(runs)
        await asyncio.sleep(0.05)
        assert len(runs) == seen and task.runs == seen

    asyncio.run(run())
    assert runs
