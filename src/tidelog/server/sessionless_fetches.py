"""A consumer's sessionless Fetch of many partitions (librdkafka's: it names every partition
it reads in every Fetch), read without Python work per partition that has nothing new.

The request arrives in columns (protocol/fetch_request.py). For each partition the
leader's ``Partition.quiet_answer`` holds the bytes a read at the high watermark is answered
with (no records, no error), keyed by the log's state stamp, which moves with everything
that could change that answer (HW, log start, transactions, truncation, closing); a
leadership change or a new log drops it. A partition read at that HW, at the leader epoch
the request names (or none), under the same stamp, is answered with those bytes as they
are; every other partition (records to send, an error, a leadership question, another
version) goes through the per-partition read of ``ReplicaFetches`` in request order, with
the request's byte budget, as ``fetch_messages`` reads it. Short of ``min_bytes`` the Fetch
parks in the purgatory under one key per topic, then reads everything again (Kafka's
DelayedFetch re-reads every partition on completion).

Partitions are found through a table per topic (partition index -> Partition), rebuilt
when the hosted partitions or the log manager's logs changed."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from tidelog._native import core
from tidelog.protocol.fast import EncodedPartitions, FetchPartitionData
from tidelog.protocol.fetch_request import FetchTopicColumns
from tidelog.storage.manager import LogManager
from tidelog.util.topic_partition import TopicPartition

from .cluster.fetch_params import FetchParams
from .cluster.partition import Partition
from .fetch_session import CachedPartition, FetchKey
from .replica_fetches import YIELD_EVERY, ReplicaFetches, _FetchRequest
from .sendfile import close_chunks


@dataclass(slots=True)
class TopicRead:
    """One topic's answer: each partition's quiet bytes, or None where it was ``read``
    (partition index in the topic -> its data, in request order)."""

    quiet: list[bytes | None]
    read: dict[int, FetchPartitionData] = field(default_factory=dict)

    def encoded(self) -> EncodedPartitions:
        """The partitions for ``encode_fetch_response``: quiet runs joined, reads between."""
        quiet = self.quiet
        if not self.read:
            return EncodedPartitions(len(quiet), [b"".join(quiet)])  # type: ignore[arg-type]
        pieces: list[bytes | FetchPartitionData] = []
        start = 0
        for i, data in self.read.items():
            if i > start:
                pieces.append(b"".join(quiet[start:i]))  # type: ignore[arg-type]
            pieces.append(data)
            start = i + 1
        if start < len(quiet):
            pieces.append(b"".join(quiet[start:]))  # type: ignore[arg-type]
        return EncodedPartitions(len(quiet), pieces)


@dataclass(slots=True)
class SessionlessTopic:
    """One topic of the request as the handler passes it: its id (zero by name) and its
    name here ("" for an unknown id), the columns, and the handler's verdict on the topic
    (authorization, topic id: non-zero answers each partition with that error)."""

    topic_id: uuid.UUID
    name: str
    columns: FetchTopicColumns
    error_code: int = 0


class SessionlessFetches(ReplicaFetches):
    logs: LogManager
    partitions_made: int
    partitions_dropped: int
    _quiet_tables: dict[str, list[Partition | None]]
    _quiet_hosted: dict[str, list[int]]
    _quiet_key: tuple[int, int, int]

    async def fetch_sessionless(self, params: FetchParams, topics: list[SessionlessTopic],
                                version: int) -> list[TopicRead]:
        """Each topic's answer, in request order (see the module docstring). The caller
        releases the records read (``sendfile.close_chunks``)."""
        r = _FetchRequest(params, _no_precheck, None, "")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + params.max_wait_ms / 1000
        read, total, error = await self._read_sessionless(r, topics, version)
        while not r.remote:
            remaining = int((deadline - loop.time()) * 1000)
            if total >= params.min_bytes or error or remaining <= 0 or not topics:
                return read
            release(read)  # parked: what it held is read again when woken
            fired = await self.delayed_fetch.wait_topics(
                [(t.name, frozenset(t.columns.partition_ids)) for t in topics], remaining)
            read, total, error = await self._read_sessionless(r, topics, version)
            if not fired:  # timed out: answered whatever it found
                break
        if r.remote:
            await self._fetch_remote(r)
        return read

    async def _read_sessionless(self, r: _FetchRequest, topics: list[SessionlessTopic],
                                version: int) -> tuple[list[TopicRead], int, bool]:
        out = [TopicRead(self._quiet_items(t, version)) for t in topics]
        total = reads = 0
        error = False
        budget = r.params.max_bytes
        try:
            for t, answer in zip(topics, out, strict=True):
                if None not in answer.quiet:
                    continue
                for i, q in enumerate(answer.quiet):
                    if q is not None:
                        continue
                    reads += 1
                    if reads % YIELD_EVERY == 0:
                        await asyncio.sleep(0)
                    data = answer.read[i] = self._read_slow(r, t, i, budget - total, total == 0)
                    if data.records:
                        total += len(data.records)
                    if data.error_code or data.preferred_read_replica >= 0:
                        error = True
        except BaseException:
            release(out)
            raise
        return out, total, error

    def _quiet_items(self, t: SessionlessTopic, version: int) -> list[bytes | None]:
        """The topic's quiet partitions' bytes; None for each of the others (read later)."""
        cols = t.columns
        ids = cols.partition_ids
        if t.error_code or not t.name or not ids or min(ids) < 0:
            return [None] * len(ids)  # (a negative index: the read answers it)
        table = self._quiet_table(t.name)
        items, stale = _quiet_scan(table, ids, cols.epochs, cols.offsets, version)
        for i in stale:  # changed since last asked: ask again
            part = table[ids[i]]
            assert part is not None
            q = part.quiet_answer(version)
            if q is not None and q.high_watermark == cols.offsets[i] and (
                    cols.epochs[i] in (-1, q.leader_epoch)):
                items[i] = q.entry
        return items

    def _read_slow(self, r: _FetchRequest, t: SessionlessTopic, i: int, budget: int,
                   min_one: bool) -> FetchPartitionData:
        cols = t.columns
        key = FetchKey(t.topic_id, t.name, cols.partition_ids[i])
        cp = CachedPartition(cols.offsets[i], cols.max_bytes[i],
                             current_leader_epoch=cols.epochs[i])
        if t.error_code:
            return FetchPartitionData(key.partition, t.error_code, records=b"")
        return self._read_partition(r, key, cp, max(0, min(cp.max_bytes, budget)), min_one)

    def _quiet_table(self, topic: str) -> list[Partition | None]:
        """Partition index -> the hosted Partition (its log current), per topic; rebuilt
        when a partition was made or dropped, or the log manager stored or removed a log.
        The hosted partitions are grouped by topic in one pass; a topic not hosted here (a
        name a client made up) is kept nowhere."""
        key = (self.partitions_made, self.partitions_dropped, self.logs.logs_version)
        if self._quiet_key != key:
            hosted: dict[str, list[int]] = {}
            for tp in list(self.partitions):
                hosted.setdefault(tp.topic, []).append(tp.partition)
            self._quiet_tables, self._quiet_hosted, self._quiet_key = {}, hosted, key
        table = self._quiet_tables.get(topic)
        if table is None:
            parts = self._quiet_hosted.get(topic)
            if not parts:
                return []
            table = [None] * (max(parts) + 1)
            for p in parts:
                try:
                    table[p] = self.get_partition(TopicPartition(topic, p))
                except Exception:  # its dir offline: the per-partition read answers it
                    table[p] = None
            self._quiet_tables[topic] = table
        return table


def quiet_scan_py(table: list[Partition | None], ids: tuple[int, ...],
                  epochs: tuple[int, ...], offsets: tuple[int, ...], version: int
                  ) -> tuple[list[bytes | None], list[int]]:
    """Each partition's quiet bytes when its ``Partition.quiet`` answers (its stamp current,
    this version) a read at its HW at its leader epoch (or none), else None; and the indexes
    whose ``quiet`` is missing or stale (to ask ``quiet_answer``). Partition ids are >= 0."""
    items: list[bytes | None] = []
    stale: list[int] = []
    append = items.append
    size = len(table)
    for i, (p, epoch, offset) in enumerate(zip(ids, epochs, offsets, strict=True)):
        part = table[p] if p < size else None
        if part is None:
            append(None)
            continue
        q = part.quiet
        if q is None or q[3] != version or q[0] != part.log.state_stamp:
            append(None)
            stale.append(i)
            continue
        append(q[4] if q[1] == offset and (epoch == -1 or epoch == q[2]) else None)
    return items, stale


_quiet_scan = core.quiet_scan if core is not None else quiet_scan_py


def _no_precheck(key: FetchKey) -> int:
    return 0  # the handler decided per topic (SessionlessTopic.error_code)


def release(read: list[TopicRead]) -> None:
    """Let go of the records read (file chunks)."""
    close_chunks(data.records for answer in read for data in answer.read.values())
