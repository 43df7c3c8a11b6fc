"""Server: a request whose client went away is cancelled, in its own task, with no watcher per request.

Starlette and uvicorn do not cancel a handler when its client leaves; an application that wants to
must read its ASGI channel until `http.disconnect`, which takes a second task for every request. Here
the HTTP protocol says it instead: `connections.GuardedHttp` puts a list in each request's scope
(`GONE_KEY`) and, when the connection is lost before the request's answer is complete, calls what the
list holds. `unless_gone(scope, work)` awaits `work` in the request's task and registers, for as long,
a callback that cancels that task: the executor then cancels the query on PostgreSQL, `Tools.call`
records the call as CANCELLED, and `unless_gone` answers None (nobody is there to answer). A
cancellation that is not the client's (the server stopping) goes on as it came.

A server that does not put the list in the scope (an in-process transport) gets the work alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

GONE_KEY = "ontoos.gone"  # in a request's ASGI scope: what to call when its client leaves before the answer

T = TypeVar("T")


async def unless_gone(scope: dict[str, Any], work: Awaitable[T]) -> T | None:
    """`await work`, or None when the request's client left first (the work is cancelled)."""
    callbacks = scope.get(GONE_KEY)
    task = asyncio.current_task()
    if callbacks is None or task is None:
        return await work
    left = False

    def cancel() -> None:
        nonlocal left
        left = True
        task.cancel()

    callbacks.append(cancel)
    try:
        return await work
    except asyncio.CancelledError:
        if left and task.uncancel() == 0:  # the client's leaving, and nothing else, cancelled it
            return None
        raise
    finally:
        callbacks.remove(cancel)


def left(scope: dict[str, Any]) -> None:
    """The client of the request of `scope` has gone: what waits on it is cancelled (the protocol calls this)."""
    for callback in list(scope.get(GONE_KEY) or ()):
        callback()
