"""Offload: CPU work a request can make large -> a worker thread, the event loop free meanwhile.

    compiled = await off_loop(lambda: compile_exploration(source, contract, role))

What a request's size can make long (compiling a large source, parsing a long
GET filter, rendering the audit event of a large refusal) runs here when the
request is over `INLINE_SOURCE` characters (`source_size`, a bounded count);
everything smaller runs inline, where it costs less than the hand-off. So does
what a large request does not make long: its source asked again exactly (a
hash finds the query it compiled to, `pipeline.compiled_before`), and the
audit event of an answer that has a query (nothing of the source rendered).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

# Compiling costs about 10-15 us a character of source on the whole path (a 64 KB text about a second), and
# it is CPU: on the event loop it held every other request (a /healthz) for as long. A source over
# INLINE_SOURCE characters compiles on a worker thread; a smaller one inline, since handing it to a thread
# costs 0.1-0.3 ms and a small compile (most are template-cache hits, 2-200 us) less. One worker: the GIL
# runs one thread at a time, so a second adds no throughput, and each thread competing for it makes the
# event loop wait longer for its turn (with four clients compiling at the limits, /healthz took a median
# of 2 s inline, 45-55 ms with two workers, 20-30 ms with one).
INLINE_SOURCE = 1024
_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ontoos-offload")


def source_size(source: Any, most: int = INLINE_SOURCE) -> int:
    """About how many characters `source` is (a text's length; a JSON form's strings, and 4 a scalar),
    counted only up to past `most`: a bounded walk, never the whole of a large request."""
    if isinstance(source, str):
        return len(source)
    size, stack = 0, [source]
    while stack and size <= most:
        v = stack.pop()
        if isinstance(v, str):
            size += len(v)
        elif isinstance(v, dict):
            size += 4 * len(v)
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            size += len(v)
            stack.extend(v)
        else:
            size += 4
    return size


async def off_loop(fn: Callable[[], T]) -> T:
    """`fn()` on the worker thread, in the caller's context (its context variables); its result, or
    what it raised."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_WORKER, context.run, fn)
