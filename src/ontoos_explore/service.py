"""Service: source + role -> result envelope. What every surface calls.

    envelope = await explorer.explore({"dataset": "...", "fields": [...]}, role="analyst")

Compile (parse, bind, compile, guard), execute on PostgreSQL, and render the
success envelope (`ok`, `data`, `meta`); any refusal or failure becomes the error
envelope. Nothing raises out of `explore()`: an unexpected exception is
logged here with its traceback and answered as INTERNAL_ERROR.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .compiler import CompiledQuery
from .contract import Contract
from .engine.executor import Executor, Outcome
from .envelope import Answer, new_id
from .errors import ExploreError, InternalError
from .pipeline import compile_exploration
from .templates import TEMPLATES, TemplateCache

log = logging.getLogger("ontoos_explore.service")

# Compiling costs about 10-15 us a character of source on the whole path (a 64 KB text about a second), and
# it is CPU: on the event loop it held every other request (a /healthz) for as long. A source over
# INLINE_SOURCE characters compiles on a worker thread; a smaller one inline, since handing it to a thread
# costs 0.1-0.3 ms and a small compile (most are template-cache hits, 2-200 us) less. One worker: the GIL
# runs one thread at a time, so a second adds no throughput, and each thread competing for it makes the
# event loop wait longer for its turn (with four clients compiling at the limits, /healthz took a median
# of 2 s inline, 45-55 ms with two workers, 20-30 ms with one).
INLINE_SOURCE = 1024
_COMPILES = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ontoos-compile")


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

__all__ = ["Answer", "Explorer", "cost_class", "new_id", "success_envelope", "plan_envelope"]


def success_envelope(q: CompiledQuery, out: Outcome, exploration_id: str) -> dict[str, Any]:
    return {
        "ok": True,
        "data": {"columns": list(q.columns), "rows": out.rows},
        "meta": {
            "exploration_id": exploration_id,
            "fingerprint": q.fingerprint,
            "rows": len(out.rows),
            "truncated": out.truncated,
            "limit": q.limit,
            "elapsed_ms": out.elapsed_ms,
            "masked_columns": out.masked_columns,
            "notes": list(q.notes),
            "contract_hash": q.contract_hash,
        },
    }


# A dry run says how the planner's estimate compares with the budget, never the figure: it depends on
# rows the caller may not see (a value only in always-filtered rows costs more than an absent one).
COST_CLASSES = ((0.1, "low"), (0.5, "moderate"), (1.0, "high"))


def cost_class(cost: float | None, ceiling: float | None) -> str:
    """The estimate as a fraction of the ceiling, coarsely: low, moderate, high, over (or unchecked)."""
    if cost is None or ceiling is None:
        return "unchecked"
    return next((name for bound, name in COST_CLASSES if cost <= bound * ceiling), "over")


def plan_envelope(q: CompiledQuery, out: Outcome, exploration_id: str) -> dict[str, Any]:
    """A dry run: what would be read, by contract name, and what it would cost."""
    return {
        "ok": True,
        "data": {
            "plan": {
                "datasets": list(q.datasets),
                "relations": list(q.relations),
                "columns": list(q.columns),
                "limit": q.limit,
                "within_budget": q.plan.max_cost is None or (out.cost or 0.0) <= q.plan.max_cost,
                "cost_class": cost_class(out.cost, q.plan.max_cost),
                "max_cost": q.plan.max_cost,
                "timeout_ms": q.plan.timeout_ms,
            }
        },
        "meta": {
            "exploration_id": exploration_id,
            "fingerprint": q.fingerprint,
            "dry_run": True,
            "notes": list(q.notes),
            "contract_hash": q.contract_hash,
        },
    }


class Explorer:
    def __init__(self, contract: Contract, executor: Executor, cache: TemplateCache | None = TEMPLATES) -> None:
        self.contract = contract
        self.executor = executor
        self.cache = cache  # the template cache (None: every text takes the whole compile path)

    async def explore(self, source: Any, role: str, *, dry_run: bool = False) -> Answer:
        offload = source_size(source) > INLINE_SOURCE
        return await self._answer(lambda: compile_exploration(source, self.contract, role, self.cache), dry_run,
                                  offload)

    async def run_compiled(self, compiled: CompiledQuery) -> Answer:
        """Run SQL compiled (and guarded) elsewhere: a named query."""
        return await self._answer(lambda: compiled, False)

    async def _answer(self, compile_, dry_run: bool, offload: bool = False) -> Answer:
        """`offload`: compile on a worker thread (a large source), the event loop free meanwhile; the same
        result and the same exceptions as inline (the template cache is thread-safe)."""
        exploration_id = new_id()
        compiled = None
        try:
            if offload:
                context = contextvars.copy_context()
                compiled = await asyncio.get_running_loop().run_in_executor(_COMPILES, context.run, compile_)
            else:
                compiled = compile_()
            out = await self.executor.run(compiled, dry_run=dry_run)
            render = plan_envelope if dry_run else success_envelope
            return Answer.success(render(compiled, out, exploration_id), compiled, cost=out.cost)
        except ExploreError as e:
            return Answer.refusal(e, compiled, exploration_id=exploration_id, contract_hash=self.contract.hash)
        except Exception:
            log.exception("exploration %s failed unexpectedly", exploration_id)
            return Answer.refusal(InternalError(reason="UNEXPECTED"), compiled, exploration_id=exploration_id,
                                  contract_hash=self.contract.hash)
