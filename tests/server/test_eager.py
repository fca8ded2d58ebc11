"""server/eager.py: a handler's first step runs at once; one that suspends goes on as a task
in the same context, cancellable, its errors kept."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from tidelog.server import eager

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("eager_test", default="unset")


def test_a_coroutine_that_never_suspends_is_done_before_the_loop_turns() -> None:
    ran: list[str] = []

    async def handler() -> int:
        ran.append("ran")
        VAR.set("inside")
        return 7

    async def main() -> None:
        fut = eager.start(handler())
        assert ran == ["ran"]  # no turn of the loop needed
        assert fut.done() and fut.result() == 7
        assert VAR.get() == "unset"  # its context is its own

    asyncio.run(main())


def test_an_error_before_suspending_is_the_futures_exception() -> None:
    async def handler() -> None:
        raise ValueError("bad request")

    async def main() -> None:
        fut = eager.start(handler())
        assert fut.done()
        with pytest.raises(ValueError, match="bad request"):
            fut.result()

    asyncio.run(main())


def test_a_suspended_coroutine_goes_on_in_the_same_context() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate: asyncio.Future[str] = loop.create_future()
        seen: list[str] = []

        async def handler() -> str:
            VAR.set("request")
            got = await gate
            await asyncio.sleep(0)  # a bare yield on the way
            seen.append(VAR.get())
            return got + "!"

        fut = eager.start(handler())
        assert not fut.done()
        assert VAR.get() == "unset"
        loop.call_soon(gate.set_result, "answer")
        assert await fut == "answer!"
        assert seen == ["request"]

    asyncio.run(main())


def test_an_error_of_the_awaited_future_reaches_the_coroutine() -> None:
    async def main() -> None:
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        caught: list[str] = []

        async def handler() -> str:
            try:
                await gate
            except OSError as exc:
                caught.append(str(exc))
                return "handled"
            return "not reached"

        fut = eager.start(handler())
        gate.set_exception(OSError("disk"))
        assert await fut == "handled"
        assert caught == ["disk"]

    asyncio.run(main())


def test_cancelling_the_task_cancels_the_coroutine_where_it_waits() -> None:
    async def main() -> None:
        gate: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        cleaned: list[bool] = []

        async def handler() -> None:
            try:
                await gate
            finally:
                cleaned.append(True)

        fut = eager.start(handler())
        await asyncio.sleep(0)
        fut.cancel()
        with pytest.raises(asyncio.CancelledError):
            await fut
        assert cleaned == [True]
        assert gate.cancelled()  # the task cancelled what it waited on, as a task does

    asyncio.run(main())


def test_two_started_coroutines_may_wait_on_one_future() -> None:
    """A future the first one waits on is not left marked as awaited before its task runs
    (asyncio would refuse the second: "await wasn't used with future")."""

    async def main() -> None:
        gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def handler(n: int) -> int:
            return await gate + n

        first, second = eager.start(handler(1)), eager.start(handler(2))
        gate.set_result(40)
        assert (await first, await second) == (41, 42)

    asyncio.run(main())


def test_on_done_runs_once_when_the_coroutine_ends_whichever_way() -> None:
    """The connection takes a request's completion time here (RequestMetrics' LocalTimeMs):
    at the end of the handler, before its future is done, once, on each path."""
    async def main() -> None:
        loop = asyncio.get_running_loop()
        gate: asyncio.Future[None] = loop.create_future()
        ends: list[str] = []

        async def quick() -> int:
            return 1

        async def failing() -> None:
            raise ValueError("bad")

        async def slow() -> str:
            await gate
            ends.append("slow body ended")
            return "late"

        fut = eager.start(quick(), loop, lambda: ends.append("quick"))
        assert ends == ["quick"] and fut.result() == 1
        fut2 = eager.start(failing(), loop, lambda: ends.append("failing"))
        assert ends[-1] == "failing" and isinstance(fut2.exception(), ValueError)
        task = eager.start(slow(), loop, lambda: ends.append(f"slow, done={task.done()}"))
        assert ends[-1] == "failing"  # suspended: not ended
        gate.set_result(None)
        assert await task == "late"
        assert ends[-2:] == ["slow body ended", "slow, done=False"]
        never: asyncio.Future[None] = loop.create_future()
        cancelled = eager.start(never, loop, lambda: ends.append("cancelled"))  # a plain task
        await asyncio.sleep(0)
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        assert ends[-1] == "cancelled" and ends.count("cancelled") == 1
        parked = eager.start(_wait(loop.create_future()), loop, lambda: ends.append("parked"))
        await asyncio.sleep(0)
        parked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await parked
        assert ends[-1] == "parked" and ends.count("parked") == 1

    asyncio.run(main())


async def _wait(fut: asyncio.Future[None]) -> None:
    await fut


def test_begin_answers_a_coroutine_that_ends_at_once_without_a_future() -> None:
    async def value() -> int:
        return 7

    async def fails() -> None:
        raise ValueError("bad request")

    async def waits(gate: asyncio.Future[int]) -> int:
        return await gate + 1

    async def main() -> None:
        loop = asyncio.get_running_loop()
        assert eager.begin(value(), loop) == (None, 7, None)
        task, result, error = eager.begin(fails(), loop)
        assert task is None and result is None and isinstance(error, ValueError)
        gate: asyncio.Future[int] = loop.create_future()
        task, result, error = eager.begin(waits(gate), loop)
        assert task is not None and not task.done() and result is None and error is None
        gate.set_result(1)
        assert await task == 2

    asyncio.run(main())


def test_begin_sets_a_variable_in_the_coroutines_context_only() -> None:
    async def reads() -> str:
        return VAR.get()

    async def waits(gate: asyncio.Future[None]) -> str:
        await gate
        return VAR.get()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        assert eager.begin(reads(), loop, None, VAR, "request") == (None, "request", None)
        gate: asyncio.Future[None] = loop.create_future()
        task, _, _ = eager.begin(waits(gate), loop, None, VAR, "later")
        assert task is not None and VAR.get() == "unset"
        gate.set_result(None)
        assert await task == "later" and VAR.get() == "unset"
        fut = asyncio.ensure_future(reads())  # not a coroutine: an ordinary task, same context
        task, _, _ = eager.begin(asyncio.shield(fut), loop)
        assert task is not None and await task == "unset"

    asyncio.run(main())
