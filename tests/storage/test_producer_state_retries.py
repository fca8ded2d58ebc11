"""An idempotent producer's in-flight batches retried after the log was reopened or
truncated: each of its last five batches is answered as a duplicate at its original offsets,
not OUT_OF_ORDER_SEQUENCE_NUMBER (which an idempotent librdkafka producer takes as fatal),
although a producer snapshot keeps only one batch per producer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tidelog.config.log_config import LogConfig
from tidelog.records import build_batch
from tidelog.storage.errors import OutOfOrderSequenceError
from tidelog.storage.log import Log
from tidelog.util.clock import ManualClock

PRODUCER, OTHER = 7, 8


def batch(seq: int, producer: int = PRODUCER, epoch: int = 0, offset: int = 0) -> bytes:
    return build_batch([(1_000 + seq, None, f"p{producer}-{seq}".encode())], producer_id=producer,
                       producer_epoch=epoch, base_sequence=seq, base_offset=offset)  # fmt: skip


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000_000)


def open_log(path: Path, clock: ManualClock) -> Log:
    return Log.open(path, LogConfig.from_props({}), clock=clock)


@pytest.fixture
def path(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "t-0"


def write(log: Log, sequences: range) -> dict[int, int]:
    """One batch per sequence, each followed by another producer's; seq -> offset."""
    offsets = {}
    for seq in sequences:
        offsets[seq] = log.append_as_leader(batch(seq), 0).first_offset
        log.append_as_leader(batch(seq, OTHER), 0)
    return offsets


def test_retries_after_an_unclean_restart_are_duplicates(path: Path, clock: ManualClock) -> None:
    log = open_log(path, clock)
    offsets = write(log, range(12))
    log.flush()  # killed now: no clean shutdown, no snapshot at the end
    reopened = open_log(path, clock)
    end = reopened.log_end_offset
    for seq in range(7, 12):  # the five a producer may have in flight
        info = reopened.append_as_leader(batch(seq), 0)
        assert info.duplicate and info.first_offset == offsets[seq], seq
    assert reopened.log_end_offset == end
    with pytest.raises(OutOfOrderSequenceError):  # older than five batches: not retained
        reopened.append_as_leader(batch(6), 0)
    assert reopened.append_as_leader(batch(12), 0).first_offset == end  # and on it goes
    reopened.close()
    log.close_handlers()


def test_retries_after_a_clean_restart_are_duplicates(path: Path, clock: ManualClock) -> None:
    log = open_log(path, clock)
    offsets = write(log, range(9))
    log.close()  # a snapshot at the end, one batch per producer
    reopened = open_log(path, clock)
    for seq in range(4, 9):
        info = reopened.append_as_leader(batch(seq), 0)
        assert info.duplicate and info.first_offset == offsets[seq], seq
    reopened.close()


def test_retries_after_a_truncation_are_duplicates(path: Path, clock: ManualClock) -> None:
    """A follower truncated to where it agrees with a new leader, then made leader: the
    batches below the truncation point are still known."""
    log = open_log(path, clock)
    offsets = write(log, range(10))
    log.truncate_to(offsets[8])  # seq 8 and 9 (and the other producer's after them) go
    for seq in range(3, 8):
        info = log.append_as_leader(batch(seq), 1)
        assert info.duplicate and info.first_offset == offsets[seq], seq
    assert log.append_as_leader(batch(8), 1).first_offset == offsets[8]
    log.close()


def test_a_new_epoch_forgets_the_older_batches(path: Path, clock: ManualClock) -> None:
    log = open_log(path, clock)
    write(log, range(3))
    bumped = {seq: log.append_as_leader(batch(seq, epoch=1), 0).first_offset for seq in range(2)}
    log.flush()
    reopened = open_log(path, clock)
    entry = reopened.producer_state.last_entry(PRODUCER)
    assert entry is not None and entry.producer_epoch == 1
    assert [(m.first_seq, m.last_offset) for m in entry.batch_metadata] == [
        (0, bumped[0]), (1, bumped[1])]
    reopened.close()
    log.close_handlers()
