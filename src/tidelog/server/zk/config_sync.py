"""What a cluster member changes through any broker and applies on all, beside topics,
ACLs and SCRAM users: the dynamic broker configs (broker_configs.py) and the client
quotas (quotas.py), both read from ZooKeeper before the broker serves and kept current
by the broker's one watch of ``/config/changes`` (change_notifications.py), whose handlers
read them whole again with a new session."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from tidelog.config.broker_config import BrokerConfig

from ..quota.manager import ClientQuotaManager
from ..quota.wiring import new_quota_manager
from .broker_configs import ZkDynamicBrokerConfig
from .change_notifications import ZkNodeChangeNotificationListener
from .client import KafkaZkClient
from .quotas import ZkClientQuotaStore

if TYPE_CHECKING:
    from tidelog.storage.manager import LogManager


def start_zk_configs(
    zk: KafkaZkClient,
    changes: ZkNodeChangeNotificationListener,
    config: BrokerConfig,
    logs: LogManager,
) -> tuple[ZkDynamicBrokerConfig, ClientQuotaManager]:
    """Built on the broker's loop, in its start-up (blocking reads, as the metadata store's)."""
    dynamic = ZkDynamicBrokerConfig(config, logs, zk, asyncio.get_running_loop())
    store = ZkClientQuotaStore(zk)
    handlers = [dynamic.handler(), *store.handlers()]
    for handler in handlers:
        changes.add_handler(handler)
    changes.arm()
    for handler in handlers:
        handler.reload()
    return dynamic, new_quota_manager(config, store)
