"""A follower as its leader sees it (Kafka's Replica and ReplicaState): its log start and end
offsets as its last Fetch said, when it last fetched, and the last time it was caught up
with the leader (what ISR shrinking reads)."""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass(slots=True)
class Replica:
    broker_id: int
    log_start_offset: int = UNKNOWN_OFFSET
    log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    broker_epoch: int | None = None

    @property
    def fetched(self) -> bool:
        """Whether it has fetched since this broker became its leader (reset says not)."""
        return self.log_end_offset != UNKNOWN_OFFSET

    def is_caught_up(self, leader_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return (leader_end_offset == self.log_end_offset
                or now_ms - self.last_caught_up_time_ms <= max_lag_ms)

    def update_fetch_state(self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int,
                           leader_end_offset: int, broker_epoch: int) -> None:
        """A Fetch from this follower at ``fetch_offset`` (its log end offset), answered when
        the leader's log ended at ``leader_end_offset``: caught up now if it asked for the
        leader's end, or as of its previous fetch if it reached what the leader had then."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms,
                                              self.last_fetch_time_ms)
        self.log_start_offset = log_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = max(leader_end_offset,
                                                    self.last_fetch_leader_log_end_offset)
        self.last_fetch_time_ms = fetch_time_ms
        self.broker_epoch = broker_epoch

    def reset(self, now_ms: int, leader_end_offset: int, is_new_leader: bool,
              in_sync: bool) -> None:
        """On becoming (or staying, at a new epoch) leader: an ISR member counts as caught up
        now, another as never, so it holds back neither the high watermark nor comes back
        into the ISR before it fetches."""
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        if is_new_leader:
            self.log_start_offset = self.log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
            self.last_fetch_time_ms = 0
            self.broker_epoch = None
        else:
            self.last_fetch_leader_log_end_offset = leader_end_offset
            self.last_fetch_time_ms = now_ms if in_sync else 0
