"""A consumer's sessionless Fetch of many partitions (librdkafka's: it names every partition
it reads in every Fetch), read without Python work per partition that has nothing new.

The request arrives as each topic's partition entries, kept as bytes
(protocol/fetch_request.py). For each partition the leader's ``Partition.quiet_answer``
gives the bytes a read at the high watermark is answered with (no records, no error), under
the log's state stamp, which moves with everything that could change that answer (HW, log
start, transactions, truncation, closing); the topic's ``QuietTable`` keeps them with that
stamp beside the stamp the log has now, which the log writes there as it moves
(server/quiet_table.py); a leadership change or a new log starts the tables again. A
partition read at that HW, at the leader epoch the request names (or none), under the same
stamp, is answered with those bytes as they are, joined with its quiet neighbours by the C
scan; every other partition (records to send, an error, a leadership question, another
version) goes through the per-partition read of ``ReplicaFetches`` in request order, with
the request's byte budget, as ``fetch_messages`` reads it; one that moved on from the HW its
last quiet answer was read at, and is read from there, is read from the position that
answer noted for the batch at that HW (``fetch_at_position``: one ``pread``, no
search), when the rest is as simple. Short of ``min_bytes`` the Fetch
parks in the purgatory under one key per topic, then reads everything again (Kafka's
DelayedFetch re-reads every partition on completion).

Partitions are found through a table per topic (partition index -> Partition), rebuilt
when the hosted partitions or the log manager's logs changed."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from tidelog.protocol.fast import EncodedPartitions, FetchPartitionData
from tidelog.protocol.fetch_request import FetchTopicColumns
from tidelog.storage.log_read import FetchIsolation
from tidelog.storage.manager import LogManager
from tidelog.util.topic_partition import TopicPartition

from .cluster.fetch_params import FetchParams
from .cluster.partition import Partition
from .cluster.partition_state import NO_EPOCH
from .cluster.quiet_answer import QuietAnswer
from .fetch_session import CachedPartition, FetchKey
from .quiet_table import QuietTable, quiet_runs, waited_partitions
from .replica_fetches import YIELD_EVERY, ReplicaFetches, _FetchRequest
from .sendfile import SENDFILE_MIN_BYTES, close_chunks


@dataclass(slots=True)
class TopicRead:
    """One topic's answer for its ``n`` partitions in request order: the quiet ones' bytes
    joined in ``runs`` around the ``slow`` ones (indexes, ``len(runs) == len(slow) + 1``),
    each of those ``read`` (its data) or found quiet after all when asked again (``kept``)."""

    n: int
    runs: list[bytes]
    slow: list[int]
    read: dict[int, FetchPartitionData] = field(default_factory=dict)
    kept: dict[int, bytes] = field(default_factory=dict)
    parts: list[Partition | None] = field(default_factory=list)  # the topic's, by index
    # a moved partition read from where its last quiet answer said the batch at its HW
    # would start, when the consumer reads on from there: request index -> (that answer,
    # the one it gave when asked again in this Fetch)
    starts: dict[int, tuple[QuietAnswer, QuietAnswer]] = field(default_factory=dict)

    def encoded(self) -> EncodedPartitions:
        """The partitions for ``encode_fetch_response``: quiet runs, the others between."""
        runs, read, kept = self.runs, self.read, self.kept
        pieces: list[bytes | FetchPartitionData] = [runs[0]] if runs[0] else []
        for k, i in enumerate(self.slow, 1):
            data = read.get(i)
            pieces.append(kept[i] if data is None else data)
            if runs[k]:
                pieces.append(runs[k])
        return EncodedPartitions(self.n, pieces)


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
    _quiet_tables: dict[str, QuietTable]
    _quiet_hosted: dict[str, list[int]]
    _quiet_key: tuple[int, int, int, int]

    async def fetch_sessionless(self, params: FetchParams, topics: list[SessionlessTopic],
                                version: int) -> list[TopicRead]:
        """Each topic's answer, in request order (see the module docstring). The caller
        releases the records read (``sendfile.close_chunks``)."""
        r = _FetchRequest(params, _no_precheck, None, "")
        read, total, error = await self._read_sessionless(r, topics, version)
        deadline = None  # Kafka's DelayedFetch: made after the first read, when it parks
        while topics and not (r.remote or total >= params.min_bytes or error):
            loop = asyncio.get_running_loop()
            if deadline is None:
                deadline = loop.time() + params.max_wait_ms / 1000
            remaining = int((deadline - loop.time()) * 1000)
            if remaining <= 0:
                break
            release(read)  # parked: what it held is read again when woken
            fired = await self.delayed_fetch.wait_topics(
                [(t.name, waited_partitions(t.columns)) for t in topics], remaining)
            read, total, error = await self._read_sessionless(r, topics, version)
            if not fired:  # timed out: answered whatever it found
                break
        if r.remote:
            await self._fetch_remote(r)
        return read

    async def _read_sessionless(self, r: _FetchRequest, topics: list[SessionlessTopic],
                                version: int) -> tuple[list[TopicRead], int, bool]:
        out = [self._scan(t, version) for t in topics]
        total = reads = 0
        error = False
        budget = r.params.max_bytes
        try:
            for t, answer in zip(topics, out, strict=True):
                kept, read = answer.kept, answer.read
                for i in answer.slow:
                    if i in kept:
                        continue
                    reads += 1
                    if reads % YIELD_EVERY == 0:
                        await asyncio.sleep(0)
                        if self._quiet_key != self._tables_key():  # moved meanwhile
                            for a in out:
                                a.parts, a.starts = [], {}
                    data = read[i] = self._read_slow(r, t, answer, i, budget - total,
                                                     total == 0)
                    if data.records:
                        total += len(data.records)
                    if data.error_code or data.preferred_read_replica >= 0:
                        error = True
        except BaseException:
            release(out)
            raise
        return out, total, error

    def _scan(self, t: SessionlessTopic, version: int) -> TopicRead:
        """The topic's quiet partitions in runs; the others to read (server/quiet_table.py).
        Those whose kept answer moved are asked again first: quiet after all, or read."""
        cols = t.columns
        n = cols.n
        if t.error_code or not t.name or not n:
            return TopicRead(n, [b""] * (n + 1), list(range(n)))
        table = self._quiet_table(t.name)
        layout = cols.layout
        runs, slow, stale = quiet_runs(table.slots, cols.raw, layout.size, layout.epoch_at,
                                       layout.offset_at, version)
        out = TopicRead(n, runs, slow, parts=table.parts)
        for i in stale:  # changed since last asked: ask again
            p, epoch, offset, _ = cols.entry(i)
            before = table.answers[p]
            q = table.answer(p, version)
            if q is None:
                continue
            if q.high_watermark == offset and epoch in (-1, q.leader_epoch):
                out.kept[i] = q.entry
            elif before is not None and before.high_watermark == offset and \
                    before.position >= 0:
                out.starts[i] = (before, q)
        return out

    def _read_slow(self, r: _FetchRequest, t: SessionlessTopic, answer: TopicRead,
                   i: int, budget: int, min_one: bool) -> FetchPartitionData:
        """The partition at request index ``i`` read as ``_read_partition`` reads it. One
        hosted here (``answer.parts``, the topic's current QuietTable: partition index ->
        Partition) is read straight from its Partition: a consumer's sessionless Fetch has
        no precheck per partition, no preferred replica and no replication quota to ask;
        read from where its batch starts when that is known (``answer.starts``,
        ``fetch_at_position``)."""
        p, epoch, offset, max_bytes = t.columns.entry(i)
        if t.error_code:
            return FetchPartitionData(p, t.error_code, records=b"")
        limit = max(0, min(max_bytes, budget))
        parts = answer.parts
        part = parts[p] if 0 <= p < len(parts) else None
        if part is None or part.logs_version != self.logs.logs_version:
            # not hosted, its dir offline, or a log stored or removed since: the long way
            return self._read_partition(r, FetchKey(t.topic_id, t.name, p),
                                        CachedPartition(offset, max_bytes,
                                                        current_leader_epoch=epoch),
                                        limit, min_one)
        out = FetchPartitionData(p)
        start = answer.starts.get(i)
        isolation = r.params.isolation
        if start is not None and (isolation is _TO_HW or isolation is _COMMITTED) and \
                fetch_at_position(part, offset, epoch, out, limit, *start):
            return out
        cp = CachedPartition(offset, max_bytes, current_leader_epoch=epoch)
        try:
            part.fetch_records(r.params, cp, out, limit, min_one)
        except Exception as exc:
            self._read_failed(r, part.topic_partition, cp, limit, min_one, out, exc)
        return out

    def _tables_key(self) -> tuple[int, int, int, int]:
        """What the QuietTables were made under (``_quiet_table``)."""
        return (self.partitions_made, self.partitions_dropped, self.logs.logs_version,
                Partition.quiet_drops)

    def _quiet_table(self, topic: str) -> QuietTable:
        """The topic's QuietTable (partition index -> the hosted Partition, its log current);
        made again when a partition was made or dropped, the log manager stored or removed
        a log, or a kept answer was dropped (``Partition.quiet_drops``). The hosted
        partitions are grouped by topic in one pass; a topic not hosted here (a name a
        client made up) is kept nowhere."""
        key = self._tables_key()
        if self._quiet_key != key:
            hosted: dict[str, list[int]] = {}
            for tp in list(self.partitions):
                hosted.setdefault(tp.topic, []).append(tp.partition)
            self._quiet_tables, self._quiet_hosted, self._quiet_key = {}, hosted, key
        table = self._quiet_tables.get(topic)
        if table is None:
            parts = self._quiet_hosted.get(topic)
            if not parts:
                return _NOWHERE
            found: list[Partition | None] = [None] * (max(parts) + 1)
            for p in parts:
                try:
                    found[p] = self.get_partition(TopicPartition(topic, p))
                except Exception:  # its dir offline: the per-partition read answers it
                    found[p] = None
            table = self._quiet_tables[topic] = QuietTable(found)
        return table


_TO_HW = FetchIsolation.HIGH_WATERMARK  # bound once: 3.11's EnumType.__getattr__
_COMMITTED = FetchIsolation.TXN_COMMITTED
_NOWHERE = QuietTable([])  # a topic not hosted here: every partition read (and answered so)


def fetch_at_position(part: Partition, fetch_offset: int, current_leader_epoch: int,
                      out: FetchPartitionData, max_bytes: int, start: QuietAnswer,
                      now: QuietAnswer) -> bool:
    """``Partition.fetch_records`` for a consumer reading to the high watermark (or the
    LSO: read_committed, librdkafka's default) from where a ``quiet_answer`` (``start``)
    said the batch at ``fetch_offset`` starts, when that is all it takes: this broker leads
    at the epoch named (or none), and the log reads it in one piece
    (``Log.read_at_position``: small, in the active segment, the batch found where it was
    said to be, no aborted transaction listed there). ``now`` is the quiet answer the
    partition gave in this Fetch: while the log's state stamp is still the one it was read
    under (checked after the read), its offsets are the log's (the LSO is the HW there,
    so both isolations read the same bytes) and nothing else need be asked. False, with
    ``out``'s records untouched, for ``fetch_records`` to answer."""
    epoch = current_leader_epoch
    if not ((epoch == NO_EPOCH or epoch == part.leader_epoch)
            and part.leader_id == part.local_broker_id):
        return False
    lg = part.log
    data = lg.read_at_position(fetch_offset, max_bytes, start.segment_base, start.position,
                               SENDFILE_MIN_BYTES - 1)
    if data is None or lg.state_stamp != now.stamp:
        return False
    out.high_watermark = out.last_stable_offset = now.high_watermark
    out.log_start_offset = now.log_start_offset
    out.records = data
    return True


def _no_precheck(key: FetchKey) -> int:
    return 0  # the handler decided per topic (SessionlessTopic.error_code)


def release(read: list[TopicRead]) -> None:
    """Let go of the records read (file chunks)."""
    close_chunks(data.records for answer in read for data in answer.read.values())
