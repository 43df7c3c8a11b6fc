"""Server, recording a call: its audit event, its metrics and its request line, once per answer.

`Tools` records every answer through `record` (a surface's own refusal too, through `Tools.refuse`).
The audit event is queued at once, before the answer can leave: every answer a client received is
in the audit, even if the process is killed the next instant (the queue is on local disk, the
spool). Around a surface's call and the send of its answer, `counted_after_send()` holds back only
what may be lost with the process (the metrics' count and the request line): a direct MCP call and
the REST tool routes send, then count, in the same step of the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from typing import Any

from ..envelope import Answer
from ..offload import off_loop
from . import logs
from .config import Principal
from .metrics import tool_label
from .tool_models import QUERY_PREFIX, TOOLS

log = logging.getLogger("ontoos_explore.audit")


class _Later(list):
    """The counts of the calls a surface answers in a `counted_after_send` block, made as it ends;
    `open` until then (a task the block started, with a copy of its context, may answer later: counted
    at once)."""

    __slots__ = ("open",)


_LATER: contextvars.ContextVar[_Later | None] = contextvars.ContextVar("ontoos_later", default=None)


@contextlib.contextmanager
def counted_after_send():
    """Around a surface's call and the sending of its answer: the call's count in the metrics and its
    request line are made as the block ends, however it ends, so the answer leaves first (its audit
    event never waits: `Recording.record`). Nothing runs between a send that does not wait (the answer
    goes to the socket's buffer) and the count."""
    later = _Later()
    later.open = True
    token = _LATER.set(later)
    try:
        yield
    finally:
        _LATER.reset(token)
        later.open = False
        for count in later:
            count()


class Recording:
    """What `Tools` records with: its `contract` (an event's), `audit` (the writer, or None) and
    `metrics` (a `metrics.Metrics`, or None)."""

    contract: Any
    audit: Any
    metrics: Any

    def record(self, answer: Answer, principal: Principal | None, surface: str, source: Any, tool: Any = None,
               seconds: float | None = None) -> None:
        """An answer, into the audit (at once) and the metrics (`tool`: the tool called, None for a
        surface's own refusal; `seconds`: a call's time; inside a `counted_after_send` block, as the
        block ends)."""
        if self.audit is not None:
            self._queue(self._event(answer, principal, surface, source))
        self._counted(answer, surface, tool, seconds, principal)

    def _counted(self, answer: Answer, surface: str, tool: Any, seconds: float | None,
                 principal: Principal | None) -> None:
        """The answer's count: now, or as the `counted_after_send` block around it ends."""
        later = _LATER.get()
        if later is not None and later.open:
            later.append(functools.partial(self._count, answer, surface, tool, seconds, principal))
        else:
            self._count(answer, surface, tool, seconds, principal)

    def _count(self, answer: Answer, surface: str, tool: Any, seconds: float | None,
               principal: Principal | None = None) -> None:
        """The answer in the metrics, and its request line when the logs are JSON; a failure is logged:
        the metrics never break an answer."""
        try:
            label = "none" if tool is None else tool_label(tool, TOOLS, QUERY_PREFIX)
            if self.metrics is not None:
                self.metrics.answered(surface, label, answer, seconds)
            logs.request(answer, principal, surface, label, seconds)
        except Exception:
            log.exception("could not count an answer")

    def _event(self, answer: Answer, principal: Principal | None, surface: str, source: Any) -> Any:
        """The answer's audit event, or None if it could not be built (logged: the audit must never break
        an answer). Touches nothing shared: safe on the worker thread."""
        from ..governance.audit import event_for

        try:
            return event_for(answer, principal=principal.name if principal else None,
                             role=principal.role if principal else None, surface=surface,
                             source=source, contract=self.contract)
        except Exception:
            log.exception("could not record an event")
            return None

    def _queue(self, event: Any) -> None:
        if event is None:
            return
        try:
            self.audit.record(event)  # its text is made storable (NUL, lone surrogates) as it is written
        except Exception:  # the audit must never break an answer
            log.exception("could not record an event")

    async def _record_off_loop(self, answer: Answer, principal: Principal | None, surface: str, source: Any) -> None:
        """The event of a large request renders its exploration (a refusal's, up to 64 KB): built on the
        worker thread, queued on the loop (the writer's queue is the loop's) when it is built, even if
        the call is cancelled meanwhile (the client left): never lost."""
        built = asyncio.ensure_future(off_loop(lambda: self._event(answer, principal, surface, source)))
        built.add_done_callback(lambda t: self._queue(t.result()) if not t.cancelled() and not t.exception() else None)
        await asyncio.shield(built)
