"""A read_committed Fetch read from remote storage lists the aborted transactions of the
records it answers wherever their transaction index entry is (Kafka's
RemoteLogManager.collectAbortedTransactions): in the segment read, in any later remote
segment of the lineage (an abort marker many segments after the transaction's first
records), or, when the remote ones do not complete the search, in the local segments (the
marker in a segment not tiered yet). Otherwise the consumer is told of no abort and delivers
the aborted records as committed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tidelog.records import ControlRecordType, RecordBatchBuilder
from tidelog.records.batch import iter_batches
from tidelog.server.remote_log_reader import (
    NEXT_SEGMENTS,
    RemoteFetchResult,
    RemoteStorageFetchInfo,
)
from tidelog.storage.log import Log
from tidelog.storage.remote.metadata import TopicIdPartition
from tidelog.storage.validator import AppendOrigin

from .harness import START_MS, TOPIC, Tiered, batch, open_tiered

PID = 7


@pytest.fixture(params=["filesystem", "s3"])
def tiered(request: pytest.FixtureRequest, tmp_path: Path) -> Tiered:
    """The remote storage a directory, or a bucket of SeaweedFS's S3."""
    s3 = request.getfixturevalue("s3_bucket").rsm_configs if request.param == "s3" else {}
    t = open_tiered(tmp_path / "logs", tmp_path / "remote", **s3)
    yield t  # type: ignore[misc]
    t.close()


def _transactional(lg: Log, n: int) -> None:
    for seq in range(n):
        b = RecordBatchBuilder(producer_id=PID, producer_epoch=0, base_sequence=seq,
                               is_transactional=True)
        b.append(START_MS + seq, b"k", b"t" * 200)
        lg.append_as_leader(b.build())


def _abort(lg: Log) -> None:
    m = RecordBatchBuilder(producer_id=PID, producer_epoch=0, is_transactional=True,
                           is_control=True)
    m.append_control(ControlRecordType.ABORT, START_MS, coordinator_epoch=0)
    lg.append_as_leader(m.build(), origin=AppendOrigin.COORDINATOR)


def _plain(lg: Log, n: int) -> None:
    for i in range(n):
        lg.append_as_leader(batch(i))


def _tier(t: Tiered) -> int:
    """Copy every segment below the active one, delete them locally: the local start."""
    lg = t.log()
    lg.update_high_watermark(lg.log_end_offset)
    t.run()
    lg.delete_old_segments()
    lg.local_log.delete_pending_files()
    return lg.local_log_start_offset


def _read_committed(t: Tiered, offset: int) -> RemoteFetchResult:
    info = t.rm.topic(TOPIC)
    assert info is not None and info.topic_id is not None
    fetch = RemoteStorageFetchInfo(TopicIdPartition(info.topic_id, TOPIC, 0), offset, 1 << 20,
                                   True, read_committed=True)
    result = asyncio.run(t.rlm.read(fetch, t.log()))
    assert result.error is None and result.records
    return result


def _txn_segments(lg: Log) -> list[bool]:
    return [not s.txn_index.is_empty for s in lg.segments.values()]


def test_the_abort_indexed_in_a_local_segment(tiered: Tiered) -> None:
    t = tiered
    lg = t.log()
    _transactional(lg, 10)  # ~4 batches a 1 KiB segment: the transaction rolls the log
    _abort(lg)  # indexed in the active segment, which stays local
    assert _txn_segments(lg)[-1] and not any(_txn_segments(lg)[:-1])
    local_start = _tier(t)
    assert local_start > 0
    result = _read_committed(t, 0)
    assert {b.producer_id for b in iter_batches(result.records)} == {PID}
    assert result.aborted_transactions is not None
    assert [(a.producer_id, a.first_offset) for a in result.aborted_transactions] == [(PID, 0)]


def test_the_abort_indexed_in_a_remote_segment_past_the_ones_read(tiered: Tiered) -> None:
    t = tiered
    lg = t.log()
    _transactional(lg, 4 * (NEXT_SEGMENTS + 3))  # more segments than a read reads ahead
    marker = lg.log_end_offset
    _abort(lg)
    _plain(lg, 8)  # the marker's segment is closed: it is tiered too
    assert _txn_segments(lg).index(True) > NEXT_SEGMENTS + 1
    local_start = _tier(t)
    assert local_start > marker and not any(_txn_segments(lg))  # the marker only remote
    info = t.rm.topic(TOPIC)
    assert info is not None and info.topic_id is not None
    remote = sorted(t.rlm.rlmm.catch_up_for(TopicIdPartition(info.topic_id, TOPIC, 0))
                    .list_remote_log_segments(), key=lambda m: m.start_offset)
    # KIP-1058: the copy says which segments index no transaction (a read skips them)
    assert [m.start_offset <= marker <= m.end_offset for m in remote] == \
        [not m.txn_index_empty for m in remote]
    result = _read_committed(t, 0)
    assert result.aborted_transactions is not None
    assert [(a.producer_id, a.first_offset) for a in result.aborted_transactions] == [(PID, 0)]
    # read past the transaction: none listed
    after = _read_committed(t, local_start - 1)
    assert after.aborted_transactions == []
