"""A cluster member's part of a failed log dir (the ZooKeeper half of Kafka's
ReplicaManager.handleLogDirFailure).

The LogManager takes the dir offline (its logs closed, its partitions refused with
KAFKA_STORAGE_ERROR, LeaderAndIsr for them answered so). Then, on the broker's loop, the
followers of those partitions stop fetching and the broker writes a
``/log_dir_event_notification/log_dir_event_<seq>`` znode (``{"version":1,"broker":<id>,
"event":1}``): the controller asks the broker which of its replicas are offline (a
LeaderAndIsr for all of them), moves leadership off those and takes them out of their ISRs
(controller/log_dir_events.py).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from .replica_manager import ReplicaManager
from .zk.client import KafkaZkClient

log = logging.getLogger(__name__)


class LogDirFailureNotifier:
    def __init__(self, broker_id: int, zk: KafkaZkClient, replica_manager: ReplicaManager,
                 loop: asyncio.AbstractEventLoop) -> None:  # fmt: skip
        self.broker_id = broker_id
        self.zk = zk
        self.replica_manager = replica_manager
        self.loop = loop
        self._tasks: set[asyncio.Task[Any]] = set()
        replica_manager.logs.failure_channel.add_listener(self._on_failure)

    def _on_failure(self, path: Path) -> None:
        """Whichever thread hit the error (the LogManager took the dir offline first)."""
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._handle, Path(path))

    def _handle(self, path: Path) -> None:
        rm = self.replica_manager
        offline = sorted(tp for tp, d in rm.logs.offline_partitions().items() if d == path)
        rm.fetcher_manager.remove_fetcher_for_partitions(offline)
        log.warning("Broker %d stopped fetcher for partitions %s because they are in the failed "
                    "log directory %s.", self.broker_id, offline[:20], path)  # fmt: skip
        task = self.loop.create_task(self._propagate(path))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _propagate(self, path: Path) -> None:
        try:
            znode = await asyncio.to_thread(self.zk.propagate_log_dir_event, self.broker_id)
        except Exception:
            log.exception("broker %d: telling the controller log dir %s failed did not succeed",
                          self.broker_id, path)  # fmt: skip
            return
        log.info("broker %d: log dir %s failed, notified the controller (%s)",
                 self.broker_id, path, znode)  # fmt: skip

    def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
