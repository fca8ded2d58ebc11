"""ProducerStateManager: behaviours #104-#117 and the snapshot format of reference §1.12."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tidelog.records import RecordBatch, RecordBatchBuilder, build_batch
from tidelog.records.batch import ControlRecordType
from tidelog.storage.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from tidelog.storage.producer_state import (
    INT_MAX,
    ProducerStateEntry,
    ProducerStateManager,
    read_snapshot,
    snapshot_file_name,
    write_snapshot,
)
from tidelog.storage.validator import AppendOrigin

PID = 1


def data_batch(offset: int, seq: int, epoch: int = 0, n: int = 1, ts: int = 1000,
               pid: int = PID, txn: bool = False) -> RecordBatch:
    b = build_batch([(ts, b"k", b"v")] * n, base_offset=offset, producer_id=pid,
                    producer_epoch=epoch, base_sequence=seq, is_transactional=txn)
    return RecordBatch(bytearray(b))


def marker(offset: int, kind: ControlRecordType, epoch: int = 0, coord: int = 0,
           pid: int = PID, ts: int = 1000) -> RecordBatch:
    b = RecordBatchBuilder(base_offset=offset, producer_id=pid, producer_epoch=epoch,
                           is_transactional=True, is_control=True)
    b.append_control(kind, ts, coord)
    return RecordBatch(bytearray(b.build()))


def append(psm: ProducerStateManager, batch: RecordBatch,
           origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
    info = psm.prepare_update(batch.producer_id, origin)
    completed = info.append(batch)
    psm.update(info)
    if completed is not None:
        psm.complete_txn(completed)
    psm.update_map_end_offset(batch.last_offset + 1)


@pytest.fixture
def psm(tmp_path: Path) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, producer_id_expiration_ms=200)


def test_basic_id_mapping(psm: ProducerStateManager) -> None:
    # #106/#107 PSMTest#testBasicIdMapping
    append(psm, data_batch(0, 0, epoch=0))
    append(psm, data_batch(1, 1, epoch=0))
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, data_batch(2, 3, epoch=0))  # gap
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, data_batch(2, 5, epoch=1))  # higher epoch must start at 0
    append(psm, data_batch(2, 0, epoch=1))
    with pytest.raises(InvalidProducerEpochError) as ei:
        append(psm, data_batch(3, 1, epoch=0))
    assert ei.value.kafka_error == "INVALID_PRODUCER_EPOCH"
    e = psm.last_entry(PID)
    assert e is not None and (e.producer_epoch, e.last_seq, e.last_data_offset) == (1, 0, 2)


def test_new_producer_may_start_at_any_sequence(psm: ProducerStateManager) -> None:
    append(psm, data_batch(0, 17, epoch=3))
    assert psm.last_entry(PID).last_seq == 17  # type: ignore[union-attr]


def test_sequence_wraparound(psm: ProducerStateManager) -> None:
    # #105 testProducerSequenceWrapAround / InvalidWrapAround
    append(psm, data_batch(0, INT_MAX - 1, n=2))
    assert psm.last_entry(PID).last_seq == INT_MAX  # type: ignore[union-attr]
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, data_batch(2, 1))
    append(psm, data_batch(2, 0))


def test_batch_spanning_wraparound_has_wrapped_last_seq(psm: ProducerStateManager) -> None:
    append(psm, data_batch(0, INT_MAX - 1, n=4))
    e = psm.last_entry(PID)
    assert e is not None and e.last_seq == 1 and e.first_seq == INT_MAX - 1
    append(psm, data_batch(4, 2))


def test_duplicate_detection_last_five(psm: ProducerStateManager) -> None:
    # #104
    for i in range(6):
        append(psm, data_batch(i * 2, i * 2, n=2))
    e = psm.last_entry(PID)
    assert e is not None and len(e.batch_metadata) == 5
    dup = e.find_duplicate_batch(data_batch(0, 4, n=2))
    assert dup is not None and (dup.first_offset, dup.last_offset) == (4, 5)
    assert e.find_duplicate_batch(data_batch(0, 0, n=2)) is None  # older than the last 5
    assert e.find_duplicate_batch(data_batch(0, 4, n=1)) is None  # partial overlap
    assert e.find_duplicate_batch(data_batch(0, 4, n=2, epoch=1)) is None


def test_control_record_bumps_epoch(psm: ProducerStateManager) -> None:
    # #108 testControlRecordBumpsProducerEpoch / OutOfSequenceAfterControlRecordEpochBump
    append(psm, data_batch(0, 0, txn=True))
    append(psm, data_batch(1, 1, txn=True))
    append(psm, marker(2, ControlRecordType.COMMIT, epoch=1), AppendOrigin.COORDINATOR)
    e = psm.last_entry(PID)
    assert e is not None and e.producer_epoch == 1 and e.is_empty
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, data_batch(3, 2, epoch=1))
    append(psm, data_batch(3, 0, epoch=1))


def test_marker_with_no_producer_state(psm: ProducerStateManager) -> None:
    # #108 testAppendTxnMarkerWithNoProducerState
    append(psm, marker(0, ControlRecordType.COMMIT, epoch=2), AppendOrigin.COORDINATOR)
    with pytest.raises(OutOfOrderSequenceError):
        append(psm, data_batch(1, 17, epoch=2))
    append(psm, data_batch(1, 0, epoch=2))


def test_non_transactional_write_during_transaction(psm: ProducerStateManager) -> None:
    # #109
    append(psm, data_batch(0, 0, txn=True))
    with pytest.raises(InvalidTxnStateError):
        append(psm, data_batch(1, 1, txn=False))


def test_zombie_coordinator_fenced(psm: ProducerStateManager) -> None:
    # #90
    append(psm, marker(0, ControlRecordType.ABORT, coord=1), AppendOrigin.COORDINATOR)
    append(psm, marker(1, ControlRecordType.COMMIT, coord=2), AppendOrigin.COORDINATOR)
    with pytest.raises(TransactionCoordinatorFencedError):
        append(psm, marker(2, ControlRecordType.ABORT, coord=1), AppendOrigin.COORDINATOR)


def test_replication_is_lenient(psm: ProducerStateManager) -> None:
    # #110
    append(psm, data_batch(0, 0), AppendOrigin.REPLICATION)
    append(psm, data_batch(1, 5), AppendOrigin.REPLICATION)
    append(psm, data_batch(2, 5), AppendOrigin.REPLICATION)
    append(psm, data_batch(3, 6, epoch=0), AppendOrigin.REPLICATION)
    assert psm.last_entry(PID).last_seq == 6  # type: ignore[union-attr]


def test_expiration(psm: ProducerStateManager) -> None:
    # #111 testPidExpirationTimeout / ongoing transactions don't expire
    append(psm, data_batch(0, 0, ts=1000))
    append(psm, data_batch(1, 0, ts=1000, pid=2, txn=True))
    assert psm.remove_expired_producers(1100) == []
    assert psm.remove_expired_producers(1200) == [PID]
    assert psm.last_entry(PID) is None and psm.last_entry(2) is not None


def test_first_unstable_offset(psm: ProducerStateManager) -> None:
    # #116, offsets shifted: txn A begins 99, txn B begins 105
    psm.update_map_end_offset(99)
    append(psm, data_batch(99, 0, pid=10, txn=True))
    append(psm, data_batch(105, 0, pid=11, txn=True))
    assert (psm.first_undecided_offset(), psm.first_unstable_offset()) == (99, 99)
    append(psm, marker(109, ControlRecordType.COMMIT, pid=10), AppendOrigin.COORDINATOR)
    assert (psm.first_undecided_offset(), psm.first_unstable_offset()) == (105, 99)
    psm.on_high_watermark_updated(100)
    assert psm.first_unstable_offset() == 99
    psm.on_high_watermark_updated(110)
    assert psm.first_unstable_offset() == 105
    append(psm, marker(112, ControlRecordType.ABORT, pid=11), AppendOrigin.COORDINATOR)
    assert (psm.first_undecided_offset(), psm.first_unstable_offset()) == (None, 105)
    psm.on_high_watermark_updated(113)
    assert psm.first_unstable_offset() is None


def test_empty_snapshot_bytes(tmp_path: Path) -> None:
    p = tmp_path / "x.snapshot"
    write_snapshot(p, [])
    assert p.read_bytes() == bytes.fromhex("0001 48674bc7 00000000")


def test_snapshot_layout_and_round_trip(psm: ProducerStateManager) -> None:
    # #115 testReadWriteSnapshot, field layout of §1.12
    append(psm, data_batch(0, 0, epoch=3, n=3, ts=1234))
    append(psm, data_batch(3, 0, pid=7, epoch=1, txn=True, ts=99))
    path = psm.take_snapshot()
    assert path is not None and path.name == snapshot_file_name(4)
    raw = path.read_bytes()
    assert len(raw) == 10 + 2 * 46
    version, _crc, count = struct.unpack_from(">hIi", raw)
    assert (version, count) == (1, 2)
    fields = struct.unpack_from(">qhiqiqiq", raw, 10)
    assert fields == (PID, 3, 2, 2, 2, 1234, -1, -1)
    loaded = {e.producer_id: e for e in read_snapshot(path)}
    assert loaded[7].current_txn_first_offset == 3 and loaded[7].last_timestamp == 99
    assert len(loaded[PID].batch_metadata) == 1
    assert loaded[PID].batch_metadata[0].first_seq == 0


def test_skip_snapshot_if_offset_unchanged(psm: ProducerStateManager) -> None:
    # #112
    append(psm, data_batch(0, 0))
    psm.take_snapshot()
    assert psm.take_snapshot() is None
    assert psm.snapshot_offsets() == [1]


def _snapshots_at(psm: ProducerStateManager, offsets: list[int]) -> None:
    for o in offsets:
        psm.update_map_end_offset(o)
        psm.take_snapshot()


def test_truncate_and_reload_removes_out_of_range(psm: ProducerStateManager) -> None:
    # #113
    _snapshots_at(psm, [1, 2, 3, 4, 5])
    psm.truncate_and_reload(1, 3, 0)
    assert (psm.oldest_snapshot_offset(), psm.latest_snapshot_offset()) == (2, 3)
    assert psm.map_end_offset == 3
    assert sorted(p.name for p in psm.dir.iterdir()) == [snapshot_file_name(2),
                                                         snapshot_file_name(3)]


def test_reload_recovers_state_and_skips_expired(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, producer_id_expiration_ms=200)
    append(psm, data_batch(0, 0, ts=1000))
    append(psm, data_batch(1, 0, pid=2, ts=1150))
    psm.take_snapshot()
    fresh = ProducerStateManager(tmp_path, producer_id_expiration_ms=200)
    fresh.truncate_and_reload(0, 2, now_ms=1210)
    assert fresh.map_end_offset == 2
    assert fresh.last_entry(PID) is None and fresh.last_entry(2) is not None
    e = fresh.last_entry(2)
    assert e is not None and e.find_duplicate_batch(data_batch(0, 0, pid=2)) is not None


@pytest.mark.parametrize("damage", ["empty", "truncated", "corrupt", "version"])
def test_corrupt_snapshot_deleted_and_older_used(tmp_path: Path, damage: str) -> None:
    # #114
    psm = ProducerStateManager(tmp_path)
    append(psm, data_batch(0, 0))
    psm.take_snapshot()
    append(psm, data_batch(1, 1))
    latest = psm.take_snapshot()
    assert latest is not None
    raw = bytearray(latest.read_bytes())
    if damage == "empty":
        raw = bytearray()
    elif damage == "truncated":
        raw = raw[:-5]
    elif damage == "corrupt":
        raw[20] ^= 1
    else:
        raw[1] = 9
    latest.write_bytes(bytes(raw))
    with pytest.raises(CorruptSnapshotError, match=latest.name):
        read_snapshot(latest)
    fresh = ProducerStateManager(tmp_path)
    fresh.truncate_and_reload(0, 5, 0)
    assert not latest.exists()
    assert fresh.map_end_offset == 1
    assert fresh.last_entry(PID).last_seq == 0  # type: ignore[union-attr]


def test_remove_stray_snapshots_keeps_clean_shutdown_snapshot(psm: ProducerStateManager) -> None:
    # #101: snapshots 1, 2, 3 (stray), 4 with bases 0, 1, 2 -> 1, 2, 4
    _snapshots_at(psm, [1, 2, 3, 4])
    psm.remove_stray_snapshots([0, 1, 2])
    assert psm.snapshot_offsets() == [1, 2, 4]


def test_remove_all_stray_snapshots(psm: ProducerStateManager) -> None:
    _snapshots_at(psm, [1, 3, 5])
    psm.remove_stray_snapshots([0, 1, 10])
    assert psm.snapshot_offsets() == [1]


def test_truncate_fully(psm: ProducerStateManager) -> None:
    append(psm, data_batch(0, 0))
    psm.take_snapshot()
    psm.truncate_fully_and_start_at(50)
    assert psm.is_empty and psm.map_end_offset == 50 and psm.snapshot_offsets() == []
    assert list(psm.dir.iterdir()) == []


def test_entry_keeps_five_batches_across_appends() -> None:
    e = ProducerStateEntry(1)
    for i in range(7):
        e.add_batch(0, i, i, 0, 0)
    assert [m.last_seq for m in e.batch_metadata] == [2, 3, 4, 5, 6]
