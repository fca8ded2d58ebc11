"""Delayed-fetch purgatory: a Fetch that cannot be satisfied yet parks a future keyed by its
partitions; an append to any of them (or the timeout) wakes it. No polling loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from tidelog.metrics import add_remote_time
from tidelog.util.topic_partition import TopicPartition


class FetchPurgatory:
    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[asyncio.Future[bool]]] = {}

    def __len__(self) -> int:
        # list() snapshots the values in one C call, so other threads (tests, monitoring)
        # may ask while the loop thread adds/removes watchers
        return sum(len(s) for s in list(self._watchers.values()))

    def check_and_complete(self, tp: TopicPartition) -> int:
        """Wake every fetch waiting on ``tp``; returns how many were woken."""
        waiters = self._watchers.pop(tp, None)
        if not waiters:
            return 0
        n = 0
        for fut in waiters:
            if not fut.done():
                fut.set_result(True)
                n += 1
        return n

    async def wait(self, tps: Iterable[TopicPartition], timeout_ms: int) -> bool:
        """True if woken by an append, False on timeout."""
        if timeout_ms <= 0:
            return False
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        keys = list(tps)
        for tp in keys:
            self._watchers.setdefault(tp, set()).add(fut)

        def expire() -> None:
            if not fut.done():
                fut.set_result(False)

        handle = loop.call_later(timeout_ms / 1000, expire)
        parked = time.perf_counter_ns()
        try:
            return await fut
        finally:
            add_remote_time(time.perf_counter_ns() - parked)  # the request's RemoteTimeMs
            handle.cancel()
            for tp in keys:
                s = self._watchers.get(tp)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._watchers[tp]
