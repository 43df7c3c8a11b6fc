"""Compile stage: BoundExploration -> CompiledQuery (SQL text, `$n` params, fingerprint).

The compiler applies no policy: it reads only the bound plan.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ..plan import Plan
from ..policy.bound import BoundExploration
from ..types import Value
from . import fingerprint as fp
from .sqlgen import generate


@dataclass(frozen=True, slots=True)
class ParamSlot:
    """What `$n` stands for: the column it is compared with (as the exploration
    writes it), its type, whether the caller wrote it (False: a contract
    always-filter value), and the contract dataset and column it meets."""

    column: str
    type: str
    caller: bool
    dataset: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True)
class CompiledQuery:
    sql: str  # exactly the text the guard checks and the executor runs
    params: tuple[Value, ...]  # $1..$n, in order
    slots: tuple[ParamSlot, ...]
    fingerprint: str
    shape: str  # the exploration with literals removed (what the fingerprint hashes)
    normalized: str  # the exploration in canonical text form, literals included
    columns: tuple[str, ...]  # output column names, in the order asked
    datasets: tuple[str, ...]  # contract names of the datasets read: the root, then each joined one
    relations: tuple[str, ...]  # contract names of the relations followed, in order
    limit: int  # rows returned at most; the SQL fetches one more
    notes: tuple[str, ...]
    plan: Plan  # policy's: budgets, cost ceiling, masked output positions
    reads: frozenset[tuple[str, str]] = field(default_factory=frozenset)  # (dataset, column) the caller named
    touches: frozenset[tuple[str, str, str]] = field(default_factory=frozenset)  # (schema, table, column) in the SQL
    contract_hash: str = ""
    # contract names of the parents the contract itself joins (exists_with), in join order: read to hide
    # a child's rows, never named by the caller (not in `datasets`, the text, shape or fingerprint)
    parents: tuple[str, ...] = ()
    pageable: bool = False  # its order is total: a truncated answer may be continued (policy/paging.py)
    offset: int = 0  # the rows before this page

    def to_json(self) -> dict[str, Any]:
        """The `ontoos compile` answer."""
        return {
            "ok": True,
            "sql": self.sql,
            "params": [json_value(p) for p in self.params],
            "fingerprint": self.fingerprint,
            "notes": list(self.notes),
            "contract_hash": self.contract_hash,
            "columns": list(self.columns),
            "limit": self.limit,
        }


def json_value(v: Value) -> Any:
    """A parameter as JSON: dates and times ISO 8601, decimals as strings (exact)."""
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    if isinstance(v, Decimal):
        return format(v, "f")
    return v


def compile_plan(plan: BoundExploration) -> CompiledQuery:
    sql, em = generate(plan)
    shape = fp.shape(plan)  # rendered once: the fingerprint hashes it
    return CompiledQuery(
        sql=sql,
        params=tuple(p.value for p in em.params),
        slots=tuple(ParamSlot(*s) for s in em.slots),
        fingerprint=fp.fingerprint(plan, shape),
        shape=shape,
        normalized=fp.normalized(plan),
        columns=plan.columns,
        datasets=tuple(s.dataset for s in plan.sources),
        relations=tuple(j.relation for j in plan.joins),
        limit=plan.limit,
        notes=plan.notes,
        plan=plan.plan,
        reads=plan.reads,
        touches=frozenset(em.touched),
        parents=tuple(j.source.dataset for j in plan.implied),
        pageable=plan.pageable,
        offset=plan.offset,
    )
