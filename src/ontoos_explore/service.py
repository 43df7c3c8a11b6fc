"""Service: source + role -> result envelope. What every surface calls.

    envelope = await explorer.explore({"dataset": "...", "fields": [...]}, role="analyst")

Compile (parse, bind, compile, guard), execute on PostgreSQL, and render the
success envelope (`ok`, `data`, `meta`); any refusal or failure becomes the error
envelope. Nothing raises out of `explore()`: an unexpected exception is
logged here with its traceback and answered as INTERNAL_ERROR.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from .compiler import CompiledQuery
from .contract import Contract
from .drift.state import LakeState
from .engine.executor import Executor, Outcome
from .envelope import Answer, new_id
from .errors import ExploreError, InternalError
from .evidence import render
from .offload import INLINE_SOURCE, off_loop, source_size
from .pipeline import compile_exploration, compiled_before, compile_page
from .require import Require, check, split
from .templates import TEMPLATES, TemplateCache

log = logging.getLogger("ontoos_explore.service")

__all__ = ["Answer", "Explorer", "cost_class", "new_id", "success_envelope", "plan_envelope"]


def success_envelope(q: CompiledQuery, out: Outcome, exploration_id: str,
                     now: dt.datetime | None = None) -> dict[str, Any]:
    """The answer: its rows, and what they are (meta), their evidence included (`evidence.render`, aged
    at `now`, by default the clock's)."""
    evidence = render(q.plan.evidence, out.batches, consistent=out.consistent,
                      now=now or dt.datetime.now(dt.timezone.utc), replay_lag_s=out.replay_lag_s)
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
            "evidence": evidence,
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


def plan_envelope(q: CompiledQuery, out: Outcome, exploration_id: str,
                  now: dt.datetime | None = None) -> dict[str, Any]:
    """A dry run: what would be read, by contract name, what it would cost, and the evidence it would carry."""
    # no rows are read: the batches are those the answer would read, never `fixed_read` with rows
    evidence = render(q.plan.evidence, out.batches, consistent=False, now=now or dt.datetime.now(dt.timezone.utc))
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
            "evidence": evidence,
        },
    }


class Explorer:
    def __init__(self, contract: Contract, executor: Executor, cache: TemplateCache | None = TEMPLATES,
                 lake: LakeState | None = None) -> None:
        self.contract = contract
        self.executor = executor
        self.cache = cache  # the template cache (None: every text takes the whole compile path)
        self.lake = lake if lake is not None else LakeState(contract)  # drift: what is unavailable

    async def explore(self, source: Any, role: str, *, dry_run: bool = False, require: Require | None = None,
                      offset: int = 0) -> Answer:
        """One exploration; `require` (or the JSON form's `require` key) is what its evidence must show;
        `offset`: the rows before this page, in the total order (`pages.py` says which)."""
        exploration_id = new_id()
        try:
            source, asked = split(source)
        except ExploreError as e:
            return Answer.refusal(e, exploration_id=exploration_id, contract_hash=self.contract.hash,
                                  notice=self.lake.notice_for(role))
        offload = source_size(source) > INLINE_SOURCE
        require = require or asked
        again = None  # a large source asked exactly as before: its query from the cache, no hand-off
        if offset:
            compile_ = lambda: compile_page(source, self.contract, role, offset)  # noqa: E731
        else:
            compile_ = lambda: compile_exploration(source, self.contract, role, self.cache)  # noqa: E731
            if offload:
                again = lambda: compiled_before(source, self.contract, role, self.cache)  # noqa: E731
        answer = await self._answer(compile_, dry_run, offload, require, exploration_id, role, again)
        if require is not None and answer.error is not None and answer.error.retry_with is not None:
            # the retry must ask what the caller asked: sent back unchanged, it must keep the requirement
            answer.error.retry_with = {**answer.error.retry_with, "require": require.to_json()}
            answer.envelope["error"]["retry_with"] = answer.error.retry_with
        return answer

    async def run_compiled(self, compiled: CompiledQuery, require: Require | None = None) -> Answer:
        """Run SQL compiled (and guarded) elsewhere: a named query."""
        role = getattr(getattr(compiled, "plan", None), "role", None)  # whatever it is, it is answered
        return await self._answer(lambda: compiled, False, require=require, role=role)

    async def _answer(self, compile_, dry_run: bool, offload: bool = False, require: Require | None = None,
                      exploration_id: str | None = None, role: str | None = None, again=None) -> Answer:
        """`offload`: compile on a worker thread (a large source), the event loop free meanwhile; the same
        result and the same exceptions as inline (the template cache is thread-safe), unless `again()`
        (inline) already has its query: handing a compile to the thread costs 0.1 ms of CPU and a
        thread's wake-up, a source asked again exactly costs a hash. An answer whose evidence cannot
        meet `require` is refused, its rows dropped, its evidence kept."""
        exploration_id = exploration_id or new_id()
        notice = self.lake.notice_for(role)
        compiled = None
        evidence = None
        try:
            compiled = again() if again is not None else None
            if compiled is None:
                compiled = await off_loop(compile_) if offload else compile_()
            unavailable = self.lake.refusal(compiled)
            if unavailable is not None:
                raise unavailable
            out = await self.executor.run(compiled, dry_run=dry_run)
            render = plan_envelope if dry_run else success_envelope
            envelope = render(compiled, out, exploration_id)
            evidence = envelope["meta"].get("evidence")
            check(require, evidence)
            return Answer.success(envelope, compiled, cost=out.cost, notice=notice)
        except ExploreError as e:
            return Answer.refusal(e, compiled, exploration_id=exploration_id, contract_hash=self.contract.hash,
                                  evidence=evidence, notice=notice)
        except Exception:
            log.exception("exploration %s failed unexpectedly", exploration_id)
            return Answer.refusal(InternalError(reason="UNEXPECTED"), compiled, exploration_id=exploration_id,
                                  contract_hash=self.contract.hash, notice=notice)
