"""The ``__remote_log_metadata`` initializer's decisions with an injected clock: too few live
brokers for the replication factor is said once after ten seconds and then once a minute
(an ERROR past remote.log.metadata.initialization.retry.max.timeout.ms), never by creating;
an existing topic with another partition count than configured is refused as Kafka's
initialization refuses it; enough brokers create it and tiering starts."""

from __future__ import annotations

import asyncio
import logging

import pytest

from tidelog.server.remote_log_metadata_topic import MetadataTopicInitializer
from tidelog.util.clock import ManualClock


class World:
    def __init__(self) -> None:
        self.live = 2
        self.partitions: int | None = None
        self.creates = 0

    async def ensure(self) -> bool:
        self.creates += 1
        self.partitions = 50
        return True


def _initializer(world: World, clock: ManualClock) -> MetadataTopicInitializer:
    return MetadataTopicInitializer(
        partitions=lambda: world.partitions, ensure=world.ensure,
        live_brokers=lambda: world.live, num_partitions=50, replication_factor=3,
        config_prefix="rlmm.config.", retry_interval_ms=100, retry_max_timeout_ms=120_000,
        clock=clock)


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records
            if "tiered storage is waiting" in r.getMessage()]


def test_too_few_brokers_said_at_a_low_rate_then_created(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "tidelog.server.remote_log_metadata_topic")
    clock, world = ManualClock(0), World()
    init = _initializer(world, clock)
    for _ in range(100):  # 10 s of retries every 100 ms: not yet said
        assert not asyncio.run(init.try_once())
        clock.advance(100)
    assert _lines(caplog) == []
    for _ in range(600):  # the next minute: said once
        asyncio.run(init.try_once())
        clock.advance(100)
    ((level, line),) = _lines(caplog)
    assert level == logging.WARNING
    assert "rlmm.config.remote.log.metadata.topic.replication.factor=3" in line
    assert "2 are live" in line and "start 1 more broker(s)" in line
    assert "set rlmm.config.remote.log.metadata.topic.replication.factor=2" in line
    asyncio.run(init.try_once())  # 70 s: a minute after the first line, the second
    clock.advance(60_000)  # 130 s, past Kafka's 120 s: an error
    asyncio.run(init.try_once())
    assert [lv for lv, _ in _lines(caplog)] == [logging.WARNING, logging.WARNING,
                                                logging.ERROR]
    assert world.creates == 0 and not init.ready
    world.live = 3
    assert asyncio.run(init.try_once()) and init.ready and world.creates == 1


def test_an_existing_topic_with_other_partitions_is_refused(
        caplog: pytest.LogCaptureFixture) -> None:
    clock, world = ManualClock(0), World()
    world.partitions = 5
    init = _initializer(world, clock)
    clock.advance(10_000)
    assert not asyncio.run(init.try_once())
    ((_, line),) = _lines(caplog)
    assert "has 5 partitions but rlmm.config.remote.log.metadata.topic.num.partitions=50" in line
    assert world.creates == 0
