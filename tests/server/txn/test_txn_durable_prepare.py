"""In a cluster the transaction coordinator writes markers only once the ISR has the
Prepare* state (Kafka writes them in that append's callback): the state store's replication
is a future the test resolves. Unreplicated, nothing is marked and the transaction stays
prepared for the retry; replicated, markers follow and the transaction completes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from test_txn_coordinator import T0, T1, Harness, begin

from tidelog.protocol.errors import ErrorCode
from tidelog.server.coordinator.transaction.metadata import TransactionState


class ReplicatedHarness(Harness):
    """A state store whose writes replicate when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[asyncio.Future[ErrorCode]] = []
        self.state.durable = self._durable  # type: ignore[method-assign]

    def _durable(self, _tid: str) -> Awaitable[ErrorCode]:
        fut: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self.waits.append(fut)
        return fut


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_markers_wait_for_the_prepared_state_to_be_replicated() -> None:
    async def main() -> None:
        h = ReplicatedHarness()
        pid, epoch = begin(h)
        assert h.coord.end_txn("tx", pid, epoch, True) == ErrorCode.NONE
        await _settle()
        assert h.markers == []  # PrepareCommit written by the leader, not yet replicated
        assert h.state.transactions["tx"].state == TransactionState.PREPARE_COMMIT
        h.waits[0].set_result(ErrorCode.NONE)
        await _settle()
        assert sorted(h.markers) == [(T0, pid, 0, True), (T1, pid, 0, True)]
        assert h.state.transactions["tx"].state == TransactionState.COMPLETE_COMMIT

    asyncio.run(main())


def test_an_unreplicated_prepare_writes_no_marker_and_is_retried() -> None:
    async def main() -> None:
        h = ReplicatedHarness()
        pid, epoch = begin(h)
        assert h.coord.end_txn("tx", pid, epoch, False) == ErrorCode.NONE
        h.waits[0].set_result(ErrorCode.NOT_COORDINATOR)
        await _settle()
        meta = h.state.transactions["tx"]
        assert h.markers == [] and meta.state == TransactionState.PREPARE_ABORT and not meta.pending
        h.coord.abort_timed_out()  # the coordinator's periodic retry of prepared transactions
        h.waits[1].set_result(ErrorCode.NONE)
        await _settle()
        assert sorted(h.markers) == [(T0, pid, 0, False), (T1, pid, 0, False)]
        assert h.state.transactions["tx"].state == TransactionState.COMPLETE_ABORT

    asyncio.run(main())
