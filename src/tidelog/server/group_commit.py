"""Group commit for durable logs: one fsync per log per event-loop turn.

A log whose ``flush.messages`` is reached by a produce append (``flush.messages=1``: every
append) is fsynced inline by the storage layer when the log is used on its own. On the
broker's produce path the fsync is deferred instead: every append of one event-loop turn,
from every connection, registers its log here; at the end of the turn (``call_soon``: after
every handler step already scheduled) each registered log is flushed once, then its high
watermark advances and delayed fetches wake, and only then do the producers' responses go
out. Kafka fsyncs inside each append; the guarantee is the same (acks=1/all answered only
once the records are on disk, nothing readable by consumers before), the fsync is shared.

All calls happen on the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tidelog.util.topic_partition import TopicPartition

# Called after a successful flush (advance the HW, wake fetches), or with the error.
Completion = Callable[[TopicPartition, Any, BaseException | None], None]


def flush_due(lg: Any) -> bool:
    """Kafka's check in UnifiedLog.append: unflushed messages reached ``flush.messages``."""
    return bool(lg.log_end_offset - lg.recovery_point >= lg.config.flush_messages)


class GroupCommit:
    """Pending flushes of the current event-loop turn, keyed by partition."""

    def __init__(self, on_flushed: Completion) -> None:
        self._on_flushed = on_flushed
        # per partition: its log and the future its producers wait on (result: the error)
        self._pending: dict[TopicPartition, tuple[Any, asyncio.Future[BaseException | None]]] = {}
        self._scheduled = False
        self.flushes = 0  # fsync rounds done (one per log per turn), for tests and benches

    def add(self, tp: TopicPartition, lg: Any) -> None:
        """Register ``lg`` (just appended to) for the flush at the end of this turn."""
        if tp in self._pending:
            return
        loop = asyncio.get_running_loop()
        self._pending[tp] = (lg, loop.create_future())
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._run)

    def waiter(self, tp: TopicPartition) -> asyncio.Future[BaseException | None] | None:
        """The future resolved when ``tp``'s pending flush is done (None if none pending).

        Its result is None on success or the flush's exception: never an exception set on
        the future, so an acks=0 append that nobody awaits leaves no unretrieved error.
        """
        entry = self._pending.get(tp)
        return None if entry is None else entry[1]

    def _run(self) -> None:
        self._scheduled = False
        pending, self._pending = self._pending, {}
        for tp, (lg, fut) in pending.items():
            error: BaseException | None = None
            try:
                lg.flush()
                self.flushes += 1
            except Exception as exc:  # the log dir failure path reports it; producers get it
                error = exc
            self._on_flushed(tp, lg, error)
            if not fut.done():
                fut.set_result(error)
