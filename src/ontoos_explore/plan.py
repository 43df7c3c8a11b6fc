"""Plan: what running one query needs, as policy decided it -> read by the compiler, the executor, the registry.

Policy makes a `Plan` for every query it lets through, explorations and
named queries alike (`policy.plans.plan_for`): the role, the row and time
budgets, the cost ceiling (the role's `max_cost`, or the contract's
`heavy_max_cost` when a heavy dataset is read), which output positions read
a column callers may not see (masked in the answer: defense in depth), and
what a refusal for cost may suggest filtering on, and which sources of the
publish log the answer's evidence reads (`evidence.spec_for`). The compiler copies it into the
`CompiledQuery` unchanged; the executor reads only it and its own deployment
settings, never the contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .evidence import EvidenceSpec


@dataclass(frozen=True, slots=True)
class Plan:
    role: str  # the contract role (the executor maps it to a database role)
    max_rows: int  # the row budget: the query returns at most this, fetching one more to see truncation
    timeout_ms: int
    max_cost: float | None  # the planner-cost ceiling checked before running; None: not checked
    masked: frozenset[int] = frozenset()  # output positions that read a column callers may not see
    cost_hints: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (dataset, columns a cost refusal suggests)
    evidence: EvidenceSpec | None = None  # the publish log's sources to read with the rows (None: no log)

    def hint_columns(self, dataset: str) -> tuple[str, ...]:
        return next((cols for name, cols in self.cost_hints if name == dataset), ())
