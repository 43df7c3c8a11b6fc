"""Policy stage: Exploration + Contract + role -> BoundExploration.

    bound = bind(exploration, contract, contract.role("analyst"))

The budget rules run first (they need no names), then the binding rules in
order; the first refusal raises. See budgets.py and rules.py for the rows.
"""

from __future__ import annotations

from ..contract import Contract, Role
from ..ir import Exploration
from .bound import BoundExploration, Col
from .budgets import BUDGET_RULES
from .rules import RULES
from .paging import tiebreak
from .plans import plan_for
from .scope import Binding

__all__ = ["bind", "BoundExploration"]


def bind(exploration: Exploration, contract: Contract, role: Role) -> BoundExploration:
    """A parsed exploration (its shape checked by the parse stage) -> the plan, or the first refusal."""
    for rule in BUDGET_RULES:
        rule(exploration, role)
    b = Binding(exploration, contract, role)
    for rule in RULES:
        rule(b)
    keys, pageable = tiebreak(b)
    return BoundExploration(
        root=b.root,
        joins=tuple(b.joins),
        fields=b.fields,
        where=b.where,
        always=b.always,
        group_by=b.group_by,
        order_by=b.order_by,
        limit=b.limit,
        limit_written=exploration.limit is not None,
        plan=_plan(b, contract, role),
        notes=tuple(b.notes),
        reads=frozenset(b.reads),
        implied=tuple(b.implied),
        tiebreak=keys,
        pageable=pageable,
    )


def _plan(b: Binding, contract: Contract, role: Role):
    """The plan: the budgets, the cost ceiling, and the contract columns each output position reads."""
    by_alias = b.datasets
    sources = []
    for f in b.fields:
        col = f.expr if isinstance(f.expr, Col) else f.expr.col
        sources.append(() if col is None else (by_alias[col.source.alias].column(col.name),))
    return plan_for(contract, role, [by_alias[s.alias] for s in b.sources()], b.row_cap, role.timeout_ms, sources)
