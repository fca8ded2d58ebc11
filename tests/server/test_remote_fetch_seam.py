"""ReplicaManager.fetch_messages' seam for remote (tiered) reads: a consumer's read below the
local log's start, in a topic with remote.storage.enable, goes to ``remote_fetch`` (Kafka's
RemoteStorageFetchInfo and DelayedRemoteFetch); a follower's answers
OFFSET_MOVED_TO_TIERED_STORAGE (it builds its state from remote storage), and any read without
``remote_fetch`` answers OFFSET_OUT_OF_RANGE. The partition stands for a tiered one
whose records 0-4 were moved to the remote tier: its local log really starts at 5 (after a
DeleteRecords), its log start offset is 0."""

from __future__ import annotations

from typing import Any

from broker_wire import Wire, fetch_body, produce_body

from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.fast import FetchPartitionData
from tidelog.records import build_batch
from tidelog.server.cluster.fetch_params import FetchParams, isolation_of
from tidelog.server.cluster.partition import Partition
from tidelog.server.replica_fetches import RemoteStorageFetchInfo
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

TP = TopicPartition("tiered", 0)
REMOTE_BYTES = b"batches from the remote tier"


class TieredPartition(Partition):
    """Records 0-4 in the remote tier, the local log from 5 on."""

    @property
    def log_start_offset(self) -> int:
        return 0

    @property
    def local_log_start_offset(self) -> int:
        return int(self.log.log_start_offset)

    @property
    def remote_storage_enabled(self) -> bool:
        return True


def _fetch(b: EmbeddedBroker, offset: int, replica_id: int = -1) -> FetchPartitionData:
    request: Any = fetch_body(12, TP.topic, {0: offset})
    params = FetchParams(replica_id, -1, isolation_of(False, replica_id >= 0), max_wait_ms=0)

    async def read() -> FetchPartitionData:
        rm = b.broker.replica_manager
        plan = b.broker.fetch_sessions.plan(request, 12)
        out = await rm.fetch_messages(params, plan.partitions, lambda key: 0)
        return out[0][1]

    result: FetchPartitionData = b.run(read())
    return result


def test_reads_below_the_local_log_go_to_remote_fetch() -> None:
    with EmbeddedBroker() as b:
        rm = b.broker.replica_manager
        batch = build_batch([(1_700_000_000_000 + i, None, b"v%d" % i) for i in range(10)])

        async def setup() -> None:
            rm.create_topic(TP.topic, 1)

        b.run(setup())
        with Wire(b) as w:
            w.call(0, 9, body=produce_body(9, TP.topic, {0: batch}))

        async def tier() -> None:
            rm.delete_records(TP, 5)
            rm.partitions[TP].__class__ = TieredPartition

        b.run(tier())
        assert _fetch(b, 2).error_code == ErrorCode.OFFSET_OUT_OF_RANGE  # no remote_fetch
        asked: list[list[RemoteStorageFetchInfo]] = []

        async def remote_fetch(params: FetchParams, infos: list[RemoteStorageFetchInfo]) -> None:
            asked.append(infos)
            for info in infos:
                info.out.records = REMOTE_BYTES

        rm.remote_fetch = remote_fetch
        data = _fetch(b, 2)
        assert (data.error_code, data.records) == (ErrorCode.NONE, REMOTE_BYTES)
        assert data.high_watermark == 10
        [[info]] = asked
        assert (info.topic_partition, info.fetch.fetch_offset, info.min_one_message) == (TP, 2, True)
        # the local log answers from its start; a follower's read below it answers
        # OFFSET_MOVED_TO_TIERED_STORAGE (not read from the remote tier: Kafka's follower
        # builds its state from remote storage instead)
        assert _fetch(b, 5).records
        moved = _fetch(b, 2, replica_id=1)
        assert moved.error_code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE
        assert moved.log_start_offset == 0
        assert len(asked) == 1
