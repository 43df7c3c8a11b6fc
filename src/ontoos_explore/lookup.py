"""Lookup: any name a caller has heard of -> what it is, among what the caller's role may read.

    lookup(contract, "viewer", "namespace")
    {"name": "namespace", "matches": [{"kind": "column", "dataset": "workloads", "column": "namespace",
                                       "type": "text"}, ...]}

A name may be a dataset (its description, as `catalog.describe_dataset`), a
full column name `dataset.column`, a bare column name (every readable dataset
that has it), an enum value (every readable enum column that accepts it), or
a relation (from a readable dataset to a readable one). Matching folds case.
Only what the role may read is searched: a secret or hidden column, a dataset
of another read set, or a relation to one is never found, and a name that
matches nothing readable gets one answer, "unknown", with suggestions drawn
from readable names only, whether or not it exists elsewhere in the contract.
"""

from __future__ import annotations

from typing import Any

from .catalog import NO_DRIFT, describe_dataset, status
from .contract import Contract, Role
from .drift.compare import Drift
from .errors import BindError, Codes
from .names import close_matches, fold, quote_list
from .pipeline import resolve_role


def lookup(contract: Contract, role: str | Role, name: str, drift: Drift = NO_DRIFT) -> dict[str, Any]:
    r = resolve_role(contract, role)
    scope = contract.scope(r)
    readable = [ds for ds in contract.readable_datasets(r)]
    wanted = fold(name.strip())
    by_name = {fold(ds.name): ds for ds in readable}
    matches: list[dict[str, Any]] = []
    if wanted in by_name:
        matches.append({"kind": "dataset", **describe_dataset(contract, r, by_name[wanted].name, drift)})
    head, dot, tail = wanted.partition(".")
    if dot and head in by_name:  # dataset.column
        col = by_name[head].column(tail)
        if col is not None and col.readable:
            matches.append(_column(by_name[head], col, drift))
    for ds in sorted(readable, key=lambda d: d.name):
        for col in ds.readable_columns():
            if not dot and fold(col.name) == wanted:
                matches.append(_column(ds, col, drift))
            if col.values and any(fold(v) == wanted for v in col.values):
                value = next(v for v in col.values if fold(v) == wanted)
                matches.append({"kind": "enum_value", "value": value, "dataset": ds.name, "column": col.name,
                                "values": list(col.values)})
    for rel in sorted(contract.relations.values(), key=lambda x: x.name):
        if fold(rel.name) == wanted and fold(rel.from_) in scope and fold(rel.to) in scope:
            matches.append({"kind": "relation", "relation": rel.name, "from": rel.from_, "to": rel.to,
                            "cardinality": rel.cardinality, **({"note": rel.note} if rel.note else {}),
                            **status(drift.relation(rel.name))})
    if not matches:
        raise _unknown(name, readable, contract, scope)
    return {"name": name, "matches": matches}


def _column(ds, col, drift: Drift) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "column", "dataset": ds.name, "column": col.name, "type": col.type}
    if col.values:
        out["values"] = list(col.values)
    if col.description:
        out["description"] = col.description
    out.update(status(drift.column(ds.name, col.name)))
    return out


def _unknown(name: str, readable, contract: Contract, scope) -> BindError:
    names = sorted({ds.name for ds in readable}
                   | {c.name for ds in readable for c in ds.readable_columns()}
                   | {f"{ds.name}.{c.name}" for ds in readable for c in ds.readable_columns()}
                   | {r.name for r in contract.relations.values() if fold(r.from_) in scope and fold(r.to) in scope})
    close = close_matches(name, names)
    hint = (f"did you mean {' or '.join(repr(c) for c in close)}? " if close else "") + \
        f"datasets you may read: {quote_list(sorted(ds.name for ds in readable))}"
    return BindError(Codes.UNKNOWN_NAME, f"'{name[:80]}' is unknown: not a dataset, column, enum value or "
                                         "relation you may read", hint=hint)
