"""Catalog: what a role may read, and nothing else.

Every expectation is derived from the contract's YAML (read with plain
yaml.safe_load), not from the code under test: the secret and hidden columns,
each role's scope, the relations, the row caps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ontoos_explore import compile_exploration, load_contract
from ontoos_explore.catalog import describe_dataset, list_datasets
from ontoos_explore.errors import ExploreError
from ontoos_explore.names import close_matches, fold

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = {
    "demo": ROOT / "contracts" / "demo.yaml",
    "inventory": Path(__file__).resolve().parent / "cases" / "contracts" / "inventory.yaml",
}
ROLE_DEFAULT_MAX_ROWS = 1000  # the contract format's default for a role's max_rows


def raw(which: str) -> dict:
    return yaml.safe_load(CONTRACTS[which].read_text(encoding="utf-8"))


def role_cases() -> list:
    return [pytest.param(which, role, id=f"{which}-{role}") for which in CONTRACTS for role in raw(which)["roles"]]


def scope_of(data: dict, role: str) -> set[str]:
    return {ds for s in data["roles"][role]["read_sets"] for ds in data["read_sets"][s]}


def protected_columns(data: dict) -> set[str]:
    """Names of secret or hidden columns that are not also a readable column somewhere."""
    protected, readable = set(), set()
    for d in data["datasets"].values():
        for name, col in d["columns"].items():
            (protected if col.get("secret") or col.get("hidden") else readable).add(name)
    return protected - readable


def strings_in(obj) -> list[str]:
    """Every string (dict keys included) anywhere in a JSON-like value."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (*strings_in(k), *strings_in(v))]
    if isinstance(obj, (list, tuple)):
        return [s for v in obj for s in strings_in(v)]
    return []


def dicts_in(obj) -> list[dict]:
    if isinstance(obj, dict):
        return [obj, *(d for v in obj.values() for d in dicts_in(v))]
    if isinstance(obj, (list, tuple)):
        return [d for v in obj for d in dicts_in(v)]
    return []


def expected_cap(data: dict, role: str, ds: str) -> int:
    r = data["roles"][role].get("max_rows", ROLE_DEFAULT_MAX_ROWS)
    d = data["datasets"][ds].get("max_rows")
    return min(r, d) if d else r


def catalog_output(which: str, role: str) -> tuple[dict, dict[str, dict]]:
    c = load_contract(CONTRACTS[which])
    listing = list_datasets(c, role)
    described = {d["name"]: describe_dataset(c, role, d["name"]) for d in listing["datasets"]}
    return listing, described


# ---------------------------------------------------------------- listing


@pytest.mark.parametrize("which,role", role_cases())
def test_list_datasets_is_exactly_the_scope(which, role):
    data = raw(which)
    listing, _ = catalog_output(which, role)
    assert listing["role"] == role
    names = [d["name"] for d in listing["datasets"]]
    assert names == sorted(scope_of(data, role))
    for d in listing["datasets"]:
        assert d["description"] == data["datasets"][d["name"]].get("description", "")
        assert d["heavy"] == data["datasets"][d["name"]].get("heavy", False)
        assert d["max_rows"] == expected_cap(data, role, d["name"])


@pytest.mark.parametrize("which,role", role_cases())
def test_list_datasets_budget_is_the_roles(which, role):
    data = raw(which)
    listing, _ = catalog_output(which, role)
    r = data["roles"][role]
    budget = listing["budget"]
    assert budget["max_rows"] == r.get("max_rows", ROLE_DEFAULT_MAX_ROWS)
    for key in ("timeout_ms", "max_relations", "max_fields", "max_predicates", "max_in_list", "max_literal_length", "max_cost"):
        if key in r:
            assert budget[key] == r[key]
    if "max_cost" not in r:
        assert "max_cost" not in budget


@pytest.mark.parametrize("which,role", role_cases())
def test_no_dataset_outside_the_read_sets_appears_anywhere(which, role):
    data = raw(which)
    outside = set(data["datasets"]) - scope_of(data, role)
    listing, described = catalog_output(which, role)
    everything = strings_in(listing) + strings_in(described)
    assert not outside & set(everything)
    # and no relation that leads there
    for info in described.values():
        assert all(r["to"] not in outside for r in info["relations"])


@pytest.mark.parametrize("which,role", role_cases())
def test_no_secret_or_hidden_column_appears_anywhere(which, role):
    data = raw(which)
    forbidden = protected_columns(data)
    assert forbidden  # the contracts do have secret and hidden columns
    listing, described = catalog_output(which, role)
    text = json.dumps([listing, described])
    for name in forbidden:
        assert f'"{name}"' not in text
        assert name not in strings_in([listing, described])


@pytest.mark.parametrize("which,role", role_cases())
def test_describe_lists_readable_columns_only(which, role):
    data = raw(which)
    _, described = catalog_output(which, role)
    for ds, info in described.items():
        cols = data["datasets"][ds]["columns"]
        readable = [n for n, c in cols.items() if not c.get("secret") and not c.get("hidden")]
        assert [c["name"] for c in info["columns"]] == readable
        for c in info["columns"]:
            assert c["type"] == cols[c["name"]]["type"]
            assert c.get("values") == cols[c["name"]].get("values")
            assert c.get("description", "") == cols[c["name"]].get("description", "")
            assert "secret" not in c and "hidden" not in c


@pytest.mark.parametrize("which,role", role_cases())
def test_describe_relations_only_into_scope(which, role):
    data = raw(which)
    scope = scope_of(data, role)
    _, described = catalog_output(which, role)
    for ds, info in described.items():
        expected = {
            name: r for name, r in data["relations"].items() if r["from"] == ds and r["to"] in scope
        }
        assert {r["name"] for r in info["relations"]} == set(expected)
        for r in info["relations"]:
            assert r["to"] == expected[r["name"]]["to"]
            assert r["cardinality"] == expected[r["name"]]["cardinality"]
            assert r.get("note") == expected[r["name"]].get("note")
            assert "join" not in r  # join columns may be hidden: never shown


@pytest.mark.parametrize("which,role", role_cases())
def test_filtered_flag_without_filter_details(which, role):
    data = raw(which)
    _, described = catalog_output(which, role)
    for ds, info in described.items():
        assert info["filtered"] is bool(data["datasets"][ds].get("always_filter") or data["datasets"][ds].get("exists_with"))
        assert "exists_with" not in info
        assert info["max_rows"] == expected_cap(data, role, ds)
        assert info["heavy"] == data["datasets"][ds].get("heavy", False)
    for d in dicts_in(described):
        assert "always_filter" not in d
        assert not {"op", "value"} & set(d)


def test_some_datasets_are_filtered_and_some_not():
    # guards the test above against a contract where the flag never varies
    for role in ("analyst", "admin"):  # every dataset the viewer reads is filtered, or exists with a filtered parent
        _, described = catalog_output("demo", role)
        assert {info["filtered"] for info in described.values()} == {True, False}


def test_row_cap_uses_the_smaller_of_role_and_dataset():
    _, analyst = catalog_output("demo", "analyst")
    assert analyst["table_refs"]["max_rows"] == 300  # dataset 300 < role 500
    assert analyst["workloads"]["max_rows"] == 500  # role 500 < dataset 1000
    assert analyst["hosts"]["max_rows"] == 500  # no dataset cap
    _, admin = catalog_output("demo", "admin")
    assert admin["workloads"]["max_rows"] == 1000  # dataset 1000 < role 5000
    _, auditor = catalog_output("inventory", "auditor")
    assert auditor["buyers"]["max_rows"] == 50
    assert auditor["depots"]["max_rows"] == 2000


def test_describe_is_case_insensitive_and_answers_with_contract_names():
    c = load_contract(CONTRACTS["demo"])
    assert describe_dataset(c, "ANALYST", "WorkLoads") == describe_dataset(c, "analyst", "workloads")
    assert describe_dataset(c, "analyst", "WORKLOADS")["name"] == "workloads"


# ---------------------------------------------------------------- refusals


def error_of(fn, *args) -> ExploreError:
    with pytest.raises(ExploreError) as ei:
        fn(*args)
    return ei.value


def out_of_scope_pairs() -> list:
    """(contract, role, out-of-scope dataset, nonexistent name) where neither
    name is close to any readable dataset, so the answers must be identical."""
    pairs = []
    for which in CONTRACTS:
        data = raw(which)
        for role in data["roles"]:
            scope = scope_of(data, role)
            for ds in sorted(set(data["datasets"]) - scope):
                ghost = "q" * len(ds)
                if not close_matches(ds, scope) and not close_matches(ghost, scope):
                    pairs.append(pytest.param(which, role, ds, ghost, id=f"{which}-{role}-{ds}"))
    return pairs


PAIRS = out_of_scope_pairs()


def test_there_are_out_of_scope_cases():
    assert len(PAIRS) >= 3


@pytest.mark.parametrize("which,role,hidden_ds,ghost", PAIRS)
def test_out_of_scope_answers_exactly_like_missing(which, role, hidden_ds, ghost):
    c = load_contract(CONTRACTS[which])
    a = error_of(describe_dataset, c, role, hidden_ds)
    b = error_of(describe_dataset, c, role, ghost)
    assert a.code == b.code == "EX202"
    assert a.subtype == "UNKNOWN_DATASET"
    assert json.dumps(a.to_envelope()).replace(hidden_ds, "<name>") == json.dumps(b.to_envelope()).replace(ghost, "<name>")
    assert hidden_ds not in (a.hint or "")
    # the true reason is kept for the audit only
    assert a.reason == "OUT_OF_SCOPE" and b.reason == "UNKNOWN_DATASET"
    assert "OUT_OF_SCOPE" not in json.dumps(a.to_envelope())


@pytest.mark.parametrize("which,role,hidden_ds,ghost", PAIRS)
def test_catalog_refusal_matches_exploring(which, role, hidden_ds, ghost):
    c = load_contract(CONTRACTS[which])
    cat = error_of(describe_dataset, c, role, hidden_ds).to_error()
    col = next(iter(raw(which)["datasets"][hidden_ds]["columns"]))
    exp = error_of(compile_exploration, f"explore {hidden_ds} fields {col}", c, role).to_error()
    for key in ("type", "subtype", "code", "message", "hint"):
        assert cat.get(key) == exp.get(key)
    assert "retry_with" not in cat


def test_close_unknown_name_gets_did_you_mean():
    c = load_contract(CONTRACTS["demo"])
    e = error_of(describe_dataset, c, "viewer", "workload")
    assert e.code == "EX202"
    assert "did you mean 'workloads'?" in e.hint
    assert "retry_with" not in e.to_error()


@pytest.mark.parametrize("name", ["bad name", "", "1st", "work-loads", "x" * 64, "workloads;", "lake.hosts", "wörk"])
def test_non_identifier_name_is_a_validation_error(name):
    c = load_contract(CONTRACTS["demo"])
    e = error_of(describe_dataset, c, "analyst", name)
    assert e.type == "validation"
    assert e.code == "EX103"
    assert e.hint


@pytest.mark.parametrize("fn,args", [(list_datasets, ()), (describe_dataset, ("workloads",))], ids=["list", "describe"])
def test_unknown_role_is_an_auth_error(fn, args):
    c = load_contract(CONTRACTS["demo"])
    e = error_of(fn, c, "analyts", *args)
    assert e.code == "EX501"
    assert e.type == "auth"
    assert "analyst" in e.hint
