"""The one-broker AdminManager: concurrent creates of one name (a producer and a consumer
auto-creating the topic at once) make it once, with one topic id everywhere."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tidelog.protocol.errors import ErrorCode
from tidelog.server.errors import ApiError
from tidelog.server.metadata.admin import NewTopic
from tidelog.server.metadata.store import uuid_to_kafka
from tidelog.testing import EmbeddedBroker


def test_concurrent_creates_of_one_name_make_it_once(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path) as b:
        admin = b.broker.admin_manager

        async def race() -> list[Any]:
            return await asyncio.gather(
                admin.create_topic(NewTopic("dup", 2)), admin.create_topic(NewTopic("dup", 2)),
                admin.auto_create("dup"), return_exceptions=True)

        created, second, auto = b.run(race())
        assert isinstance(second, ApiError) and second.code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert auto is None  # being created: the client retries
        topic_id = b.broker.metadata_cache.image.topics["dup"].topic_id
        assert created.topic_id == topic_id == b.broker.replica_manager.topic("dup").topic_id
        for p in range(2):
            text = (tmp_path / f"dup-{p}" / "partition.metadata").read_text()
            assert text == f"version: 0\ntopic_id: {uuid_to_kafka(topic_id)}\n"


def test_concurrent_partition_growth_applies_once(tmp_path: Path) -> None:
    with EmbeddedBroker(log_dir=tmp_path) as b:
        admin = b.broker.admin_manager

        async def race() -> list[Any]:
            await admin.create_topic(NewTopic("grow", 1))
            return await asyncio.gather(admin.create_partitions("grow", 3),
                                        admin.create_partitions("grow", 3),
                                        return_exceptions=True)

        first, second = b.run(race())
        assert first is None
        assert isinstance(second, ApiError) and second.code in (
            ErrorCode.INVALID_PARTITIONS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        assert len(b.broker.metadata_cache.image.topics["grow"].partitions) == 3
