"""A real ReplicaManager in ZooKeeper mode over two log dirs, its fetchers a stub: what the
tests of LeaderAndIsr's work off the event loop share."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tidelog.config.broker_config import BrokerConfig
from tidelog.server.metadata.local_store import LocalMetadataStore
from tidelog.server.replica_manager import ReplicaManager
from tidelog.util.clock import ManualClock
from tidelog.util.topic_partition import TopicPartition

NODE = 1


class Fetchers:
    """The fetcher manager's calls, the partitions added to fetchers kept."""

    def __init__(self) -> None:
        self.added: dict[TopicPartition, object] = {}

    def add_fetcher_for_partitions(self, states: Mapping[TopicPartition, object]) -> None:
        self.added.update(states)

    def remove_fetcher_for_partitions(self, tps: object) -> None:
        pass


@pytest.fixture
def rm(tmp_path: Path) -> Iterator[ReplicaManager]:
    config = BrokerConfig({"log.dirs": f"{tmp_path / 'a'},{tmp_path / 'b'}", "node.id": NODE,
                           "zookeeper.connect": "127.0.0.1:2181"})
    manager = ReplicaManager(config, ManualClock(1_700_000_000_000),
                             store=LocalMetadataStore(config.log_dirs, NODE, "c1"),
                             fetcher_manager=Fetchers())
    manager.startup()
    yield manager
    manager.shutdown()
