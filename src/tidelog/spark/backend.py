"""The two places a read can come from, behind one small interface.

``PathBackend`` reads log dirs directly (storage/reader.py); ``BrokerBackend`` talks to a
broker (client/kafka_client.py). Both are built from a picklable ``BackendSpec`` so executors can
open their own (connections are opened in ``read()``, never pickled).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from tidelog.client.kafka_client import KafkaClient
from tidelog.client.kafka_client import TopicPartition as WireTP
from tidelog.records import RecordBatch
from tidelog.storage.reader import LogDirReader, PartitionReader
from tidelog.storage.reader_txn import TxnState
from tidelog.util.topic_partition import TopicPartition

from .fetch_runs import Run, fetch_runs
from .kafka_params import client_security
from .options import OptionError, Subscription
from .remote_backend import RemoteBackend, RemoteSpec

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass(frozen=True)
class BackendSpec:
    bootstrap_servers: str | None = None
    paths: tuple[str, ...] = ()
    client_id: str = "tidelog-spark"
    request_timeout_ms: int = 30000
    partition_max_bytes: int = 8 << 20  # kafka.max.partition.fetch.bytes (grown for larger batches)
    read_committed: bool = False  # kafka.isolation.level=read_committed
    security: tuple[tuple[str, str], ...] = ()  # kafka.* TLS/SASL settings (kafka_params.SECURITY_HONOURED)
    remote: RemoteSpec | None = None  # path = s3://bucket/prefix (remote_backend.py)

    def open(self) -> Backend:
        if self.remote is not None:
            tail = self._broker() if self.bootstrap_servers else None
            return RemoteBackend(self.remote, tail, read_committed=self.read_committed)
        if self.bootstrap_servers:
            return self._broker()
        return PathBackend(LogDirReader(self.paths), read_committed=self.read_committed)

    def _broker(self) -> BrokerBackend:
        assert self.bootstrap_servers
        return BrokerBackend(
            KafkaClient(self.bootstrap_servers, client_id=self.client_id,
                        request_timeout_ms=self.request_timeout_ms,
                        security=client_security(dict(self.security))),
            self.partition_max_bytes,
            isolation_level=1 if self.read_committed else 0,
        )


class Backend(Protocol):
    def topics(self) -> dict[str, list[int]]: ...
    def earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]: ...
    def latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]: ...
    def offsets_for_times(self, times: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]: ...
    def batches(self, tp: TopicPartition, start: int, end: int) -> Iterator[RecordBatch]: ...
    def close(self) -> None: ...


class PathBackend:
    def __init__(self, reader: LogDirReader, *, read_committed: bool = False) -> None:
        self.reader = reader
        self.read_committed = read_committed  # latest is the LSO, aborted data left out
        self._parts: dict[TopicPartition, PartitionReader] | None = None
        # read_committed: the scan behind latest(), reused by batches() of the same read
        self._txn: dict[TopicPartition, TxnState] = {}

    def _partitions(self) -> dict[TopicPartition, PartitionReader]:
        if self._parts is None:
            self._parts = self.reader.partitions()
        return self._parts

    def _part(self, tp: TopicPartition) -> PartitionReader:
        try:
            return self._partitions()[TopicPartition(*tp)]
        except KeyError:
            raise LookupError(f"partition {tp[0]}-{tp[1]} is not in the log dirs") from None

    def topics(self) -> dict[str, list[int]]:
        self._parts = None  # re-list: a streaming query picks up new partitions
        self._txn.clear()
        return self.reader.topics()

    def earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._part(tp).earliest_offset() for tp in tps}

    def latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if self.read_committed:
            self._txn.update({tp: self._part(tp).transaction_state() for tp in tps})
            return {tp: self._txn[tp].last_stable_offset for tp in tps}
        return {tp: self._part(tp).latest_offset() for tp in tps}

    def offsets_for_times(self, times: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        out: dict[TopicPartition, int | None] = {}
        for tp, ts in times.items():
            found = self._part(tp).offset_for_timestamp(ts)
            out[tp] = None if found is None else found[0]
            # Kafka's fetchOffsetForTimestamp: nothing at or past the isolation level's bound
            if self.read_committed and found is not None and found[0] >= self._part(tp).last_stable_offset():
                out[tp] = None
        return out

    def batches(self, tp: TopicPartition, start: int, end: int) -> Iterator[RecordBatch]:
        if self.read_committed:
            return self._part(tp).read_committed_batches(start, end, state=self._txn.get(tp))
        return self._part(tp).read_batches(start, end)

    def close(self) -> None:
        self._parts = None
        self._txn.clear()


class BrokerBackend:
    def __init__(self, client: KafkaClient, partition_max_bytes: int = 8 << 20, *, isolation_level: int = 0) -> None:
        self.client = client
        self.partition_max_bytes = partition_max_bytes
        self.isolation_level = isolation_level  # 1: latest is the last stable offset, aborted data left out

    def topics(self) -> dict[str, list[int]]:
        return self.client.list_topics()

    def earliest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        got = self.client.earliest_offsets([WireTP(*tp) for tp in tps])
        return {TopicPartition(*tp): o for tp, o in got.items()}

    def latest(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        got = self.client.list_offsets({WireTP(*tp): -1 for tp in tps}, isolation_level=self.isolation_level)
        return {TopicPartition(*tp): o for tp, (o, _ts) in got.items()}

    def offsets_for_times(self, times: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        # at the read's isolation level, as Spark's consumer asks: Kafka finds nothing at or
        # past the LSO for a read_committed lookup
        got = self.client.list_offsets({WireTP(*tp): ts for tp, ts in times.items()},
                                       isolation_level=self.isolation_level)
        return {TopicPartition(*tp): (o if o >= 0 else None) for tp, (o, _ts) in got.items()}

    def batches(self, tp: TopicPartition, start: int, end: int) -> Iterator[RecordBatch]:
        return self.client.iter_batches(WireTP(*tp), start, end, partition_max_bytes=self.partition_max_bytes,
                                        isolation_level=self.isolation_level)

    def runs(self, tp: TopicPartition, start: int, end: int) -> Iterator[Run]:
        """The data batches of [start, end) a fetch response at a time, decoded where they
        lie (no object per batch): what ``batches`` yields, control batches left out."""
        return fetch_runs(self.client, WireTP(*tp), start, end,
                          partition_max_bytes=self.partition_max_bytes,
                          isolation_level=self.isolation_level)

    def close(self) -> None:
        self.client.close()


def resolve_partitions(backend: Backend, sub: Subscription) -> list[TopicPartition]:
    """The topic-partitions a subscription reads now (sorted)."""
    topics = backend.topics()
    if sub.kind == "assign":
        missing = [
            f"{t}-{p}" for t, ps in sub.assigned.items() for p in ps if p not in topics.get(t, [])
        ]
        if missing:
            raise OptionError(f"assigned partitions do not exist: {', '.join(missing)}")
        return sorted(TopicPartition(t, p) for t, ps in sub.assigned.items() for p in ps)
    if sub.kind == "subscribe":
        chosen = [t for t in sub.topics if t in topics]
    else:
        # Spark lists topics without internal ones and keeps those the pattern is found in
        rx = re.compile(sub.pattern)
        chosen = [t for t in topics if rx.search(t) and t not in INTERNAL_TOPICS]
    return sorted(TopicPartition(t, p) for t in chosen for p in topics[t])
