"""Parked ShareFetches (Kafka's DelayedShareFetch purgatory), by data partition and share
group, first parked first woken.

A ShareFetch with nothing to acquire parks on its session's partitions until records may be
acquirable: the partition's high watermark moved (every group's) or the group's
share-partition gave records back (that group's). An event wakes one fetch per group, not
all of them: they would all read the log for records only one of them acquires. The woken
fetch reads after the event; if records are left for others (its limits stopped it) it
passes the wake on (``wake`` again), so every record that can be acquired is, and each event
costs one read per group, as Kafka's fetch lock lets one DelayedShareFetch at a time read a
share-partition.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from tidelog.util.topic_partition import TopicPartition


class ShareFetchWaits:
    def __init__(self) -> None:
        self._parked: dict[TopicPartition, dict[str, list[asyncio.Future[bool]]]] = {}

    def __len__(self) -> int:
        return len({id(f) for groups in list(self._parked.values())
                    for waiters in list(groups.values()) for f in waiters})

    def wake(self, tp: TopicPartition, group_id: str | None = None) -> int:
        """Wake the first fetch parked on ``tp`` of ``group_id`` (of every group: None) that
        is not woken already; returns how many were woken."""
        groups = self._parked.get(tp)
        if not groups:
            return 0
        n = 0
        for group in [group_id] if group_id is not None else list(groups):
            for fut in groups.get(group, ()):
                if not fut.done():
                    fut.set_result(True)
                    n += 1
                    break
        return n

    async def wait(self, group_id: str, tps: Iterable[TopicPartition], timeout_ms: int) -> bool:
        """Park until woken (True) or ``timeout_ms`` (False)."""
        if timeout_ms <= 0:
            return False
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        keys = list(tps)
        for tp in keys:
            self._parked.setdefault(tp, {}).setdefault(group_id, []).append(fut)
        timer = loop.call_later(timeout_ms / 1000, _expire, fut)
        try:
            return await fut
        finally:
            timer.cancel()
            for tp in keys:
                self._remove(tp, group_id, fut)

    def _remove(self, tp: TopicPartition, group_id: str, fut: asyncio.Future[bool]) -> None:
        groups = self._parked.get(tp)
        waiters = groups.get(group_id) if groups is not None else None
        if groups is None or waiters is None:
            return
        waiters.remove(fut)
        if not waiters:
            del groups[group_id]
            if not groups:
                del self._parked[tp]


def _expire(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(False)
