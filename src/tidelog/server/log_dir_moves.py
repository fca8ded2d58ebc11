"""The broker's side of AlterReplicaLogDirs: one task copying every moving partition a chunk
at a time on the event loop (Kafka's ReplicaAlterLogDirsThread), so produce and fetch keep
running between chunks and an append never races the swap; resumed at startup."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from tidelog.storage.replica_alter_log_dirs import ReplicaAlterLogDirs
from tidelog.util.topic_partition import TopicPartition

if TYPE_CHECKING:
    from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)


class LogDirMover:
    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager
        self.moves = ReplicaAlterLogDirs(replica_manager.logs)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        topics = self.replica_manager.store.topics

        def exists(tp: TopicPartition) -> bool:
            info = topics.get(tp.topic)
            return info is not None and 0 <= tp.partition < info.partitions

        self.moves.resume(exists)
        self._task = asyncio.get_running_loop().create_task(self._run())
        if self.moves.pending():
            self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self.moves.pending():
                for tp in self.moves.pending():
                    try:
                        self.moves.step(tp)
                    except Exception:
                        log.warning("moving %s stopped", tp, exc_info=True)
                        self.moves.fail(tp)
                    await asyncio.sleep(0)  # produce and fetch run between chunks

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.moves.close()


class HasLogDirMover(Protocol):
    """What ``log_dir_mover`` reads (the broker)."""

    @property
    def log_dir_mover(self) -> LogDirMover | None: ...


def log_dir_mover(broker: HasLogDirMover) -> LogDirMover:
    """The broker's mover (built and started by ``Broker.start``: moves a restart
    interrupted go on)."""
    mover = broker.log_dir_mover
    if mover is None:
        raise RuntimeError("the broker has not started: no log dir mover yet")
    return mover
