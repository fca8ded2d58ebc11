"""Fetch of tiered data over the wire (Kafka's RemoteStorageFetchInfo -> DelayedRemoteFetch):
a fetch below the local start gets its batches from remote storage while the other
partitions of the same Fetch are served locally; a failing remote storage answers that
partition UNKNOWN_SERVER_ERROR (Kafka's error for a failed remote read) and the rest is
still served; once the storage is back the same fetch gets the records. ListOffsets finds
timestamps of tiered records in remote storage and answers the tiered specials."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from broker_wire import Wire

from tidelog.client.kafka_client import KafkaClient
from tidelog.protocol.codec import request_class
from tidelog.protocol.errors import ErrorCode
from tidelog.protocol.kio_util import make, nested
from tidelog.records.batch import iter_batches
from tidelog.storage.remote.storage_manager import RemoteStorageError
from tidelog.testing import EmbeddedBroker
from tidelog.util.topic_partition import TopicPartition

from .harness import START_MS, batch, broker_props, tiered_topic_configs

TIERED, PLAIN = TopicPartition("tiered", 0), TopicPartition("plain", 0)


class BrokenReads:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def fetch_log_segment(self, *args: object) -> bytes:
        raise RemoteStorageError("connection refused")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def broker(tmp_path: Path) -> Any:
    (tmp_path / "remote").mkdir()
    props = {**broker_props(tmp_path / "logs", tmp_path / "remote"),
             "remote.log.manager.task.interval.ms": "50"}
    props.pop("log.dirs")
    with EmbeddedBroker(props, log_dir=tmp_path / "logs") as b:
        yield b


def test_remote_and_local_partitions_of_one_fetch(broker: Any) -> None:
    rm = broker.broker.replica_manager
    broker.run(_create(rm))
    for i in range(20):
        broker.run(_append(rm, TIERED, batch(i)))
        broker.run(_append(rm, PLAIN, batch(i)))
    lg = rm.get_log(TIERED)
    deadline = time.monotonic() + 30
    while lg.local_log_start_offset == 0:  # copied, then deleted locally
        assert time.monotonic() < deadline
        broker.run(_retention(lg))
        time.sleep(0.05)
    rlm = broker.broker.remote_log_manager
    with KafkaClient(broker.bootstrap_servers) as client:
        got = client.fetch({TIERED: 0, PLAIN: 0}, max_wait_ms=0)
        assert got[TIERED].error == 0 and got[PLAIN].error == 0
        first = next(iter_batches(got[TIERED].records))
        assert first.base_offset == 0  # from remote storage: not on local disk any more
        assert got[PLAIN].records
        rlm.reader.rsm = BrokenReads(rlm.reader.rsm)
        got = client.fetch({TIERED: 0, PLAIN: 0}, max_wait_ms=0)
        assert got[TIERED].error == ErrorCode.UNKNOWN_SERVER_ERROR
        assert got[TIERED].records == b""
        assert got[PLAIN].error == 0 and got[PLAIN].records  # the rest is served
        assert rlm.metrics.topic("tiered").remote_fetch_errors >= 1
        rlm.reader.rsm = rlm.reader.rsm.inner
        got = client.fetch({TIERED: 0}, max_wait_ms=0)
        assert got[TIERED].error == 0 and got[TIERED].records
        # ListOffsets: timestamps of tiered records are found in remote storage
        local_start = lg.local_log_start_offset
        for i in (0, 3, local_start - 1, local_start + 1):
            assert client.offsets_for_times({TIERED: START_MS + i})[TIERED] == i
        assert client.offsets_for_times({TIERED: START_MS + 10_000})[TIERED] is None
        assert client.list_offsets({TIERED: -2})[TIERED][0] == 0  # EARLIEST: remote start
    with Wire(broker) as w:
        assert _list_offset(w, -4) == local_start  # EARLIEST_LOCAL
        highest = lg.highest_offset_in_remote_storage
        assert _list_offset(w, -5) == highest >= local_start - 1  # LATEST_TIERED
        assert _list_offset(w, -6) == highest + 1  # EARLIEST_PENDING_UPLOAD


def _list_offset(w: Wire, ts: int) -> int:
    cls = request_class(2, 11)
    tcls = nested(cls, "topics")
    pcls = nested(tcls, "partitions")
    body = make(cls, replica_id=-1, isolation_level=0, timeout=1000, topics=(
        make(tcls, name="tiered", partitions=(make(pcls, partition_index=0, timestamp=ts,
                                                   current_leader_epoch=-1),)),))
    p: Any = w.call(2, 11, body=body)
    part = p.topics[0].partitions[0]
    assert part.error_code == 0
    return int(part.offset)


async def _create(rm: Any) -> None:
    rm.create_topic("tiered", 1, tiered_topic_configs())
    rm.create_topic("plain", 1, {"segment.bytes": "1024"})


async def _append(rm: Any, tp: TopicPartition, data: bytes) -> None:
    rm.append(tp, data, required_acks=1)


async def _retention(lg: Any) -> None:
    lg.delete_old_segments()
