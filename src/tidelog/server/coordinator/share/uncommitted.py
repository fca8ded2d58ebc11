"""Share states written but not yet replicated (Kafka's coordinator runtime, which applies a
write to the shard's in-memory state at once, lets reads see only the last committed state,
and reverts to it when the write fails).

In a cluster a share coordinator's write is an acks=all append to ``__share_group_state``.
Later writes build on it at once (they merge into the latest state), but
ReadShareGroupState and ReadShareGroupStateSummary answer from the state as the ISR has it; a
write that is not replicated (timed out, leadership lost) takes its key back to that state,
dropping the writes made on top of it.
"""

from __future__ import annotations

import uuid

from tidelog.server.coordinator.share.records import ShareState

StateKey = tuple[str, uuid.UUID, int]  # group, topic id, partition
Pending = tuple[int, StateKey, ShareState | None]  # end offset of the write, key, its state


class UncommittedStates:
    def __init__(self) -> None:
        # the committed state of each key with writes in flight (None: no state)
        self.committed: dict[StateKey, ShareState | None] = {}
        self.pending: dict[int, list[Pending]] = {}  # per __share_group_state partition

    def staged(self, partition: int, end_offset: int, key: StateKey,
               before: ShareState | None, after: ShareState | None) -> None:  # fmt: skip
        self.committed.setdefault(key, before)
        self.pending.setdefault(partition, []).append((end_offset, key, after))

    def view(self, key: StateKey, latest: ShareState | None) -> ShareState | None:
        """What a read answers: the committed state."""
        return self.committed.get(key, latest)

    def complete(self, partition: int, up_to: int | None, replicated: bool,
                 states: dict[StateKey, ShareState]) -> None:  # fmt: skip
        """The wait for ``partition``'s writes up to ``up_to`` (None: all so far) ended:
        replicated, their states are committed; not, their keys go back to the committed
        state in ``states`` (the latest), with the later writes of those keys."""
        entries = self.pending.pop(partition, [])
        done = [e for e in entries if up_to is None or e[0] <= up_to]
        left = [e for e in entries if up_to is not None and e[0] > up_to]
        if replicated:
            for _, key, after in done:  # in log order: the last one is committed
                self.committed[key] = after
            for key in {k for _, k, _ in done} - {k for _, k, _ in left}:
                del self.committed[key]  # the latest is the committed one now
        else:
            failed = {k for _, k, _ in done}
            for key in failed:
                before = self.committed.pop(key)
                if before is None:
                    states.pop(key, None)
                else:
                    states[key] = before
            left = [e for e in left if e[1] not in failed]
        if left:
            self.pending[partition] = left

    def forget(self, partition: int, keys: list[StateKey]) -> None:
        """The partition is no longer coordinated here."""
        self.pending.pop(partition, None)
        for key in keys:
            self.committed.pop(key, None)
