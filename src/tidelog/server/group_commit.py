"""Group commit for durable logs: appends share fsyncs, and the fsync leaves the event loop.

A log whose ``flush.messages`` is reached by a produce append (``flush.messages=1``: every
append) is fsynced inline by the storage layer when the log is used on its own. On the
broker's produce path the fsync is deferred instead and shared (classic group commit):

* every append registers its log here; at the end of the event-loop turn (``call_soon``:
  after every handler step already scheduled) a flush *round* starts for each registered
  log that has none in flight: its target is the log end offset at that moment, and the
  fsyncs run on a worker thread (``Log.flush_outside_lock``), so the loop keeps receiving,
  validating and appending while the disk works;
* appends that arrive while a log's round is in flight join that log's *next* round, which
  starts as soon as the current one ends: one fsync covers everything that arrived during
  the previous one, however many connections sent it;
* when a round ends (on the loop) the high watermark advances to the round's target (never
  past it: later records are not on disk yet), delayed fetches wake, and only then are the
  producers of that round answered. A failed round answers its producers and the next
  round's with the error (the log dir failure path takes the dir offline): an append made
  after a failed fsync is never acknowledged.

Kafka fsyncs inside each append; the guarantee is the same (acks=1/all answered only once
the records are on disk, nothing readable by consumers before), the fsync is shared.
State is touched only on the broker's event-loop thread; the worker threads only fsync.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from tidelog.storage.errors import KafkaStorageError
from tidelog.util.topic_partition import TopicPartition

if TYPE_CHECKING:
    from tidelog.storage.log import Log

log = logging.getLogger(__name__)
# Called on the loop when a round ended: (partition, log, the offset now on disk, or the
# error). On success the caller advances the HW to that offset and wakes fetches.
Completion = Callable[[TopicPartition, "Log", int, BaseException | None], None]
# Rounds of different logs run in parallel (the disk queues them); one log has at most one.
FLUSH_THREADS = 4

Waiter = asyncio.Future[BaseException | None]


class GroupCommit:
    """Per partition: the round in flight (if any) and the next one being gathered."""

    def __init__(self, on_flushed: Completion) -> None:
        self._on_flushed = on_flushed
        # per partition: its log and the future its producers wait on (result: the error)
        self._next: dict[TopicPartition, tuple[Log, Waiter]] = {}
        self.pending = self._next  # (to read only: ``waiter(tp) is not None`` as ``tp in``)
        self._in_flight: set[TopicPartition] = set()
        self._scheduled = False
        self._pool: ThreadPoolExecutor | None = None
        self._stopped = False
        self.flushes = 0  # rounds done (one fsync of each file per round), for tests, benches

    def add(self, tp: TopicPartition, lg: Log) -> None:
        """Register ``lg`` (just appended to) for its next flush round."""
        if tp in self._next:
            return
        loop = asyncio.get_running_loop()
        self._next[tp] = (lg, loop.create_future())
        if tp not in self._in_flight and not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._start_gathered)

    def waiter(self, tp: TopicPartition) -> Waiter | None:
        """The future of the round that covers ``tp``'s latest append (None if none pending).

        Take it right after the append, before suspending: a round may start at any turn
        after. Its result is None on success or the flush's exception: never an exception
        set on the future, so an acks=0 append that nobody awaits leaves no unretrieved
        error.
        """
        entry = self._next.get(tp)
        return None if entry is None else entry[1]

    def shutdown(self) -> None:
        """Wait for the rounds in flight (before the logs close under them); a round due
        later fails its producers instead of starting."""
        self._stopped = True
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _start_gathered(self) -> None:
        self._scheduled = False
        for tp in [tp for tp in self._next if tp not in self._in_flight]:
            self._start(tp)

    def _start(self, tp: TopicPartition) -> None:
        lg, waiter = self._next.pop(tp)
        if self._stopped:
            waiter.set_result(KafkaStorageError(f"{tp}: the broker is shutting down"))
            return
        target = lg.log_end_offset  # everything appended so far, on the loop
        if self._pool is None:
            self._pool = ThreadPoolExecutor(FLUSH_THREADS, thread_name_prefix="tidelog-fsync")
        self._in_flight.add(tp)
        loop = asyncio.get_running_loop()
        self._pool.submit(self._flush, loop, tp, lg, target, waiter)

    def _flush(self, loop: asyncio.AbstractEventLoop, tp: TopicPartition, lg: Log,
               target: int, waiter: Waiter) -> None:
        """On a worker thread: fsync, then hand the outcome straight to the loop (one
        wake-up; a concurrent future chained to an asyncio one would take two turns)."""
        error: BaseException | None = None
        try:
            lg.flush_outside_lock(target)
        except Exception as exc:  # the loop reports it; the producers get it
            error = exc
        try:
            loop.call_soon_threadsafe(self._finished, tp, lg, target, waiter, error)
        except RuntimeError:  # the loop is closed (the broker stopped): nobody waits
            pass

    def _finished(self, tp: TopicPartition, lg: Log, target: int, waiter: Waiter,
                  error: BaseException | None) -> None:
        self._in_flight.discard(tp)
        if error is None:
            self.flushes += 1
        try:
            self._on_flushed(tp, lg, target, error)
        except Exception:  # the records' fate is known: the producers must still hear it
            log.exception("completing the flush of %s to offset %d", tp, target)
        if not waiter.done():
            waiter.set_result(error)
        if tp not in self._next:
            return
        if error is None:
            self._start(tp)  # everything that arrived during this round, in one fsync
            return
        _, later = self._next.pop(tp)  # appended after a failed fsync: never acknowledged
        if not later.done():
            later.set_result(error)
