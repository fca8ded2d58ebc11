"""The leader as a follower's fetcher sees it: Kafka's LeaderEndPoint and RemoteLeaderEndPoint
(core/src/main/scala/kafka/server/RemoteLeaderEndPoint.scala).

``RemoteLeaderEndPoint`` speaks to the leader broker over one ``tidelog.client.aio``
connection on the inter-broker listener, made on first use and again after a failure:

* ``fetch``: Fetch v12-15 with this broker's id as ``replica_id`` (v15 moves it into
  ``ReplicaState`` with the broker epoch, KIP-903), ``replica.fetch.wait.max.ms``,
  ``replica.fetch.min.bytes``, ``replica.fetch.response.max.bytes``, per partition
  ``replica.fetch.max.bytes``, ``current_leader_epoch`` and ``last_fetched_epoch`` (the
  leader answers ``diverging_epoch`` when our log forked from its own). Topic ids from v13;
  a partition without one makes the request v12, as Kafka does. Incremental fetch sessions
  (KIP-227) through a :class:`FetchSessionHandler` per leader (``fetch_session_handler.py``):
  after the first full Fetch, a request lists only the partitions whose request data changed
  and the leader answers only the partitions with news; ``fetch`` still answers in terms of
  the partitions it was given (one not in the answer is unchanged);
* ``fetch_epoch_end_offsets``: OffsetForLeaderEpoch v3-4 with ``replica_id``;
* ``fetch_earliest_offset`` / ``fetch_latest_offset``: ListOffsets with ``replica_id``.

Records stay the bytes the leader sent.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tidelog.client.aio import AsyncBrokerConnection
from tidelog.client.conn import KafkaClientError
from tidelog.client.security import ClientSecurity
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import ms
from tidelog.util.topic_partition import TopicPartition

from .fetch_session_handler import FetchRequestData, FetchSessionHandler

log = logging.getLogger(__name__)

FETCH_KEY = 1
LIST_OFFSETS_KEY = 2
OFFSET_FOR_LEADER_EPOCH_KEY = 23
EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)


@dataclass(frozen=True, slots=True)
class FetchPartition:
    """One partition of a follower's Fetch (Kafka's FetchRequest.PartitionData)."""

    topic_id: uuid.UUID | None
    fetch_offset: int
    log_start_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int | None


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """The leader's answer for one partition (Kafka's FetchResponseData.PartitionData)."""

    error: int
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    diverging_epoch: EpochEndOffset | None = None


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """OffsetForLeaderEpoch's answer, or a Fetch's diverging epoch: the largest epoch the
    leader knows at or below the one asked for, and the offset where it ends."""

    error: int
    leader_epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class EpochData:
    """One partition of an OffsetForLeaderEpoch request."""

    current_leader_epoch: int
    leader_epoch: int


class LeaderOffsetError(Exception):
    """ListOffsets to the leader failed for the partition (``error`` is Kafka's code)."""

    def __init__(self, tp: TopicPartition, error: int) -> None:
        self.tp = tp
        self.error = error
        super().__init__(f"ListOffsets {tp}: {ErrorCode(error).name}")


class LeaderEndPoint(Protocol):
    """What a fetcher needs of its leader (Kafka's LeaderEndPoint)."""

    @property
    def broker_id(self) -> int: ...

    async def fetch(
        self, partitions: Mapping[TopicPartition, FetchPartition]
    ) -> dict[TopicPartition, FetchedPartition]: ...

    async def fetch_epoch_end_offsets(
        self, partitions: Mapping[TopicPartition, EpochData]
    ) -> dict[TopicPartition, EpochEndOffset]: ...

    async def fetch_earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int: ...

    async def fetch_latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int: ...

    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """The follower's fetch knobs (Kafka's replica.* broker configs)."""

    replica_id: int
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    response_max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes
    socket_timeout_ms: int = 30000  # replica.socket.timeout.ms
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    # Kafka's isTruncationOnFetchSupported (IBP 2.7+): a partition taken from a new leader
    # starts fetching at once and relies on the leader's diverging-epoch answer; False: it
    # first asks OffsetForLeaderEpoch where its log and the leader's agree (as before 2.7)
    truncate_on_fetch: bool = False
    # incremental fetch sessions (KIP-227); False: every Fetch is sessionless and full
    fetch_sessions: bool = True


class RemoteLeaderEndPoint:
    """A leader broker reached over the network (see the module docstring)."""

    def __init__(
        self,
        broker_id: int,
        address: tuple[str, int],
        settings: FetchSettings,
        *,
        broker_epoch: Callable[[], int] = lambda: -1,
        security: ClientSecurity | None = None,
        client_id: str | None = None,
    ) -> None:
        self._broker_id = broker_id
        self.address = address
        self.settings = settings
        self._broker_epoch = broker_epoch
        self._security = security
        self._client_id = client_id or f"broker-{settings.replica_id}-fetcher"
        self._conn: AsyncBrokerConnection | None = None
        self.session = FetchSessionHandler[FetchPartition](
            broker_id, enabled=settings.fetch_sessions
        )

    @property
    def broker_id(self) -> int:
        return self._broker_id

    def __repr__(self) -> str:
        return (
            f"RemoteLeaderEndPoint(broker {self._broker_id} at {self.address[0]}:{self.address[1]})"
        )

    async def _connection(self) -> AsyncBrokerConnection:
        if self._conn is None or self._conn.closed:
            self._conn = await AsyncBrokerConnection.connect(
                self.address[0],
                self.address[1],
                client_id=self._client_id,
                timeout_s=self.settings.socket_timeout_ms / 1000,
                security=self._security,
            )
        return self._conn

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _request(
        self,
        api_key: int,
        body: Callable[[int], dict[str, Any]],
        *,
        version_cap: int | None = None,
        timeout_ms: int | None = None,
    ) -> Any:
        conn = await self._connection()
        version = conn.version(api_key)
        if version_cap is not None:
            version = min(version, version_cap)
        timeout_s = None if timeout_ms is None else timeout_ms / 1000
        try:
            return version, await conn.call(api_key, version, body(version), timeout_s=timeout_s)
        except KafkaClientError:
            await self.close()
            raise

    # -- Fetch ------------------------------------------------------------------------------

    async def fetch(
        self, partitions: Mapping[TopicPartition, FetchPartition]
    ) -> dict[TopicPartition, FetchedPartition]:
        """One Fetch for these partitions (every partition to fetch now: the session sends
        what changed; none: only the session's partitions are forgotten, if it has any); the
        answer holds the partitions the leader answered. Raises
        KafkaClientError when the request fails as a whole (the connection is then dropped
        and made again on the next call, and the next Fetch is full)."""
        data = self.session.build(partitions)
        if data.empty:  # nothing to fetch or forget
            return {}
        s = self.settings
        try:
            version, resp = await self._request(
                FETCH_KEY,
                lambda v: self._fetch_body(v, data),
                version_cap=None if data.can_use_topic_ids else 12,
                timeout_ms=s.max_wait_ms + s.socket_timeout_ms,
            )
        except (KafkaClientError, OSError) as e:
            self.session.handle_error(e)
            raise
        error = int(resp.error_code)
        out = _fetched_partitions(resp, version, data.session_partitions)
        if self.session.handle_response(error, int(resp.session_id), out, ms(resp.throttle_time)):
            return out
        if error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR:
            raise KafkaClientError(error, f"Fetch to {self!r}")
        if error == ErrorCode.NONE or error in _SESSION_ERRORS:
            return {}  # the next Fetch is full (Kafka: an empty answer, no backoff)
        return {tp: FetchedPartition(error) for tp in partitions}

    def _fetch_body(self, version: int, data: FetchRequestData[FetchPartition]) -> dict[str, Any]:
        s = self.settings
        topics: dict[str, dict[str, Any]] = {}
        for tp, p in data.to_send.items():
            entry = topics.setdefault(
                tp.topic,
                {"topic": tp.topic, "topic_id": p.topic_id or uuid.UUID(int=0), "partitions": []},
            )
            entry["partitions"].append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": p.current_leader_epoch,
                    "fetch_offset": p.fetch_offset,
                    "last_fetched_epoch": UNDEFINED_EPOCH
                    if p.last_fetched_epoch is None
                    else p.last_fetched_epoch,
                    "log_start_offset": p.log_start_offset,
                    "partition_max_bytes": p.max_bytes,
                }
            )
        # v13+ forgets a replaced partition (its topic recreated) by its old id; before v13
        # names carry no id and the new partition's data replaces it
        forget = data.to_forget + (data.to_replace if version >= 13 else [])
        body: dict[str, Any] = {
            "max_wait": s.max_wait_ms,
            "min_bytes": s.min_bytes,
            "max_bytes": s.response_max_bytes,
            "isolation_level": 0,
            "session_id": data.metadata.session_id,
            "session_epoch": data.metadata.epoch,
            "topics": list(topics.values()),
            "forgotten_topics_data": _forgotten(forget),
        }
        if version >= 15:
            body["replica_state"] = {
                "replica_id": s.replica_id,
                "replica_epoch": self._broker_epoch(),
            }
        else:
            body["replica_id"] = s.replica_id
        return body

    # -- OffsetForLeaderEpoch ---------------------------------------------------------------

    async def fetch_epoch_end_offsets(
        self, partitions: Mapping[TopicPartition, EpochData]
    ) -> dict[TopicPartition, EpochEndOffset]:
        """The leader's end offset of each asked epoch; a failed request marks every
        partition with its error (Kafka: Errors.forException) instead of raising."""
        if not partitions:
            return {}
        topics: dict[str, list[dict[str, int]]] = {}
        for tp, e in partitions.items():
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "current_leader_epoch": e.current_leader_epoch,
                    "leader_epoch": e.leader_epoch,
                }
            )
        body = {
            "replica_id": self.settings.replica_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        }
        try:
            _, resp = await self._request(OFFSET_FOR_LEADER_EPOCH_KEY, lambda v: body)
        except KafkaClientError as e:
            log.warning("OffsetForLeaderEpoch to %r failed: %s", self, e)
            return {
                tp: EpochEndOffset(int(e.error), UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
                for tp in partitions
            }
        out: dict[TopicPartition, EpochEndOffset] = {}
        for topic in resp.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, int(p.partition))
                out[tp] = EpochEndOffset(int(p.error_code), int(p.leader_epoch), int(p.end_offset))
        return out

    # -- ListOffsets ------------------------------------------------------------------------

    async def fetch_earliest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        return await self._list_offset(tp, current_leader_epoch, EARLIEST_TIMESTAMP)

    async def fetch_latest_offset(self, tp: TopicPartition, current_leader_epoch: int) -> int:
        return await self._list_offset(tp, current_leader_epoch, LATEST_TIMESTAMP)

    async def _list_offset(self, tp: TopicPartition, current_leader_epoch: int, ts: int) -> int:
        body = {
            "replica_id": self.settings.replica_id,
            "isolation_level": 0,
            "topics": [
                {
                    "name": tp.topic,
                    "partitions": [
                        {
                            "partition_index": tp.partition,
                            "current_leader_epoch": current_leader_epoch,
                            "timestamp": ts,
                        }
                    ],
                }
            ],
        }
        _, resp = await self._request(LIST_OFFSETS_KEY, lambda v: body)
        for topic in resp.topics:
            for p in topic.partitions:
                if topic.name == tp.topic and int(p.partition_index) == tp.partition:
                    if int(p.error_code) != 0:
                        raise LeaderOffsetError(tp, int(p.error_code))
                    return int(p.offset)
        raise LeaderOffsetError(tp, int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))


def _fetched_partitions(
    resp: Any, version: int, session: Mapping[TopicPartition, FetchPartition]
) -> dict[TopicPartition, FetchedPartition]:
    """The answered partitions, by name (v13+ answers name topics by the ids we sent)."""
    names = {p.topic_id: tp.topic for tp, p in session.items() if p.topic_id is not None}
    out: dict[TopicPartition, FetchedPartition] = {}
    for topic in resp.responses:
        name = names.get(topic.topic_id) if version >= 13 else topic.topic
        if name is None:
            continue
        for p in topic.partitions:
            out[TopicPartition(name, int(p.partition_index))] = _fetched(p)
    return out


def _forgotten(forget: list[tuple[uuid.UUID | None, TopicPartition]]) -> list[dict[str, Any]]:
    topics: dict[tuple[uuid.UUID | None, str], list[int]] = {}
    for topic_id, tp in forget:
        topics.setdefault((topic_id, tp.topic), []).append(tp.partition)
    return [
        {"topic": name, "topic_id": topic_id or uuid.UUID(int=0), "partitions": ps}
        for (topic_id, name), ps in topics.items()
    ]


def _fetched(p: Any) -> FetchedPartition:
    diverging = p.diverging_epoch
    epoch_end = None
    if int(diverging.epoch) >= 0 and int(diverging.end_offset) >= 0:
        epoch_end = EpochEndOffset(0, int(diverging.epoch), int(diverging.end_offset))
    records = p.records
    return FetchedPartition(
        error=int(p.error_code),
        high_watermark=int(p.high_watermark),
        log_start_offset=int(p.log_start_offset),
        records=bytes(records) if records else b"",
        diverging_epoch=epoch_end,
    )
