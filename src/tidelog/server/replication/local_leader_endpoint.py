"""A leader whose log is in this process: Kafka's LocalLeaderEndPoint (which serves the
alter-log-dirs fetcher). Here it serves any ``Log`` as a leader would over the network: reads
up to the log end offset, the diverging-epoch check of Fetch v12+ (Kafka's
``Partition.fetchRecords`` / ``UnifiedLog.endOffsetForEpoch``), OffsetForLeaderEpoch and
ListOffsets. It lets the fetcher's truncation and out-of-range rules run between two real
logs without a network, and moves a log between directories of one broker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from tidelog.protocol.errors import ErrorCode
from tidelog.storage.log_read import FetchIsolation
from tidelog.util.topic_partition import TopicPartition

from .leader_endpoint import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochData,
    EpochEndOffset,
    FetchedPartition,
    FetchPartition,
    LeaderOffsetError,
)

if TYPE_CHECKING:
    from tidelog.storage.log import Log

POLL_INTERVAL_S = 0.002


class LocalLeaderEndPoint:
    def __init__(
        self,
        broker_id: int,
        logs: Callable[[TopicPartition], Log | None],
        leader_epoch: Callable[[TopicPartition], int],
        *,
        max_wait_ms: int = 500,
    ) -> None:
        self._broker_id = broker_id
        self._max_wait_ms = max_wait_ms
        self._logs = logs
        self._leader_epoch = leader_epoch
        self.fetches = 0

    @property
    def broker_id(self) -> int:
        return self._broker_id

    async def close(self) -> None:
        return None

    def _epoch_error(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        """Kafka's Partition.checkCurrentLeaderEpoch."""
        ours = self._leader_epoch(tp)
        if current_leader_epoch < 0 or current_leader_epoch == ours:
            return int(ErrorCode.NONE)
        if current_leader_epoch < ours:
            return int(ErrorCode.FENCED_LEADER_EPOCH)
        return int(ErrorCode.UNKNOWN_LEADER_EPOCH)

    async def fetch(
        self, partitions: Mapping[TopicPartition, FetchPartition]
    ) -> dict[TopicPartition, FetchedPartition]:
        """Answers at once when any partition has records or an error, else long-polls up
        to ``max_wait_ms`` (by re-reading: a local log has no purgatory to wake us); no
        partitions: nothing to ask (no session to forget from)."""
        if not partitions:
            return {}
        self.fetches += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._max_wait_ms / 1000
        while True:
            out = {tp: self._fetch_one(tp, p) for tp, p in partitions.items()}
            ready = any(d.records or d.error or d.diverging_epoch for d in out.values())
            if ready or loop.time() >= deadline:
                return out
            await asyncio.sleep(POLL_INTERVAL_S)

    def _fetch_one(self, tp: TopicPartition, p: FetchPartition) -> FetchedPartition:
        log = self._logs(tp)
        if log is None:
            return FetchedPartition(int(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        error = self._epoch_error(tp, p.current_leader_epoch)
        if error:
            return FetchedPartition(error)
        hw, start = log.high_watermark, log.log_start_offset
        if p.last_fetched_epoch is not None and p.last_fetched_epoch >= 0:
            epoch, end = log.end_offset_for_epoch(p.last_fetched_epoch)
            if epoch == UNDEFINED_EPOCH or end == UNDEFINED_EPOCH_OFFSET:
                return FetchedPartition(int(ErrorCode.OFFSET_OUT_OF_RANGE), hw, start)
            if epoch < p.last_fetched_epoch or end < p.fetch_offset:
                return FetchedPartition(
                    int(ErrorCode.NONE), hw, start, b"", EpochEndOffset(0, epoch, end)
                )
        if not start <= p.fetch_offset <= log.log_end_offset:
            return FetchedPartition(int(ErrorCode.OFFSET_OUT_OF_RANGE), hw, start)
        data = log.read(p.fetch_offset, p.max_bytes, FetchIsolation.LOG_END)
        return FetchedPartition(int(ErrorCode.NONE), hw, start, data.records.read())

    async def fetch_epoch_end_offsets(
        self, partitions: Mapping[TopicPartition, EpochData]
    ) -> dict[TopicPartition, EpochEndOffset]:
        out = {}
        for tp, e in partitions.items():
            log = self._logs(tp)
            if log is None:
                out[tp] = EpochEndOffset(
                    int(ErrorCode.NOT_LEADER_OR_FOLLOWER), UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
                )
                continue
            error = self._epoch_error(tp, e.current_leader_epoch)
            if error:
                out[tp] = EpochEndOffset(error, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
                continue
            epoch, end = log.end_offset_for_epoch(e.leader_epoch)
            out[tp] = EpochEndOffset(int(ErrorCode.NONE), epoch, end)
        return out

    async def fetch_earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        return self._log_for_offsets(tp, current_leader_epoch).log_start_offset

    async def fetch_latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        return self._log_for_offsets(tp, current_leader_epoch).log_end_offset

    def _log_for_offsets(self, tp: TopicPartition, current_leader_epoch: int) -> Log:
        log = self._logs(tp)
        if log is None:
            raise LeaderOffsetError(tp, int(ErrorCode.NOT_LEADER_OR_FOLLOWER))
        error = self._epoch_error(tp, current_leader_epoch)
        if error:
            raise LeaderOffsetError(tp, error)
        return log
