"""Allowed sets: Contract + role (or read sets) -> the physical relations and columns
that may be read, for the guard (and the database grants).

A dataset's allowed columns are its readable columns plus the columns the
contract itself needs in SQL: the join columns of relations touching it and
its always-filter columns. Those may be hidden or secret without leaking
anything: the caller can neither select nor filter by them.
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


def allowed_for_scope(contract: Contract, scope: frozenset[str], max_rows: int | None) -> AllowedSet:
    relations: dict[tuple[str, str], frozenset[str]] = {}
    for ds in contract.datasets.values():
        if fold(ds.name) in scope:
            key = (ds.schema_name, ds.table_name)
            relations[key] = relations.get(key, frozenset()) | dataset_columns(contract, ds, scope)
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
