"""Catalog: Contract + role -> what the role may read, as plain data.

The one place that describes the contract to a caller (CLI `ontoos catalog`,
the MCP tool `ontoos_catalog`; `lookup.py` finds any name through it). It lists readable datasets and columns
only: secret and hidden columns, datasets outside the read sets, and the
values of always-filters never appear. An unknown name gets the same
UNKNOWN_DATASET refusal as exploring it would.
"""

from __future__ import annotations

from typing import Any

from .contract import Contract, Dataset, Role
from .drift.compare import Drift
from .ir import Name
from .errors import BindError, Codes, InputError
from .names import fold, is_identifier
from .pipeline import resolve_role
from .policy.scope import Binding


NO_DRIFT = Drift()


def row_cap(role: Role, ds: Dataset) -> int:
    return min(role.max_rows, ds.max_rows) if ds.max_rows else role.max_rows


def role_budget(role: Role) -> dict[str, Any]:
    budget = {
        "max_rows": role.max_rows,
        "timeout_ms": role.timeout_ms,
        "max_relations": role.max_relations,
        "max_fields": role.max_fields,
        "max_predicates": role.max_predicates,
        "max_in_list": role.max_in_list,
        "max_literal_length": role.max_literal_length,
    }
    if role.max_cost is not None:
        budget["max_cost"] = role.max_cost
    return budget


def status(why: str | None) -> dict[str, str]:
    """`status`: ok, or degraded with the reason (drift: the database no longer has it as described)."""
    return {"status": "ok"} if why is None else {"status": "degraded", "reason": why}


def list_datasets(contract: Contract, role: str | Role, drift: Drift = NO_DRIFT) -> dict[str, Any]:
    r = resolve_role(contract, role)
    return {
        "role": r.name,
        "budget": role_budget(r),
        "datasets": [
            {
                "name": ds.name,
                "description": ds.description,
                "heavy": ds.heavy,
                "max_rows": row_cap(r, ds),
                **status(drift.dataset(ds.name)),
            }
            for ds in sorted(contract.readable_datasets(r), key=lambda d: d.name)
        ],
    }


def describe_dataset(contract: Contract, role: str | Role, name: str, drift: Drift = NO_DRIFT) -> dict[str, Any]:
    """One readable dataset: columns, relations that start there, limits, and what drift made
    unavailable. Raises the same UNKNOWN_DATASET as exploring an unreadable dataset."""
    r = resolve_role(contract, role)
    if not is_identifier(name):
        raise InputError(Codes.INVALID_NAME, "a dataset name must be an identifier",
                         hint="list the readable datasets without a name")
    try:
        ds = Binding(_probe(name), contract, r).resolve_dataset(Name(value=name))
    except BindError as e:
        e.retry_with = None  # the probe is not the caller's exploration
        raise
    scope = contract.scope(r)
    relations = [
        {
            "name": rel.name,
            "to": rel.to,
            "cardinality": rel.cardinality,
            **({"note": rel.note} if rel.note else {}),
            **status(drift.relation(rel.name)),
        }
        for rel in contract.relations_from(ds.name)
        if fold(rel.to) in scope
    ]
    columns = []
    for c in ds.readable_columns():
        col: dict[str, Any] = {"name": c.name, "type": c.type}
        if c.description:
            col["description"] = c.description
        if c.values:
            col["values"] = list(c.values)
        col.update(status(drift.column(ds.name, c.name)))
        columns.append(col)
    return {
        "name": ds.name,
        "description": ds.description,
        "heavy": ds.heavy,
        # rows are pre-filtered by the contract (its own always_filter, or its parents': exists_with); how is not shown
        "filtered": bool(ds.always_filter or ds.exists_with),
        "max_rows": row_cap(r, ds),
        **status(drift.dataset(ds.name)),
        "columns": columns,
        "relations": relations,
        "budget": role_budget(r),
    }


def _probe(name: str):
    """A minimal exploration so name resolution can share Binding's refusals."""
    from .ir import ColumnField, Exploration, Ref

    return Exploration(dataset=Name(value=name), fields=(ColumnField(ref=Ref(column="_")),))
