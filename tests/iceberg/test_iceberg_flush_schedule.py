"""When flushes run: a record produced just after a flush read the log is in the table
within the target lag (Redpanda's ``redpanda.iceberg.target.lag.ms``)."""

from __future__ import annotations

import pytest

from tidelog.iceberg.service import next_flush


@pytest.mark.parametrize(("started", "took", "finished", "target", "want"), [
    (100.0, 0.5, 100.5, 10.0, 109.5),  # the next flush ends by 110, as this one took 0.5 s
    (100.0, 1.5, 100.5, 10.0, 108.5),  # one of the last few took 1.5 s: room for that
    (100.0, 0.0, 100.0, 2.0, 102.0),  # instant flushes: one per target lag
    (100.0, 1.0, 101.0, 2.0, 101.0),  # half the target or more: at once
    (100.0, 4.0, 104.0, 2.0, 104.0),  # slower than the target: back to back
])
def test_next_flush_keeps_records_within_the_target(started: float, took: float,
                                                    finished: float, target: float,
                                                    want: float) -> None:
    got = next_flush(started, took, finished, target)
    assert got == pytest.approx(want)
    assert got >= finished and (got + took <= started + target or got == finished)
