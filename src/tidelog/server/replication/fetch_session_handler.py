"""A follower's side of incremental fetch sessions (KIP-227): Kafka's FetchSessionHandler
(clients/src/main/java/org/apache/kafka/clients/FetchSessionHandler.java) as
RemoteLeaderEndPoint uses it for one leader.

The first Fetch is full and opens a session (session id 0, epoch 0); the leader answers
every partition and names the session. Each later Fetch carries the session id and the next
epoch, and only the partitions whose request data changed since the last one (fetch offset,
log start offset, leader epochs...) plus ``forgotten_topics_data`` for the partitions no longer
fetched; the leader answers only the partitions with records or a changed high watermark /
log start offset, an error or a diverging epoch, the others being implied unchanged.

``handle_response`` and ``handle_error`` move the session on as Kafka does: a session the
leader does not know (FETCH_SESSION_ID_NOT_FOUND) or any other top-level error, a response
naming partitions outside the session, or a failed request makes the next Fetch full again
(closing the old session and asking for a new one). A leader that declines sessions (a full
cache, or ``max.incremental.fetch.session.cache.slots`` 0) answers session id 0: every Fetch
stays full. ``enabled=False`` sends only sessionless full fetches (epoch -1).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from tidelog.protocol.errors import ErrorCode
from tidelog.util.topic_partition import TopicPartition

log = logging.getLogger(__name__)

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: 0 and -1 stay, the largest int wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch == _MAX_EPOCH:
        return 1
    return epoch + 1


@dataclass(frozen=True, slots=True)
class FetchMetadata:
    """The session id and epoch a Fetch carries (Kafka's FetchMetadata)."""

    session_id: int
    epoch: int

    @property
    def is_full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def next_close_existing_attempt_new(self) -> FetchMetadata:
        return FetchMetadata(self.session_id, INITIAL_EPOCH)

    def next_incremental(self) -> FetchMetadata:
        return FetchMetadata(self.session_id, next_epoch(self.epoch))

    @staticmethod
    def new_incremental(session_id: int) -> FetchMetadata:
        return FetchMetadata(session_id, next_epoch(INITIAL_EPOCH))


class PartitionData(Hashable, Protocol):
    """One partition of a Fetch as the session compares it (equal: unchanged)."""

    @property
    def topic_id(self) -> uuid.UUID | None: ...


P = TypeVar("P", bound=PartitionData)


INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
LEGACY = FetchMetadata(INVALID_SESSION_ID, FINAL_EPOCH)  # sessionless


@dataclass(frozen=True, slots=True)
class FetchRequestData(Generic[P]):
    """One Fetch to send (Kafka's FetchRequestData): the partitions in the request, the ones
    to forget (topic id, partition), those to forget because their topic id changed (v13+),
    every partition of the session after this request, and the session id and epoch."""

    to_send: dict[TopicPartition, P]
    to_forget: list[tuple[uuid.UUID | None, TopicPartition]]
    to_replace: list[tuple[uuid.UUID | None, TopicPartition]]
    session_partitions: dict[TopicPartition, P]
    metadata: FetchMetadata
    can_use_topic_ids: bool

    @property
    def empty(self) -> bool:
        """Nothing to fetch and nothing to forget: no request (Kafka's buildFetch)."""
        return not self.session_partitions and not self.to_forget


class FetchSessionHandler(Generic[P]):
    """The session with one leader (see the module docstring)."""

    def __init__(self, node: int, *, enabled: bool = True) -> None:
        self.node = node
        self.enabled = enabled
        self.next_metadata = INITIAL if enabled else LEGACY
        # insertion order matters: a full fetch answers the first partitions first
        self._session: dict[TopicPartition, P] = {}

    @property
    def session_id(self) -> int:
        return self.next_metadata.session_id

    def session_partitions(self) -> dict[TopicPartition, P]:
        return dict(self._session)

    def build(self, wanted: Mapping[TopicPartition, P]) -> FetchRequestData[P]:
        """The next Fetch for ``wanted`` (every partition to fetch now, in order): in full,
        or only what changed since the last request (Kafka's Builder.build)."""
        can_use_ids = all(p.topic_id is not None for p in wanted.values())
        if self.next_metadata.is_full:
            self._session = dict(wanted)
            return FetchRequestData(
                dict(wanted), [], [], dict(wanted), self.next_metadata, can_use_ids
            )
        nxt = dict(wanted)
        removed: list[tuple[uuid.UUID | None, TopicPartition]] = []
        replaced: list[tuple[uuid.UUID | None, TopicPartition]] = []
        session: dict[TopicPartition, P] = {}
        for tp, prev in self._session.items():
            data = nxt.pop(tp, None)
            if data is None:  # no longer fetched: the leader forgets it
                removed.append((prev.topic_id, tp))
                can_use_ids = can_use_ids and prev.topic_id is not None
                continue
            session[tp] = data
            if prev.topic_id is not None and data.topic_id is not None and (
                prev.topic_id != data.topic_id
            ):
                replaced.append((prev.topic_id, tp))  # the topic was recreated
                nxt[tp] = data
            elif prev != data:
                nxt[tp] = data  # altered: sent again, at the end
        added = {tp: d for tp, d in nxt.items() if tp not in self._session}
        session.update(added)
        self._session = session
        return FetchRequestData(
            nxt, removed, replaced, dict(session), self.next_metadata, can_use_ids
        )

    def handle_response(
        self,
        error: int,
        session_id: int,
        partitions: Collection[TopicPartition],
        throttle_time_ms: int = 0,
    ) -> bool:
        """Take the leader's answer; False when it cannot be used (its partitions are then
        not processed, and the next Fetch is full)."""
        if not self.enabled:
            return error == ErrorCode.NONE
        if error != ErrorCode.NONE:
            self._handle_error_response(error)
            return False
        extra = [tp for tp in partitions if tp not in self._session]
        if self.next_metadata.is_full:
            return self._handle_full_response(session_id, partitions, extra, throttle_time_ms)
        if extra:
            log.info(
                "broker %d sent an invalid incremental fetch response: %d extra partitions",
                self.node, len(extra),
            )  # fmt: skip
            self.next_metadata = self.next_metadata.next_close_existing_attempt_new()
            return False
        if session_id == INVALID_SESSION_ID:  # the leader closed the session
            self.next_metadata = INITIAL
        else:
            self.next_metadata = self.next_metadata.next_incremental()
        return True

    def _handle_error_response(self, error: int) -> None:
        """The leader answered the whole Fetch with an error: a session it does not know is
        forgotten, any other error closes this one and asks for a new one."""
        log.info(
            "broker %d could not process the fetch with %s: %s",
            self.node, self.next_metadata, _name(error),
        )  # fmt: skip
        if error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
            self.next_metadata = INITIAL
        else:
            self.next_metadata = self.next_metadata.next_close_existing_attempt_new()

    def _handle_full_response(
        self,
        session_id: int,
        partitions: Collection[TopicPartition],
        extra: list[TopicPartition],
        throttle_time_ms: int,
    ) -> bool:
        """The answer to a full Fetch must name exactly the session's partitions (Kafka's
        verifyFullFetchResponsePartitions); its session id opens the incremental ones."""
        if not partitions and throttle_time_ms > 0:  # KIP-219: throttled, not answered
            self.next_metadata = INITIAL
            return False
        omitted = len(self._session) - (len(partitions) - len(extra))
        if extra or omitted:
            log.info(
                "broker %d sent an invalid full fetch response: %d extra, %d omitted",
                self.node, len(extra), omitted,
            )  # fmt: skip
            self.next_metadata = INITIAL
            return False
        self.next_metadata = (
            INITIAL
            if session_id == INVALID_SESSION_ID
            else FetchMetadata.new_incremental(session_id)
        )
        return True

    def handle_error(self, error: BaseException) -> None:
        """The request failed (connection lost, timeout): the next Fetch closes the session
        and opens a new one."""
        log.info("fetch to broker %d with %s failed: %s", self.node, self.next_metadata, error)
        if self.enabled:
            self.next_metadata = self.next_metadata.next_close_existing_attempt_new()


def _name(error: int) -> str:
    try:
        return ErrorCode(error).name
    except ValueError:
        return str(error)
