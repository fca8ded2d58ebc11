"""What a cluster member changes through any broker and applies on all, beside topics,
ACLs and SCRAM users: the dynamic broker configs (broker_configs.py) and the client
quotas (quotas.py), both read from ZooKeeper before the broker serves and kept current
by one watch of ``/config/changes`` (change_notifications.py), re-armed with a new session."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from tidelog.config.broker_config import BrokerConfig

from ..quota.manager import ClientQuotaManager
from ..quota.wiring import new_quota_manager
from .broker_configs import ZkDynamicBrokerConfig
from .change_notifications import ConfigChangeListener
from .client import KafkaZkClient
from .quotas import ZkClientQuotaStore

if TYPE_CHECKING:
    from tidelog.storage.manager import LogManager


def start_zk_configs(
    zk: KafkaZkClient,
    config: BrokerConfig,
    logs: LogManager,
    on_new_session: list[Callable[[], object]],
) -> tuple[ZkDynamicBrokerConfig, ClientQuotaManager]:
    """Built on the broker's loop, in its start-up (blocking reads, as the metadata store's)."""
    dynamic = ZkDynamicBrokerConfig(config, logs, zk, asyncio.get_running_loop())
    store = ZkClientQuotaStore(zk)
    listener = ConfigChangeListener(zk)
    listener.add_handler(dynamic.handler())
    for handler in store.handlers():
        listener.add_handler(handler)
    listener.load()
    on_new_session.append(listener.load)
    return dynamic, new_quota_manager(config, store)
