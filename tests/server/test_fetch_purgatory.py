"""The fetch purgatory tells a woken fetch which partitions fired, including those that
fired after the wake-up and before it ran; a timeout is an empty set."""

from __future__ import annotations

import asyncio

from tidelog.server.purgatory import FetchPurgatory
from tidelog.util.topic_partition import TopicPartition

A, B, C = (TopicPartition("t", i) for i in range(3))


def test_the_woken_fetch_learns_every_partition_that_fired_before_it_ran() -> None:
    async def main() -> None:
        purgatory = FetchPurgatory()
        waiting = asyncio.ensure_future(purgatory.wait([A, B, C], 10_000))
        await asyncio.sleep(0)
        assert len(purgatory) == 3
        assert purgatory.check_and_complete(A) == 1
        assert purgatory.check_and_complete(C) == 0  # woken already: not counted again
        assert await waiting == {A, C}
        assert len(purgatory) == 0

    asyncio.run(main())


def test_a_timeout_is_an_empty_set() -> None:
    async def main() -> None:
        purgatory = FetchPurgatory()
        assert await purgatory.wait([A], 1) == set()
        assert await purgatory.wait([A], 0) == set()
        assert len(purgatory) == 0

    asyncio.run(main())
