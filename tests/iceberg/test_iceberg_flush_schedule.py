"""When flushes run: a record produced just after a flush read the log is in the table
within the target lag (Redpanda's ``redpanda.iceberg.target.lag.ms``)."""

from __future__ import annotations

import pytest

from tidelog.iceberg.service import next_flush


@pytest.mark.parametrize(("started", "finished", "target", "want"), [
    (100.0, 100.5, 10.0, 109.5),  # the next flush ends by 110, as this one took 0.5 s
    (100.0, 100.0, 2.0, 102.0),  # an instant flush: one per target lag
    (100.0, 101.0, 2.0, 101.0),  # half the target or more: at once
    (100.0, 104.0, 2.0, 104.0),  # slower than the target: back to back
])
def test_next_flush_keeps_records_within_the_target(started: float, finished: float,
                                                    target: float, want: float) -> None:
    got = next_flush(started, finished, target)
    assert got == pytest.approx(want)
    took = finished - started
    assert got >= finished and (got + took <= started + target or got == finished)
