"""A small synchronous Kafka client over plain sockets (kio encodes and decodes the messages).

Kept for what librdkafka (confluent-kafka) cannot do: the Spark data source fetches record
batches as raw bytes and decodes them straight into Arrow, and librdkafka only hands out
decoded messages. Tests use it for exact protocol-level requests, and ``tidelog groups
--delete-offsets`` for OffsetDelete, which confluent-kafka does not expose.
The console tools (produce, consume, topics, groups, perf) run on librdkafka, as Kafka's
tools run on Kafka's client; use librdkafka for anything new.

Speaks to any Kafka-compatible broker: each connection negotiates versions with ApiVersions
and every API is sent at the highest version both sides support within API_RANGES
(conn.py). Record batches stay bytes here; ``tidelog.records`` parses them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from tidelog.records import Record, RecordBatch, iter_batches

from .conn import (
    API_RANGES,
    API_VERSIONS,
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    RETRIABLE,
    BrokerConnection,
    KafkaClientError,
    KafkaConnectionError,
    TopicPartition,
    check,
    parse_bootstrap,
)
from .security import ClientSecurity
from .txn import AbortedFilter

__all__ = [
    "API_RANGES",
    "API_VERSIONS",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "RETRIABLE",
    "BrokerConnection",
    "ClusterMetadata",
    "FetchedPartition",
    "KafkaClient",
    "KafkaClientError",
    "KafkaConnectionError",
    "PartitionInfo",
    "TopicPartition",
    "check",
    "parse_bootstrap",
]


@dataclass(slots=True)
class PartitionInfo:
    partition: int
    leader: int
    error: int = 0


@dataclass(slots=True)
class ClusterMetadata:
    brokers: dict[int, tuple[str, int]]
    topics: dict[str, dict[int, PartitionInfo]]
    topic_errors: dict[str, int] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None


@dataclass(slots=True)
class FetchedPartition:
    error: int
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int
    records: bytes
    aborted_transactions: list[tuple[int, int]] = field(default_factory=list)  # (producer id, first offset)

    def batches(self) -> Iterator[RecordBatch]:
        """Complete batches (a partial trailing batch cut by max bytes is skipped)."""
        return iter_batches(self.records)


def grown_fetch_size(fetched: FetchedPartition, position: int, partition_max_bytes: int) -> int | None:
    """After a fetch that moved the position nowhere: None when the partition has nothing
    more to give (its high watermark reached, or an empty answer), else the doubled
    ``partition_max_bytes`` that fits the one batch larger than it."""
    if fetched.high_watermark <= position or not fetched.records:
        return None
    return partition_max_bytes * 2


class KafkaClient:
    """Metadata, offsets, fetch, produce, topics and group offsets over the wire protocol."""

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        *,
        client_id: str = "tidelog",
        request_timeout_ms: int = 30000,
        retries: int = 5,
        retry_backoff_ms: int = 100,
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        # TLS/SASL for every connection (ClientSecurity.from_properties reads Kafka's names)
        self.security = security
        self.client_id = client_id
        self.timeout_ms = request_timeout_ms
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms
        self._conns: dict[tuple[str, int], BrokerConnection] = {}
        self._metadata: ClusterMetadata | None = None

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    # -- connections ----------------------------------------------------------------------------
    def connection(self, address: tuple[str, int]) -> BrokerConnection:
        conn = self._conns.get(address)
        if conn is None:
            conn = BrokerConnection(
                *address, client_id=self.client_id, timeout_s=self.timeout_ms / 1000,
                security=self.security,
            )
            self._conns[address] = conn
        return conn

    def any_connection(self) -> BrokerConnection:
        if self._conns:
            return next(iter(self._conns.values()))
        errors = []
        for addr in self.bootstrap:
            try:
                return self.connection(addr)
            except KafkaConnectionError as e:
                errors.append(e.context)
        raise KafkaConnectionError("no bootstrap server reachable: " + "; ".join(errors))

    def node_connection(self, node_id: int) -> BrokerConnection:
        md = self._metadata or self.metadata()
        if node_id not in md.brokers:
            md = self.metadata()
        if node_id not in md.brokers:
            raise KafkaClientError(
                ErrorCode.leader_not_available, f"broker {node_id} is not in metadata"
            )
        return self.connection(md.brokers[node_id])

    def _drop(self, conn: BrokerConnection) -> None:
        self._conns.pop(conn.address, None)
        conn.close()

    def _retrying(self, what: str, fn: Any) -> Any:
        """Run ``fn()``; on a retriable error refresh metadata, back off and retry."""
        for attempt in range(self.retries + 1):
            try:
                return fn()
            except KafkaClientError as e:
                if not e.retriable or attempt == self.retries:
                    raise
                if isinstance(e, KafkaConnectionError):
                    self.close()
                time.sleep(self.retry_backoff_ms / 1000 * (attempt + 1))
                self._metadata = None
        raise AssertionError(what)  # unreachable

    # -- metadata -------------------------------------------------------------------------------
    def metadata(
        self, topics: Iterable[str] | None = None, *, auto_create: bool = False
    ) -> ClusterMetadata:
        """Metadata for ``topics`` (all topics when None); refreshes the cached broker list."""
        body: dict[str, Any] = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": auto_create,
        }
        conn = self.any_connection()
        try:
            resp = conn.request(3, body)
        except KafkaConnectionError:
            self._drop(conn)
            resp = self.any_connection().request(3, body)
        md = ClusterMetadata(
            brokers={int(b.node_id): (b.host, int(b.port)) for b in resp.brokers},
            topics={},
            controller_id=int(getattr(resp, "controller_id", -1)),
            cluster_id=getattr(resp, "cluster_id", None),
        )
        for t in resp.topics:
            if int(t.error_code) != 0:
                md.topic_errors[t.name] = int(t.error_code)
                continue
            md.topics[t.name] = {
                int(p.partition_index): PartitionInfo(
                    int(p.partition_index), int(p.leader_id), int(p.error_code)
                )
                for p in t.partitions
            }
        if topics is None or self._metadata is None:
            self._metadata = md
        else:
            self._metadata.brokers = md.brokers
            self._metadata.topics.update(md.topics)
        return md

    def list_topics(self) -> dict[str, list[int]]:
        md = self.metadata()
        return {t: sorted(ps) for t, ps in sorted(md.topics.items())}

    def partitions_for(self, topic: str) -> list[int]:
        """Partition ids of ``topic``; raises UNKNOWN_TOPIC_OR_PARTITION when it doesn't exist."""
        md = self.metadata([topic])
        if topic in md.topic_errors:
            raise KafkaClientError(md.topic_errors[topic], f"metadata for topic {topic!r}")
        return sorted(md.topics.get(topic, {}))

    def leader_for(self, tp: TopicPartition) -> int:
        md = self._metadata
        if md is None or tp.partition not in md.topics.get(tp.topic, {}):
            md = self.metadata([tp.topic])
        info = md.topics.get(tp.topic, {}).get(tp.partition)
        if info is None:
            raise KafkaClientError(ErrorCode.unknown_topic_or_partition, f"partition {tp}")
        if info.leader < 0:
            raise KafkaClientError(ErrorCode.leader_not_available, f"partition {tp}")
        return info.leader

    def _by_leader(self, tps: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        out: dict[int, list[TopicPartition]] = {}
        for tp in tps:
            out.setdefault(self.leader_for(tp), []).append(tp)
        return out

    # -- offsets --------------------------------------------------------------------------------
    def list_offsets(
        self, timestamps: Mapping[TopicPartition, int], *, isolation_level: int = 0
    ) -> dict[TopicPartition, tuple[int, int]]:
        """(offset, timestamp) per partition for a timestamp, -1 latest or -2 earliest.
        Offset -1 means no record has a timestamp >= the one asked (Kafka's answer)."""
        return self._retrying(
            "ListOffsets", lambda: self._list_offsets(timestamps, isolation_level)
        )

    def _list_offsets(
        self, timestamps: Mapping[TopicPartition, int], isolation_level: int
    ) -> dict[TopicPartition, tuple[int, int]]:
        result: dict[TopicPartition, tuple[int, int]] = {}
        for leader, tps in self._by_leader(timestamps).items():
            topics: dict[str, list[dict[str, int]]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(
                    {
                        "partition_index": tp.partition,
                        "timestamp": timestamps[tp],
                        "current_leader_epoch": -1,
                    }
                )
            body = {
                "replica_id": -1,
                "isolation_level": isolation_level,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            }
            resp = self.node_connection(leader).request(2, body)
            for t in resp.topics:
                for p in t.partitions:
                    check(p.error_code, f"ListOffsets {t.name}-{p.partition_index}")
                    result[TopicPartition(t.name, int(p.partition_index))] = (
                        int(p.offset),
                        int(p.timestamp),
                    )
        return result

    def earliest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {
            tp: o
            for tp, (o, _) in self.list_offsets(dict.fromkeys(tps, EARLIEST_TIMESTAMP)).items()
        }

    def latest_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {
            tp: o for tp, (o, _) in self.list_offsets(dict.fromkeys(tps, LATEST_TIMESTAMP)).items()
        }

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        """First offset with timestamp >= the given one, None when there is none."""
        return {tp: (o if o >= 0 else None) for tp, (o, _) in self.list_offsets(timestamps).items()}

    # -- fetch ----------------------------------------------------------------------------------
    def fetch(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        max_wait_ms: int = 100,
        min_bytes: int = 1,
        max_bytes: int = 64 << 20,
        partition_max_bytes: int = 8 << 20,
        isolation_level: int = 0,
    ) -> dict[TopicPartition, FetchedPartition]:
        """One Fetch per leader; the raw record-batch bytes of each partition are returned."""
        out: dict[TopicPartition, FetchedPartition] = {}
        for leader, tps in self._by_leader(offsets).items():
            topics: dict[str, list[dict[str, int]]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(
                    {
                        "partition": tp.partition,
                        "fetch_offset": offsets[tp],
                        "partition_max_bytes": partition_max_bytes,
                        "log_start_offset": -1,
                        "current_leader_epoch": -1,
                        "last_fetched_epoch": -1,
                    }
                )
            body = {
                "replica_id": -1,
                "max_wait": max_wait_ms,
                "min_bytes": min_bytes,
                "max_bytes": max_bytes,
                "isolation_level": isolation_level,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
                "forgotten_topics_data": [],
            }
            resp = self.node_connection(leader).request(1, body)
            check(getattr(resp, "error_code", 0), "Fetch")
            for t in resp.responses:
                for p in t.partitions:
                    out[TopicPartition(t.topic, int(p.partition_index))] = FetchedPartition(
                        int(p.error_code),
                        int(p.high_watermark),
                        int(getattr(p, "log_start_offset", -1)),
                        int(getattr(p, "last_stable_offset", -1)),
                        bytes(p.records or b""),
                        [(int(a.producer_id), int(a.first_offset))
                         for a in (getattr(p, "aborted_transactions", None) or ())],
                    )
        return out

    def fetch_partition(
        self, tp: TopicPartition, offset: int, *, partition_max_bytes: int = 8 << 20,
        isolation_level: int = 0,
    ) -> FetchedPartition:
        """One partition's Fetch at ``offset`` (retried on retriable errors), its error
        raised: the step of a read loop (iter_batches; the Spark source's fetch runs)."""
        fetched = self._retrying(
            "Fetch",
            lambda: self.fetch(
                {tp: offset}, partition_max_bytes=partition_max_bytes,
                isolation_level=isolation_level,
            ),
        )[tp]
        check(fetched.error, f"Fetch {tp} at offset {offset}")
        return fetched

    def iter_batches(
        self, tp: TopicPartition, start: int, end: int, *, partition_max_bytes: int = 8 << 20,
        isolation_level: int = 0,
    ) -> Iterator[RecordBatch]:
        """Batches covering [start, end) of one partition (the first may begin below start).
        With ``isolation_level=1`` (read_committed) the fetch stops at the last stable offset
        and the batches of aborted transactions are left out (control batches stay).

        Stops early (quietly) when the partition's high watermark is below ``end``."""
        position = start
        aborted = AbortedFilter()
        while position < end:
            fetched = self.fetch_partition(tp, position, partition_max_bytes=partition_max_bytes,
                                           isolation_level=isolation_level)
            aborted.add(fetched.aborted_transactions)
            progressed = False
            for batch in fetched.batches():
                if batch.last_offset < position:
                    continue
                if batch.base_offset >= end:
                    return
                if isolation_level and aborted.is_aborted(batch):
                    position = batch.next_offset
                    progressed = True
                    continue
                yield batch
                position = batch.next_offset
                progressed = True
            if not progressed:
                grown = grown_fetch_size(fetched, position, partition_max_bytes)
                if grown is None:
                    return
                partition_max_bytes = grown

    def iter_records(
        self, tp: TopicPartition, start: int, end: int
    ) -> Iterator[tuple[RecordBatch, Record]]:
        """Data records (control batches skipped) with offsets in [start, end)."""
        for batch in self.iter_batches(tp, start, end):
            if batch.is_control:
                continue
            for rec in batch.iter_records():
                if start <= rec.offset < end:
                    yield batch, rec

    # -- produce (raw) --------------------------------------------------------------------------
    def produce(
        self,
        leader: int,
        batches: Mapping[TopicPartition, bytes],
        *,
        acks: int = -1,
        timeout_ms: int = 30000,
    ) -> dict[TopicPartition, tuple[int, int]] | None:
        """Send one Produce with one record batch per partition to ``leader``.

        Returns (base offset, log append time) per partition; None for acks=0. Raises
        KafkaClientError for the first partition error."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, records in batches.items():
            topics.setdefault(tp.topic, []).append({"index": tp.partition, "records": records})
        body = {
            "transactional_id": None,
            "acks": acks,
            "timeout": timeout_ms,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()],
        }
        conn = self.node_connection(leader)
        if acks == 0:
            conn.call(0, conn.version(0), body, expect_response=False)
            return None
        resp = conn.request(0, body)
        out: dict[TopicPartition, tuple[int, int]] = {}
        for t in resp.responses:
            for p in t.partition_responses:
                check(
                    p.error_code, f"Produce {t.name}-{p.index}", getattr(p, "error_message", None)
                )
                lat = getattr(p, "log_append_time", None)
                out[TopicPartition(t.name, int(p.index))] = (int(p.base_offset), _ms(lat))
        return out

    def init_producer_id(self, transaction_timeout_ms: int = 60000) -> tuple[int, int]:
        """(producer id, epoch) for an idempotent (non-transactional) producer."""

        def go() -> tuple[int, int]:
            resp = self.any_connection().request(
                22,
                {
                    "transactional_id": None,
                    "transaction_timeout": transaction_timeout_ms,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
            )
            check(resp.error_code, "InitProducerId")
            return int(resp.producer_id), int(resp.producer_epoch)

        return self._retrying("InitProducerId", go)

    # -- topics ---------------------------------------------------------------------------------
    def create_topics(
        self,
        topics: Mapping[str, int],
        *,
        replication_factor: int = 1,
        configs: Mapping[str, Mapping[str, str]] | None = None,
        timeout_ms: int = 30000,
        validate_only: bool = False,
    ) -> None:
        """Create ``{name: num_partitions}``; TOPIC_ALREADY_EXISTS and other errors raise."""
        configs = configs or {}
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": n,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.get(name, {}).items()],
                }
                for name, n in topics.items()
            ],
            "timeout": timeout_ms,
            "validate_only": validate_only,
        }
        resp = self._controller().request(19, body)
        for t in resp.topics:
            check(t.error_code, f"CreateTopics {t.name}", getattr(t, "error_message", None))
        self._metadata = None

    def delete_topics(self, topics: Iterable[str], *, timeout_ms: int = 30000) -> None:
        resp = self._controller().request(20, {"topic_names": list(topics), "timeout": timeout_ms})
        for t in resp.responses:
            check(t.error_code, f"DeleteTopics {t.name}", getattr(t, "error_message", None))
        self._metadata = None

    def _controller(self) -> BrokerConnection:
        md = self.metadata([])
        if md.controller_id in md.brokers:
            return self.connection(md.brokers[md.controller_id])
        return self.any_connection()

    # -- consumer group offsets -----------------------------------------------------------------
    def find_coordinator(self, group_id: str) -> BrokerConnection:
        def go() -> BrokerConnection:
            resp = self.any_connection().request(10, {"key": group_id, "key_type": 0})
            check(
                resp.error_code,
                f"FindCoordinator {group_id!r}",
                getattr(resp, "error_message", None),
            )
            return self.connection((resp.host, int(resp.port)))

        return self._retrying("FindCoordinator", go)

    def commit_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int], metadata: str = ""
    ) -> None:
        """Commit offsets for a group without membership (generation -1, like a standalone
        consumer's commitSync with manual assignment)."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, off in offsets.items():
            topics.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": off,
                    "committed_metadata": metadata,
                    "committed_leader_epoch": -1,
                }
            )
        body = {
            "group_id": group_id,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

        def go() -> None:
            resp = self.find_coordinator(group_id).request(8, body)
            for t in resp.topics:
                for p in t.partitions:
                    check(p.error_code, f"OffsetCommit {group_id!r} {t.name}-{p.partition_index}")

        self._retrying("OffsetCommit", go)

    def committed_offsets(
        self, group_id: str, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Committed offset per partition (-1 when the group has none)."""
        topics: dict[str, list[int]] = {}
        for tp in tps:
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "group_id": group_id,
            "require_stable": False,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
        }

        def go() -> dict[TopicPartition, int]:
            resp = self.find_coordinator(group_id).request(9, body)
            check(getattr(resp, "error_code", 0), f"OffsetFetch {group_id!r}")
            out = {}
            for t in resp.topics:
                for p in t.partitions:
                    check(p.error_code, f"OffsetFetch {group_id!r} {t.name}-{p.partition_index}")
                    out[TopicPartition(t.name, int(p.partition_index))] = int(p.committed_offset)
            return out

        return self._retrying("OffsetFetch", go)


def _ms(value: Any) -> int:
    """kio decodes LogAppendTime as a datetime (or None for -1)."""
    if value is None:
        return -1
    if isinstance(value, int):
        return value
    return int(value.timestamp() * 1000)
