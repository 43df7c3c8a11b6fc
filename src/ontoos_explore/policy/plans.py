"""Policy stage, plans: the rules every query that runs shares -> `Plan` (explorations and named queries).

One implementation of each rule, used by the binder (explorations) and by
`policy.named` (hand-written named-query SQL):

- `may_read`: callers read readable columns only; a secret or hidden column
  appears only where the contract itself puts it (join columns, always-filters);
- `always_filters`: the rows a dataset hides, as (column, rule) pairs;
- `cost_ceiling`: the role's `max_cost`, else the contract's `heavy_max_cost`
  when a heavy dataset is read;
- `masked_positions`: output positions that read a column callers may not see;
- `hint_columns`: what a cost refusal suggests filtering on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..contract import Column, Contract, Dataset, FilterRule, Role
from ..evidence import spec_for
from ..names import fold
from ..plan import Plan

HINT_COLUMNS = 4  # a cost refusal names at most this many columns to filter on


def may_read(col: Column | None) -> bool:
    """The hidden/secret-column rule: True for a column a caller may name in any clause."""
    return col is not None and col.readable


def always_filters(ds: Dataset) -> tuple[tuple[Column, FilterRule], ...]:
    """The dataset's always-filters with their columns (which may be hidden: callers never see them)."""
    return tuple((ds.column(rule.column), rule) for rule in ds.always_filter)


def cost_ceiling(contract: Contract, role: Role, datasets: Iterable[Dataset]) -> float | None:
    if role.max_cost is not None:
        return role.max_cost
    return contract.heavy_max_cost if any(ds.heavy for ds in datasets) else None


def hint_columns(contract: Contract, ds: Dataset, scope: frozenset[str]) -> tuple[str, ...]:
    """Columns of `ds` worth filtering on when a plan costs too much: readable enums, and the join keys of
    the relations the caller may follow (both ends in `scope`, its readable datasets): a key that is
    there only for a relation outside the caller's read sets would tell of that relation."""
    key = ("cost_hint", ds.name, scope)
    found = contract.derived.get(key)
    if found is None:
        keys = {c for r in contract.relations_from(ds.name) if fold(r.to) in scope for c in r.join}
        keys |= {c for r in contract.relations_to(ds.name) if fold(r.from_) in scope for c in r.join.values()}
        found = tuple(c.name for c in ds.readable_columns() if c.type == "enum" or c.name in keys)[:HINT_COLUMNS]
        contract.derived[key] = found
    return found


def masked_positions(sources: Sequence[Iterable[Column | None]]) -> frozenset[int]:
    """Output positions any of whose source columns callers may not read (None: a column the contract
    does not know)."""
    return frozenset(i for i, cols in enumerate(sources) if any(not may_read(c) for c in cols))


def plan_for(contract: Contract, role: Role, datasets: Sequence[Dataset], max_rows: int, timeout_ms: int,
             sources: Sequence[Iterable[Column | None]]) -> Plan:
    """The plan of a query reading `datasets` (the root first) whose output positions read `sources`."""
    unique = list({ds.name: ds for ds in datasets}.values())
    return Plan(
        role=role.name,
        max_rows=max_rows,
        timeout_ms=timeout_ms,
        max_cost=cost_ceiling(contract, role, unique),
        masked=masked_positions(sources),
        cost_hints=tuple((ds.name, hint_columns(contract, ds, contract.scope(role))) for ds in unique),
        evidence=spec_for(contract, unique, contract.scope(role)),
    )
