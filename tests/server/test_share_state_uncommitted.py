"""Share state writes in a cluster (``confirm_writes``): later writes build on an unreplicated
one at once, reads answer the replicated state, a replicated wait commits the writes it
covers, a failed one takes their keys back to the committed state, dropping the writes made
on top, and a resignation forgets them."""

from __future__ import annotations

import uuid

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.share.shard import ShareCoordinatorShard
from tidelog.server.coordinator.share.state_coordinator import ShareStateCoordinator
from tidelog.server.coordinator.store import InMemoryOffsetsStore
from tidelog.util.clock import ManualClock

TOPIC = uuid.UUID("11111111-2222-3333-4444-555555555555")
KEY = ("g", TOPIC, 0)
N = 3


def _coord() -> tuple[ShareStateCoordinator, InMemoryOffsetsStore, int]:
    store = InMemoryOffsetsStore()
    c = ShareStateCoordinator(store, N, ManualClock())
    for p in range(N):
        c.load_now(p)
    c.confirm_writes = True
    return c, store, c.partition_for(KEY)


def _start(c: ShareStateCoordinator) -> int:
    r = c.read(KEY, 0)
    assert r.error == ErrorCode.NONE and r.state is not None
    return r.state.start_offset


def test_reads_answer_the_replicated_state_and_writes_build_on_the_latest() -> None:
    c, store, p = _coord()
    assert c.write(KEY, 0, 0, 100, ((100, 104, 2, 1),)) == ErrorCode.NONE
    assert _start(c) == -1  # appended, not replicated: nothing stored yet to a reader
    first = store.next_offsets[p]
    assert c.write(KEY, 0, 0, -1, ((105, 106, 2, 1),)) == ErrorCode.NONE  # merges into 100
    c.complete(p, first, True)
    assert _start(c) == 100 and c.summary(KEY).state.batches == ((100, 104, 2, 1),)  # type: ignore[union-attr]
    c.complete(p, None, True)
    assert c.summary(KEY).state.batches == ((100, 106, 2, 1),)  # type: ignore[union-attr]
    assert c.uncommitted.committed == {} and c.uncommitted.pending == {}


def test_a_failed_write_goes_back_to_the_committed_state_with_the_writes_on_top() -> None:
    c, store, p = _coord()
    assert c.write(KEY, 0, 0, 100, ((100, 104, 2, 1),)) == ErrorCode.NONE
    c.complete(p, None, True)
    assert c.write(KEY, 0, 0, 200, ()) == ErrorCode.NONE
    failed_end = store.next_offsets[p]
    assert c.write(KEY, 0, 0, 300, ()) == ErrorCode.NONE
    c.complete(p, failed_end, False)  # the write of 200 timed out
    assert _start(c) == 100 and c.states[KEY].start_offset == 100  # 300 built on it: gone too
    assert c.write(KEY, 0, 0, 400, ()) == ErrorCode.NONE  # builds on the committed state
    c.complete(p, None, True)
    assert _start(c) == 400


def test_an_unreplicated_first_write_and_a_resignation_leave_nothing() -> None:
    c, _, p = _coord()
    assert c.write(KEY, 0, 0, 100, ()) == ErrorCode.NONE
    c.complete(p, None, False)
    assert KEY not in c.states and _start(c) == -1
    assert c.write(KEY, 0, 0, 100, ()) == ErrorCode.NONE
    ShareCoordinatorShard(c).on_unloaded(p)  # resigned: the runtime unloads the shard
    assert c.uncommitted.committed == {} and c.uncommitted.pending == {}
