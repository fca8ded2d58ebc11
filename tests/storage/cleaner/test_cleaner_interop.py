"""Independent decoders read a cleaned segment: kafka-python's and aiokafka's record readers
accept the rebuilt batches (re-compressed, delete horizon set) and the empty headers the
cleaner leaves, and see exactly the records ours do."""

from __future__ import annotations

from pathlib import Path

import aiokafka.record.default_records as ak
import pytest
from cleaner_helpers import append, clean, make_cleaner, open_log, read_records
from kafka.record import MemoryRecords as KpMemoryRecords

from tidelog.records import CompressionType, RecordBatchBuilder, iter_batches
from tidelog.util.clock import ManualClock


@pytest.mark.parametrize("codec", list(CompressionType))
def test_other_clients_decode_cleaned_segments(tmp_path: Path, codec: CompressionType) -> None:
    clock = ManualClock(1_700_000_000_000)
    lg = open_log(tmp_path / "interop-0", clock)
    for i in range(20):
        append(lg, [(b"k%d" % (i % 4), None if i % 7 == 3 else b"v%d" % i),
                    (b"x%d" % (i % 3), b"y" * i)], codec)
    b = RecordBatchBuilder(codec, producer_id=5, producer_epoch=0, base_sequence=0)
    b.append(clock.milliseconds(), b"k0", b"superseded")  # an emptied producer batch stays
    lg.append_as_leader(b.build())
    append(lg, [(b"k0", b"last")], codec)
    lg.roll()
    clean(make_cleaner(clock), lg)
    ours = [(r.offset, r.key, r.value) for r in read_records(lg)]
    data = b"".join(s.log.read_at(0, s.size) for s in lg.segments.values())
    batches = list(iter_batches(data))
    assert any(x.records_count == 0 for x in batches)  # an empty header is in there
    assert any(x.has_delete_horizon for x in batches)  # and a batch with a horizon

    kp_records: list[tuple[int, bytes | None, bytes | None]] = []
    mr = KpMemoryRecords(data)
    while (batch := mr.next_batch()) is not None:
        assert batch.validate_crc()
        kp_records.extend((r.offset, r.key, r.value) for r in batch)
    assert kp_records == ours

    ak_records: list[tuple[int, bytes | None, bytes | None]] = []
    pos = 0
    for x in batches:
        ab = ak.DefaultRecordBatch(bytearray(data[pos : pos + x.size_in_bytes]))
        assert ab.validate_crc()
        ak_records.extend((r.offset, r.key, r.value) for r in ab)
        pos += x.size_in_bytes
    assert ak_records == ours
    lg.close()
