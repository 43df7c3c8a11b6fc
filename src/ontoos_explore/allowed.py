"""Allowed sets: Contract + role (or read sets) -> the physical relations and columns
that may be read, for the guard (and the database grants).

A dataset's allowed columns are its readable columns plus the columns the
contract itself needs in SQL: the join columns of relations touching it and
its always-filter columns. Those may be hidden or secret without leaking
anything: the caller can neither select nor filter by them.

A dataset that exists only with its parents (`exists_with`) brings in what
its implied joins read, along the whole chain: the relation's join columns
on both sides and each parent's always-filter columns (`parent_columns`),
for every dataset in scope. A parent outside the scope appears with exactly
those columns: the compiler joins it to hide a child's rows, and a caller can
still neither name it nor read, filter or sort by any of its columns.
"""

from __future__ import annotations

from collections.abc import Iterable

from .contract import Contract, Dataset, Role
from .guard import AllowedSet
from .names import fold


def dataset_columns(contract: Contract, ds: Dataset, scope: frozenset[str]) -> frozenset[str]:
    """Linear in the relations touching `ds` (indexed by the contract), not in all relations."""
    cols = {c.name for c in ds.readable_columns()}
    cols |= {ds.column(f.column).name for f in ds.always_filter}
    for rel in contract.relations_from(ds.name):
        if fold(rel.to) in scope:
            cols |= {ds.column(c).name for c in rel.join}
    for rel in contract.relations_to(ds.name):
        if fold(rel.from_) in scope:
            cols |= {ds.column(c).name for c in rel.join.values()}
    return frozenset(cols)


def parent_columns(contract: Contract, scope: frozenset[str]) -> dict[str, frozenset[str]]:
    """Folded dataset name -> the columns the implied joins of the datasets in `scope` read: along each
    `exists_with` chain, the join columns of both ends and every parent's always-filter columns. Parents
    outside `scope` are included: they are what hides a child's rows."""
    out: dict[str, set[str]] = {}
    stack = [ds for ds in contract.datasets.values() if fold(ds.name) in scope]
    seen: set[str] = set()
    while stack:
        ds = stack.pop()
        if fold(ds.name) in seen:
            continue
        seen.add(fold(ds.name))
        for rel in contract.parents_of(ds.name):
            parent = contract.dataset(rel.to)
            out.setdefault(fold(ds.name), set()).update(ds.column(c).name for c in rel.join)
            cols = out.setdefault(fold(parent.name), set())
            cols.update(parent.column(c).name for c in rel.join.values())
            cols.update(parent.column(f.column).name for f in parent.always_filter)
            stack.append(parent)
    return {k: frozenset(v) for k, v in out.items()}


def allowed_for_scope(contract: Contract, scope: frozenset[str], max_rows: int | None) -> AllowedSet:
    relations: dict[tuple[str, str], frozenset[str]] = {}
    implied = parent_columns(contract, scope)
    for ds in contract.datasets.values():
        key = (ds.schema_name, ds.table_name)
        if fold(ds.name) in scope:
            relations[key] = relations.get(key, frozenset()) | dataset_columns(contract, ds, scope)
        if fold(ds.name) in implied:
            relations[key] = relations.get(key, frozenset()) | implied[fold(ds.name)]
    return AllowedSet(relations, max_rows)


def allowed_for_role(contract: Contract, role: Role) -> AllowedSet:
    """Cached per contract and role; `max_rows` is the role's row budget."""
    key = ("allowed", fold(role.name))
    found = contract.derived.get(key)
    if found is None:
        found = allowed_for_scope(contract, contract.scope(role), role.max_rows)
        contract.derived[key] = found
    return found


def allowed_for_read_sets(contract: Contract, read_sets: Iterable[str], max_rows: int | None) -> AllowedSet:
    sets = {fold(k): v for k, v in contract.read_sets.items()}
    scope = frozenset(fold(ds) for s in read_sets for ds in sets[fold(s)])
    return allowed_for_scope(contract, scope, max_rows)
