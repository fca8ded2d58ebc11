"""Eager start of a request's handler: its first step runs at once, in the caller's turn of
the loop, as Python 3.12's ``asyncio.eager_task_factory`` does (3.11, which tidelog
supports, has none).

A task created the usual way starts on a later turn of the loop, behind every callback
already queued; a 1-record produce, which never suspends, then waits for the handlers of
the other requests read in the same turn before it even begins, and its answer waits one
more turn. Started eagerly it is answered in the turn that read it. A handler that does
suspend continues as an ordinary task from the future it waits on, in the same context.
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar, cast

T = TypeVar("T")
V = TypeVar("V")


def start(aw: Awaitable[T], loop: asyncio.AbstractEventLoop | None = None,
          on_done: Callable[[], object] | None = None) -> asyncio.Future[T]:
    """Run a coroutine up to its first suspension now, in a copy of the current context.
    Returns a done future when it finished (or raised) without suspending, else the task
    that goes on with it (any other awaitable: an ordinary task). ``loop``: the running
    loop, when the caller has it at hand. ``on_done``: called the moment the coroutine
    ends (returns or raises), before its future is done."""
    if loop is None:
        loop = asyncio.get_running_loop()
    task, result, error = begin(aw, loop, on_done)
    if task is not None:
        return task
    done: asyncio.Future[T] = loop.create_future()
    if error is not None:
        done.set_exception(error)  # the task's exception, as a task keeps it
    else:
        done.set_result(cast(T, result))
    return done


def begin(aw: Awaitable[T], loop: asyncio.AbstractEventLoop | None = None,
          on_done: Callable[[], object] | None = None,
          var: contextvars.ContextVar[V] | None = None, value: V | None = None,
          ) -> tuple[asyncio.Future[T] | None, T | None, BaseException | None]:
    """``start`` without a future for a coroutine that ends at once (the caller's fast
    path): ``(task, None, None)`` when it suspended (any other awaitable: an ordinary
    task), else ``(None, result, None)`` or ``(None, None, exception)``. ``var``: set to
    ``value`` in the coroutine's context only (the caller's stays as it was)."""
    context = contextvars.copy_context()
    if var is not None:
        context.run(var.set, value)  # type: ignore[arg-type]
    # a native coroutine (every handler's): a type check, not isinstance against the ABC
    if type(aw) is not types.CoroutineType and not isinstance(aw, Coroutine):
        aw = aw if on_done is None else _then(aw, on_done)
        return context.run(asyncio.ensure_future, aw), None, None
    coro: Coroutine[Any, Any, T] = aw
    try:
        first = context.run(coro.send, None)
    except StopIteration as stop:
        if on_done is not None:
            on_done()
        return None, stop.value, None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # the task's exception, as a task keeps it
        if on_done is not None:
            on_done()
        return None, None, exc
    if first is not None:
        # what a task does with a future it is handed: the flag marks it as being awaited,
        # and another coroutine awaiting it before our task runs would be refused
        first._asyncio_future_blocking = False
    if loop is None:
        loop = asyncio.get_running_loop()
    return asyncio.Task(_rest(coro, first, on_done), loop=loop, context=context), None, None


async def _then(aw: Awaitable[T], on_done: Callable[[], object]) -> T:
    try:
        return await aw
    finally:
        on_done()


@types.coroutine
def _rest(coro: Coroutine[Any, Any, T], waiting: Any,
          on_done: Callable[[], object] | None = None) -> Generator[Any, Any, T]:
    """The rest of a started coroutine, for a task: hands the task the future the coroutine
    waits on (None: a bare yield, e.g. asyncio.sleep(0)), then passes what the task sends or
    throws on to the coroutine; ``on_done`` once it ended."""
    try:
        if waiting is not None:
            waiting._asyncio_future_blocking = True  # the task waits on it, as if yielded
        while True:
            try:
                sent = yield waiting
            except BaseException as exc:  # a cancellation: thrown on
                try:
                    waiting = coro.throw(exc)
                except StopIteration as stop:
                    thrown_result: T = stop.value
                    return thrown_result
                continue
            try:
                waiting = coro.send(sent)
            except StopIteration as stop:
                result: T = stop.value
                return result
    finally:
        if on_done is not None:
            on_done()
