"""The stream reader's driver-side logic called directly, the way Spark calls it (no session):
admission control, availableNow, minOffsetsPerTrigger, new and vanished partitions."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from kafka_layout import PartitionWriter
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from tidelog.spark.options import parse_read_options
from tidelog.spark.source import TidelogStreamReader


def _fill(w: PartitionWriter, n: int) -> None:
    start = w.next_offset
    if n:
        w.append([(1000 + i, None, f"{i}".encode(), []) for i in range(start, start + n)])
    w.flush()


def _reader(logs: Path, **kw: str) -> TidelogStreamReader:
    return TidelogStreamReader(parse_read_options({"path": str(logs), "subscribe": "t", **kw}, streaming=True))


WRITERS: dict[Path, PartitionWriter] = {}


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    for p, n in ((0, 90), (1, 10)):
        w = WRITERS[tmp_path / f"t-{p}"] = PartitionWriter(tmp_path / f"t-{p}")
        _fill(w, n)
    return tmp_path


def _rows(reader: TidelogStreamReader, start: dict, end: dict) -> list[int]:
    out: list[int] = []
    for part in reader.partitions(start, end):
        for batch in reader.read(part):
            assert isinstance(batch, pa.RecordBatch)
            out += [int(v) for v in batch.column("value").to_pylist()]
    return sorted(out)


def test_max_rows_split_by_lag_and_resume(logs: Path) -> None:
    reader = _reader(logs, startingOffsets="earliest", maxOffsetsPerTrigger="50")
    limit = reader.getDefaultReadLimit()
    assert isinstance(limit, ReadMaxRows) and limit.max_rows == 50
    start = reader.initialOffset()
    assert start == {"t": {"0": 0, "1": 0}}
    end = reader.latestOffset(start, limit)
    assert end == {"t": {"0": 45, "1": 5}}  # 50 rows in proportion to the 90/10 lag
    assert _rows(reader, start, end) == sorted(list(range(45)) + list(range(5)))
    end2 = reader.latestOffset(end, limit)
    assert end2 == {"t": {"0": 90, "1": 10}}
    assert reader.latestOffset(end2, limit) == end2  # caught up: no new batch
    assert reader.reportLatestOffset() == {"t": {"0": 90, "1": 10}}


def test_starting_latest_and_read_all_available(logs: Path) -> None:
    reader = _reader(logs)
    assert isinstance(reader.getDefaultReadLimit(), ReadAllAvailable)
    start = reader.initialOffset()
    assert start == {"t": {"0": 90, "1": 10}}
    _fill(PartitionWriter(logs / "t-2"), 0)
    w = PartitionWriter(logs / "t-3")
    _fill(w, 7)  # a new partition: read from its beginning
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"t": {"0": 90, "1": 10, "2": 0, "3": 7}}
    assert _rows(reader, start, end) == list(range(7))


def test_available_now_stops_at_the_offsets_seen_at_start(logs: Path) -> None:
    reader = _reader(logs, startingOffsets="earliest", maxOffsetsPerTrigger="60")
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    _fill(WRITERS[logs / "t-0"], 30)  # arrives after the query started: not read
    ends = []
    while True:
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        if end == start:
            break
        ends.append(end)
        start = end
    assert ends[-1] == {"t": {"0": 90, "1": 10}}
    assert len(ends) == 2


def test_min_offsets_per_trigger_waits_until_delay(logs: Path) -> None:
    waiting = _reader(logs, startingOffsets="earliest", minOffsetsPerTrigger="500", maxTriggerDelay="1h",
                      maxOffsetsPerTrigger="1000")
    limit = waiting.getDefaultReadLimit()
    assert limit == ReadMinRows(500)
    start = waiting.initialOffset()
    first = waiting.latestOffset(start, limit)
    assert first == {"t": {"0": 90, "1": 10}}  # Spark always runs the first micro-batch
    _fill(WRITERS[logs / "t-0"], 20)
    assert waiting.latestOffset(first, limit) == first  # 20 < 500 and the delay has not passed
    # a one-time trigger (Trigger.Once) is handed ReadAllAvailable: it reads what is there
    assert waiting.latestOffset(first, ReadAllAvailable()) == {"t": {"0": 110, "1": 10}}
    due = _reader(logs, startingOffsets="earliest", minOffsetsPerTrigger="500", maxTriggerDelay="0ms")
    begin = due.latestOffset(due.initialOffset(), ReadMinRows(500))
    _fill(WRITERS[logs / "t-1"], 5)
    assert due.latestOffset(begin, ReadMinRows(500)) == {"t": {"0": 110, "1": 15}}  # delay passed


def test_offsets_going_backwards(logs: Path) -> None:
    """A partition now ending below the checkpointed offset (topic recreated) is data loss."""
    strict = _reader(logs, startingOffsets="earliest")
    gone_back = {"t": {"0": 500, "1": 10}}
    with pytest.raises(RuntimeError, match="offset was changed from 500 to 90"):
        strict.latestOffset(gone_back, ReadAllAvailable())
    lenient = _reader(logs, startingOffsets="earliest", failOnDataLoss="false")
    end = lenient.latestOffset(gone_back, ReadAllAvailable())
    assert end == {"t": {"0": 90, "1": 10}}
    assert len(_rows(lenient, gone_back, end)) == 90  # read again from the earliest offset


def test_vanished_partition_fails_or_is_dropped(logs: Path) -> None:
    strict = _reader(logs, startingOffsets="earliest")
    start = strict.initialOffset()
    shutil.rmtree(logs / "t-1")
    with pytest.raises(RuntimeError, match="disappeared"):
        strict.latestOffset(start, ReadAllAvailable())
    lenient = _reader(logs, startingOffsets="earliest", failOnDataLoss="false")
    assert lenient.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 90}}
