"""A follower that took an idempotent producer's batches by replication and then leads:
each retry of the producer's last five batches is answered as a duplicate at its original
offsets, never written a second time, whatever happened to the follower's log meanwhile
(fetches of any size, truncations to any offset, reopenings after a clean or an unclean
stop, segments of a few batches). A retry written twice under the same producer id, epoch
and sequence is an acknowledged record duplicated (the Jepsen checker's "duplicated")."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tidelog.config.log_config import LogConfig
from tidelog.records import build_batch, iter_batches
from tidelog.storage.errors import OutOfOrderSequenceError
from tidelog.storage.log import Log
from tidelog.util.clock import ManualClock

PRODUCERS = (7, 8)


def batch(producer: int, seq: int, records: int) -> bytes:
    return build_batch([(1_000 + seq + i, None, f"p{producer}-{seq + i}".encode())
                        for i in range(records)],
                       producer_id=producer, producer_epoch=0, base_sequence=seq)  # fmt: skip


class Replica:
    """A leader's log and its follower's, the follower fetching whole batches from the
    leader's segment files in chunks of one to four."""

    def __init__(self, directory: Path, config: LogConfig, clock: ManualClock,
                 rng: random.Random) -> None:  # fmt: skip
        self.dir, self.config, self.clock, self.rng = directory, config, clock, rng
        self.leader = Log.open(directory / "leader-0", config, clock=clock)
        self.follower = Log.open(directory / "follower-0", config, clock=clock)

    def fetch(self) -> None:
        data = b"".join(p.read_bytes() for p in sorted((self.dir / "leader-0").glob("*.log")))
        todo = [bytes(b.buf) for b in iter_batches(data)
                if b.base_offset >= self.follower.log_end_offset]  # fmt: skip
        while todo:
            n = self.rng.randint(1, 4)
            self.follower.append_as_follower(b"".join(todo[:n]))
            del todo[:n]

    def reopen_follower(self, clean: bool) -> None:
        if clean:
            self.follower.close()
        else:
            self.follower.flush()  # the process dies: no snapshot at the end, no close
            self.follower.close_handlers()
        self.follower = Log.open(self.dir / "follower-0", self.config, clock=self.clock)


def history(replica: Replica, rng: random.Random) -> dict[int, list[tuple[int, int, int]]]:
    """Appends of both producers to the leader, the follower fetching, truncating and
    reopening between them; returns each producer's batches (sequence, records, offset)."""
    sent: dict[int, list[tuple[int, int, int]]] = {p: [] for p in PRODUCERS}
    for _ in range(rng.randint(20, 100)):
        producer, records = rng.choice(PRODUCERS), rng.randint(1, 3)
        seq = sum(n for _, n, _ in sent[producer])
        info = replica.leader.append_as_leader(batch(producer, seq, records), 0)
        sent[producer].append((seq, records, info.first_offset))
        action = rng.random()
        if action < 0.2:
            replica.fetch()
        elif action < 0.25:
            replica.follower.truncate_to(rng.randint(0, replica.follower.log_end_offset))
        elif action < 0.28:
            replica.reopen_follower(clean=rng.random() < 0.5)
    replica.fetch()
    last = rng.random()  # and what happens just before it leads
    if last < 0.3:
        replica.reopen_follower(clean=last < 0.15)
    elif last < 0.6:
        replica.follower.truncate_to(rng.randint(0, replica.follower.log_end_offset))
        replica.fetch()
    return sent


@pytest.mark.parametrize("seed", range(60))
def test_a_follower_that_leads_answers_retries_as_duplicates(tmp_path: Path, seed: int) -> None:
    """The producer's last batch is always known (a snapshot keeps it, in Kafka too); the
    four before it are known unless a reload had to read them back from an older segment
    (then the retry is refused OUT_OF_ORDER_SEQUENCE_NUMBER, as Kafka refuses it): neither
    is written again."""
    rng = random.Random(seed)
    config = LogConfig.from_props({"segment.bytes": str(rng.choice([600, 1500, 4000, 1 << 20]))})
    replica = Replica(tmp_path, config, ManualClock(1_000_000), rng)
    try:
        _retries_are_duplicates(replica, history(replica, rng))
    finally:
        replica.leader.close()
        replica.follower.close()


def _retries_are_duplicates(replica: Replica, sent: dict[int, list[tuple[int, int, int]]]) -> None:
    new_leader = replica.follower
    for producer in PRODUCERS:
        in_flight = sent[producer][-5:]  # what librdkafka may retry
        for seq, records, offset in reversed(in_flight):
            end = new_leader.log_end_offset
            try:
                info = new_leader.append_as_leader(batch(producer, seq, records), 1)
            except OutOfOrderSequenceError:
                assert seq != in_flight[-1][0], (producer, seq)  # the last one is known
                continue
            assert info.duplicate and info.first_offset == offset, (producer, seq, info)
            assert new_leader.log_end_offset == end
