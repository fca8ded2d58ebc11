"""The purgatories: a Fetch that cannot be satisfied yet parks a future keyed by its
partitions, woken by a high-watermark move (or an append, for followers) or its timeout; an
acks=-1 Produce parks until its partitions' high watermarks pass it (DelayedProduce), a
DeleteRecords until every live replica's log start offset passed the deletion
(DelayedDeleteRecords). No polling loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from tidelog.metrics import add_remote_time
from tidelog.protocol.errors import ErrorCode
from tidelog.util.topic_partition import TopicPartition

_NONE = ErrorCode.NONE  # bound once: 3.11's EnumType.__getattr__ slows Enum.MEMBER


class PartitionIds(Protocol):
    """The partitions of a topic a parked Fetch waits for (a frozenset, or a bitmap)."""

    def __contains__(self, partition: object, /) -> bool: ...

    def __len__(self) -> int: ...


class _FetchWaiter:
    """One parked Fetch: its future, and the partitions that fired while it was parked or
    waiting to run (it re-reads those only)."""

    __slots__ = ("fired", "future")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.fired: set[TopicPartition] = set()


class FetchPurgatory:
    """Parked fetches keyed by partition, or (``wait_topics``, a Fetch naming many
    partitions) by topic with the partitions it waits for: one key per topic to add and
    remove, not one per partition."""

    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[_FetchWaiter]] = {}
        self._topic_watchers: dict[str, dict[_FetchWaiter, PartitionIds]] = {}
        # parked follower fetches by the follower's broker id (``wake_replica``)
        self._replica_watchers: dict[int, set[_FetchWaiter]] = {}
        # (to read only: whether ``check_and_complete(tp)`` has anything to wake, as
        # ``tp in by_partition or tp.topic in by_topic``, without a call)
        self.by_partition = self._watchers
        self.by_topic = self._topic_watchers
        self.by_replica = self._replica_watchers

    def __len__(self) -> int:
        # list() snapshots the values in one C call, so other threads (tests, monitoring)
        # may ask while the loop thread adds/removes watchers
        by_topic = list(self._topic_watchers.values())
        return (sum(len(s) for s in list(self._watchers.values()))
                + sum(len(parts) for ws in by_topic for parts in list(ws.values())))

    def check_and_complete(self, tp: TopicPartition) -> int:
        """Wake every fetch waiting on ``tp``; returns how many were woken. A fetch woken
        already and not yet run still learns that ``tp`` fired too."""
        n = 0
        by_topic = self._topic_watchers.get(tp.topic)
        if by_topic:
            n = _fire((w for w, parts in by_topic.items() if tp.partition in parts), tp)
        waiters = self._watchers.pop(tp, None)
        if not waiters:
            return n
        return n + _fire(waiters, tp)

    async def wait_topics(self, topics: Iterable[tuple[str, PartitionIds]],
                          timeout_ms: int) -> set[TopicPartition]:
        """``wait`` for the given partitions of each topic (each topic named once)."""
        if timeout_ms <= 0:
            return set()
        loop = asyncio.get_running_loop()
        waiter = _FetchWaiter(loop.create_future())
        keys = list(topics)
        for topic, parts in keys:
            self._topic_watchers.setdefault(topic, {})[waiter] = parts
        try:
            return await _park(waiter, timeout_ms)
        finally:
            for topic, _ in keys:
                ws = self._topic_watchers.get(topic)
                if ws is not None:
                    ws.pop(waiter, None)
                    if not ws:
                        del self._topic_watchers[topic]

    def wake_replica(self, broker_id: int) -> int:
        """Answer now the fetches parked by follower ``broker_id`` (as if their wait ran
        out): the leader has records of a partition that follower has not fetched yet, so
        its next Fetch, naming that partition, must not wait behind this one."""
        waiters = self._replica_watchers.pop(broker_id, None)
        n = 0
        for w in waiters or ():
            if not w.future.done():
                w.future.set_result(None)  # fired stays empty: read everything, answer
                n += 1
        return n

    async def wait(self, tps: Iterable[TopicPartition], timeout_ms: int,
                   replica_id: int = -1) -> set[TopicPartition]:
        """The partitions whose appends or high-watermark moves woke it (at least one), or
        an empty set on timeout or ``wake_replica(replica_id)`` (a follower's fetch)."""
        if timeout_ms <= 0:
            return set()
        loop = asyncio.get_running_loop()
        waiter = _FetchWaiter(loop.create_future())
        keys = list(tps)
        for tp in keys:
            self._watchers.setdefault(tp, set()).add(waiter)
        if replica_id >= 0:
            self._replica_watchers.setdefault(replica_id, set()).add(waiter)
        try:
            return await _park(waiter, timeout_ms)
        finally:
            for tp in keys:
                s = self._watchers.get(tp)
                if s is not None:
                    s.discard(waiter)
                    if not s:
                        del self._watchers[tp]
            if replica_id >= 0:
                r = self._replica_watchers.get(replica_id)
                if r is not None:
                    r.discard(waiter)
                    if not r:
                        del self._replica_watchers[replica_id]


def _fire(waiters: Iterable[_FetchWaiter], tp: TopicPartition) -> int:
    n = 0
    for w in waiters:
        w.fired.add(tp)
        if not w.future.done():
            w.future.set_result(None)
            n += 1
    return n


async def _park(waiter: _FetchWaiter, timeout_ms: int) -> set[TopicPartition]:
    """Wait for ``waiter`` to fire or ``timeout_ms``; what fired (empty: timed out)."""
    loop = asyncio.get_running_loop()

    def expire() -> None:
        if not waiter.future.done():
            waiter.future.set_result(None)  # fired stays empty

    handle = loop.call_later(timeout_ms / 1000, expire)
    parked = time.perf_counter_ns()
    try:
        await waiter.future
        return waiter.fired
    finally:
        add_remote_time(time.perf_counter_ns() - parked)  # the request's RemoteTimeMs
        handle.cancel()


Check = Callable[[TopicPartition, int], tuple[bool, ErrorCode]]


class _DelayedOperation:
    """One request waiting for an offset on each of its partitions."""

    __slots__ = ("errors", "future", "pending")

    def __init__(self, pending: dict[TopicPartition, int],
                 future: asyncio.Future[None]) -> None:
        self.pending = pending  # partition -> the offset the HW must reach
        self.errors: dict[TopicPartition, ErrorCode] = {}
        self.future = future


class ReplicationPurgatory:
    """Kafka's DelayedProduce and DelayedDeleteRecords: a request parks until ``check`` says
    each of its partitions reached its offset (an acks=-1 produce: the high watermark past the
    batch; a DeleteRecords: the low watermark past the deletion) or failed (e.g.
    NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER), or REQUEST_TIMED_OUT after the
    request's timeout. Woken by the partitions' replication changes (HW, ISR, followers' log
    start offsets, leadership)."""

    def __init__(self, check: Check) -> None:
        self._check = check
        self._watchers: dict[TopicPartition, set[_DelayedOperation]] = {}
        # the partitions operations may wait on (read-only outside: ``tp in watched`` spares
        # the call to ``check_and_complete`` on every HW move with nothing parked)
        self.watched: Mapping[TopicPartition, object] = self._watchers

    def __len__(self) -> int:
        return sum(len(s) for s in list(self._watchers.values()))

    def _try_complete(self, op: _DelayedOperation, tp: TopicPartition) -> None:
        required = op.pending.get(tp)
        if required is None:
            return
        done, error = self._check(tp, required)
        if done or error != ErrorCode.NONE:
            del op.pending[tp]
            op.errors[tp] = error
            if not op.pending and not op.future.done():
                op.future.set_result(None)

    def check_and_complete(self, tp: TopicPartition) -> int:
        """Recheck the requests waiting on ``tp``; how many completed."""
        ops = self._watchers.get(tp)
        if not ops:
            return 0
        n = 0
        for op in list(ops):
            self._try_complete(op, tp)
            if op.future.done():
                n += 1
        return n

    def try_complete(self, required: dict[TopicPartition, int]
                     ) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, int]]:
        """Kafka's tryComplete, one check per partition: (the outcomes known now, the
        partitions still short of their offset, for ``park``)."""
        errors: dict[TopicPartition, ErrorCode] = {}
        pending: dict[TopicPartition, int] = {}
        for tp, offset in required.items():
            done, error = self._check(tp, offset)
            if done or error != _NONE:
                errors[tp] = error
            else:
                pending[tp] = offset
        return errors, pending

    async def wait(self, required: dict[TopicPartition, int],
                   timeout_ms: int) -> dict[TopicPartition, ErrorCode]:
        """Each partition's outcome: NONE once reached, its error, or REQUEST_TIMED_OUT."""
        errors, pending = self.try_complete(required)  # Kafka's tryCompleteElseWatch
        if not pending:  # (the common acks=-1 case: the ISR is this broker) no op, no future
            return errors
        return await self.park(errors, pending, timeout_ms)

    async def park(self, errors: dict[TopicPartition, ErrorCode],
                   pending: dict[TopicPartition, int],
                   timeout_ms: int) -> dict[TopicPartition, ErrorCode]:
        """Wait for the ``pending`` partitions (``try_complete``'s); ``errors`` are those known
        already. Each partition's outcome, as ``wait``."""
        op = _DelayedOperation(pending, asyncio.get_running_loop().create_future())
        op.errors = errors
        keys = list(op.pending)
        for tp in keys:
            self._watchers.setdefault(tp, set()).add(op)
        parked = time.perf_counter_ns()
        try:
            await asyncio.wait_for(asyncio.shield(op.future), max(timeout_ms, 0) / 1000)
        except TimeoutError:
            for tp in op.pending:
                op.errors[tp] = ErrorCode.REQUEST_TIMED_OUT
        finally:
            add_remote_time(time.perf_counter_ns() - parked)
            for tp in keys:
                s = self._watchers.get(tp)
                if s is not None:
                    s.discard(op)
                    if not s:
                        del self._watchers[tp]
        return op.errors
