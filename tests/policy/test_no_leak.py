"""Refusals do not leak what they protect (the README's "Refusals").

A secret or hidden column gets exactly the answer a column that does not exist
gets: for every such column of the demo contract and every role that can read
its dataset, exploring it (in fields, a where predicate, group by, order by,
inside an aggregate, through a relation) is refused with an `error` that is
byte-identical to the one the same exploration gets from a copy of the
contract where the column was never declared.

Likewise a dataset outside a role's read sets is answered exactly as a
dataset that does not exist: compared with a copy of the contract without
that dataset (and without the relations and read-set entries naming it).

Only `error` is compared: `meta` may carry the contract hash, which differs.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ontoos_explore import ExploreError, compile_exploration
from ontoos_explore.contract import Contract, load_contract, parse_contract
from ontoos_explore.names import fold

ROOT = Path(__file__).resolve().parents[2]
CONTRACT_PATH = ROOT / "contracts" / "demo.yaml"
CONTRACT = load_contract(CONTRACT_PATH)
RAW: dict[str, Any] = yaml.safe_load(CONTRACT_PATH.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- contract copies


def _same(a: str, b: str) -> bool:
    return fold(a) == fold(b)


@functools.cache
def without_column(dataset: str, column: str) -> Contract:
    """The contract with `dataset.column` never declared (and nothing left naming it)."""
    data = copy.deepcopy(RAW)
    ds = data["datasets"][dataset]
    ds["columns"] = {k: v for k, v in ds["columns"].items() if not _same(k, column)}
    if "always_filter" in ds:
        ds["always_filter"] = [r for r in ds["always_filter"] if not _same(r["column"], column)]
        if not ds["always_filter"]:
            del ds["always_filter"]
    for name, rel in list(data.get("relations", {}).items()):
        pairs = rel["join"]
        if _same(rel["from"], dataset):
            pairs = {a: b for a, b in pairs.items() if not _same(a, column)}
        if _same(rel["to"], dataset):
            pairs = {a: b for a, b in pairs.items() if not _same(b, column)}
        if pairs:
            rel["join"] = pairs
        else:
            del data["relations"][name]
    _prune_exists_with(data)
    return parse_contract(yaml.safe_dump(data, sort_keys=False), source="<without-column>")


def _prune_exists_with(data: dict) -> None:
    """Keep `exists_with` loadable in a copy: drop the relations it no longer has, then (until nothing
    changes) those leading to a parent that hides no rows any more (no always_filter, no exists_with)."""
    relations = {fold(k): v for k, v in data.get("relations", {}).items()}
    changed = True
    while changed:
        changed = False
        hides = {fold(k) for k, d in data["datasets"].items() if d.get("always_filter") or d.get("exists_with")}
        for ds in data["datasets"].values():
            kept = [r for r in ds.get("exists_with", ())
                    if fold(r) in relations and fold(relations[fold(r)]["to"]) in hides]
            if "exists_with" in ds and kept != ds["exists_with"]:
                changed = True
                if kept:
                    ds["exists_with"] = kept
                else:
                    del ds["exists_with"]


@functools.cache
def without_dataset(dataset: str) -> Contract:
    """The contract with `dataset` never declared: no relation or read set names it."""
    data = copy.deepcopy(RAW)
    del data["datasets"][dataset]
    data["relations"] = {
        name: rel for name, rel in data.get("relations", {}).items()
        if not (_same(rel["from"], dataset) or _same(rel["to"], dataset))
    }
    data["read_sets"] = {name: [d for d in members if not _same(d, dataset)] for name, members in data["read_sets"].items()}
    _prune_exists_with(data)
    return parse_contract(yaml.safe_dump(data, sort_keys=False), source="<without-dataset>")


# ---------------------------------------------------------------- what to explore


def readable(dataset: str) -> list[str]:
    return [c.name for c in CONTRACT.dataset(dataset).readable_columns()]


def can_read(role: str, dataset: str) -> bool:
    return fold(dataset) in CONTRACT.scope(CONTRACT.role(role))


def column_explorations(dataset: str, column: str, role: str, copy_: Contract) -> list[tuple[str, Any]]:
    """Every clause a protected `column` of `dataset` can be written in."""
    d, x, r0 = dataset, column, readable(dataset)[0]
    out: list[tuple[str, Any]] = [
        ("fields", f"explore {d} fields {r0}, {x}"),
        ("fields-only", f"explore {d} fields {x}"),
        ("fields-alias", f"explore {d} fields {x} as plain"),
        ("fields-root-qualified", f"explore {d} fields {d}.{x}"),
        ("where-eq", f"explore {d} fields {r0} where {x} = 'x'"),
        ("where-number", f"explore {d} fields {r0} where {x} > 1"),
        ("where-like", f"explore {d} fields {r0} where {x} like 'a%'"),
        ("where-in", f"explore {d} fields {r0} where {x} in ('a', 'b')"),
        ("where-between", f"explore {d} fields {r0} where {x} between 1 and 2"),
        ("where-null", f"explore {d} fields {r0} where {r0} is not null and {x} is null"),
        ("where-or-not", f"explore {d} fields {r0} where {r0} is null or not {x} = true"),
        ("group-by", f"explore {d} fields {r0}, count() group by {r0}, {x}"),
        ("group-by-only", f"explore {d} fields count() group by {x}"),
        ("order-by", f"explore {d} fields {r0} order by {x} desc"),
        ("order-by-aggregate", f"explore {d} fields {r0}, count() group by {r0} order by max({x})"),
        ("json-filter-object", {"dataset": d, "fields": [r0], "filter": [{"field": x, "op": "=", "value": "x"}]}),
        ("json-order-by", {"dataset": d, "fields": [r0], "order_by": [f"-{x}"]}),
        ("json-group-by", {"dataset": d, "fields": [r0, "count()"], "group_by": [r0, x]}),
    ]
    for agg in ("count({})", "count(distinct {})", "min({})", "max({})", "sum({})", "avg({})"):
        out.append((agg.format("x").replace("(", "-").replace(")", "").replace(" ", "-"),
                    f"explore {d} fields {r0}, {agg.format(x)} group by {r0}"))
    # through every relation into the dataset, from a dataset the role reads
    max_relations = CONTRACT.role(role).max_relations
    for rel in CONTRACT.relations.values():
        if not _same(rel.to, d) or not can_read(role, rel.from_) or max_relations < 1:
            continue
        if copy_.relation(rel.name) is None:  # the copy had to drop it: not the same question
            continue
        f0 = readable(rel.from_)[0]
        n = rel.name
        out += [
            (f"via-{n}-fields", f"explore {rel.from_} via {n} fields {f0}, {n}.{x}"),
            (f"via-{n}-where", f"explore {rel.from_} via {n} fields {f0} where {n}.{x} is null"),
            (f"via-{n}-order-by", f"explore {rel.from_} via {n} fields {f0} order by {n}.{x}"),
            (f"via-{n}-count-distinct", f"explore {rel.from_} via {n} fields {f0}, count(distinct {n}.{x}) group by {f0}"),
            (f"unfollowed-{n}", f"explore {rel.from_} fields {f0}, {n}.{x}"),
        ]
    return out


def protected_columns() -> list[tuple[str, str, str]]:
    out = []
    for ds in CONTRACT.datasets.values():
        for col in ds.columns.values():
            if not (col.secret or col.hidden):
                continue
            for role in CONTRACT.roles:
                if can_read(role, ds.name):
                    out.append((role, ds.name, col.name))
    return out


def column_cases() -> list[Any]:
    cases = []
    for role, dataset, column in protected_columns():
        copy_ = without_column(dataset, column)
        for clause, source in column_explorations(dataset, column, role, copy_):
            cases.append(pytest.param(role, dataset, column, source, id=f"{role}-{dataset}.{column}-{clause}"))
    return cases


def dataset_explorations(dataset: str, role: str) -> list[tuple[str, Any]]:
    d = CONTRACT.dataset(dataset)
    c0 = readable(dataset)[0]
    out: list[tuple[str, Any]] = [
        ("explore", f"explore {d.name} fields {c0}"),
        ("explore-filtered", f"explore {d.name} fields {c0} where {c0} is not null limit 5"),
        ("explore-upper", f"explore {d.name.upper()} fields {c0}"),
        ("explore-count", f"explore {d.name} fields count()"),
        ("json", {"dataset": d.name, "fields": [c0]}),
    ]
    for col in d.columns.values():
        if col.secret or col.hidden:
            out.append((f"explore-protected-{col.name}", f"explore {d.name} fields {col.name}"))
    max_relations = CONTRACT.role(role).max_relations
    for rel in CONTRACT.relations.values():
        if not (_same(rel.to, dataset) and can_read(role, rel.from_)):
            continue
        f0 = readable(rel.from_)[0]
        if max_relations >= 1:
            out.append((f"via-{rel.name}", f"explore {rel.from_} via {rel.name} fields {f0}"))
            out.append((f"via-{rel.name}-column", f"explore {rel.from_} via {rel.name} fields {f0}, {rel.name}.{c0}"))
        out.append((f"unfollowed-{rel.name}", f"explore {rel.from_} fields {f0}, {rel.name}.{c0}"))
        out.append((f"unfollowed-{rel.name}-where", f"explore {rel.from_} fields {f0} where {rel.name}.{c0} is null"))
    return out


def dataset_cases() -> list[Any]:
    cases = []
    for role in CONTRACT.roles:
        for ds in CONTRACT.datasets.values():
            if can_read(role, ds.name):
                continue
            for what, source in dataset_explorations(ds.name, role):
                cases.append(pytest.param(role, ds.name, source, id=f"{role}-{ds.name}-{what}"))
    return cases


COLUMN_CASES = column_cases()
DATASET_CASES = dataset_cases()


def error_of(source: Any, contract: Contract, role: str) -> ExploreError:
    try:
        q = compile_exploration(source, contract, role)
    except ExploreError as e:
        return e
    pytest.fail(f"compiled instead of being refused: {q.sql}")


def dumped(e: ExploreError) -> str:
    return json.dumps(e.to_envelope()["error"], sort_keys=True)


# ---------------------------------------------------------------- the tests


def test_the_demo_contract_has_something_to_protect():
    """The tests below are not vacuous: secret and hidden columns, and unreadable datasets, exist."""
    secret = [c for ds in CONTRACT.datasets.values() for c in ds.columns.values() if c.secret]
    hidden = [c for ds in CONTRACT.datasets.values() for c in ds.columns.values() if c.hidden]
    assert secret and hidden
    assert len(COLUMN_CASES) >= 100
    assert DATASET_CASES, "some role must have a dataset outside its read sets"


def test_the_copies_differ_only_by_what_was_removed():
    for _, dataset, column in protected_columns():
        c = without_column(dataset, column)
        assert c.dataset(dataset).column(column) is None
        assert [x.name for x in c.dataset(dataset).readable_columns()] == readable(dataset)
        assert set(c.roles) == set(CONTRACT.roles) and set(c.relations) <= set(CONTRACT.relations)
    for ds in CONTRACT.datasets:
        c = without_dataset(ds)
        assert c.dataset(ds) is None
        assert set(c.datasets) == set(CONTRACT.datasets) - {ds}


@pytest.mark.parametrize(("role", "dataset", "column", "source"), COLUMN_CASES)
def test_protected_column_is_answered_as_a_missing_one(role, dataset, column, source):
    protected = error_of(source, CONTRACT, role)
    missing = error_of(source, without_column(dataset, column), role)
    assert dumped(protected) == dumped(missing)


@pytest.mark.parametrize(("role", "dataset", "source"), DATASET_CASES)
def test_unreadable_dataset_is_answered_as_a_missing_one(role, dataset, source):
    unreadable = error_of(source, CONTRACT, role)
    missing = error_of(source, without_dataset(dataset), role)
    assert dumped(unreadable) == dumped(missing)
    # the audit keeps the truth
    assert unreadable.reason in ("OUT_OF_SCOPE", unreadable.subtype)
