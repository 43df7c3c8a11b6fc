"""Guard stage: hand-written SQL against the demo contract's read sets (cases as data)."""

from __future__ import annotations

import dataclasses
import json
import logging

import pytest
import yaml

from ontoos_explore import compile_exploration
from ontoos_explore.allowed import allowed_for_read_sets, allowed_for_role
from ontoos_explore.errors import ExploreError, GuardViolation
from ontoos_explore.guard import ALLOWED_KINDS, AllowedSet, check
from ontoos_explore.pipeline import verify

from .conftest import CASES

CASES_ = yaml.safe_load((CASES / "guard.yaml").read_text())
ACCEPT, REFUSE = CASES_["accept"], CASES_["refuse"]


@pytest.fixture(scope="module")
def allowed(demo):
    return allowed_for_read_sets(demo, ["published", "engineering"], max_rows=100)


@pytest.mark.parametrize("case", ACCEPT, ids=[c["id"] for c in ACCEPT])
def test_accepts(case, allowed):
    verdict = check(case["sql"], allowed, case.get("params"))
    assert verdict.ok, verdict.to_json(case["sql"])
    assert verdict.relations and verdict.columns


@pytest.mark.parametrize("case", REFUSE, ids=[c["id"] for c in REFUSE])
def test_refuses(case, allowed):
    verdict = check(case["sql"], allowed, case.get("params"))
    assert not verdict.ok
    found = [(v.kind, v.message) for v in verdict.violations]
    assert any(kind == case["kind"] and case["says"] in message for kind, message in found), found
    rendered = verdict.to_json(case["sql"])
    json.dumps(rendered)
    for v in rendered["violations"]:
        if "line" in v:
            assert v["line"] >= 1 and v["column"] >= 1


def test_there_are_enough_cases():
    assert len(REFUSE) >= 60 and len(ACCEPT) >= 5
    kinds = {c["kind"] for c in REFUSE}
    for must in ("InsertStmt", "CopyStmt", "WithClause", "IntoClause", "LockingClause", "RangeFunction",
                 "FuncCall", "RangeVar", "ColumnRef", "Statement", "Limit", "SubLink", "A_Expr"):
        assert must in kinds


def test_every_allowed_kind_is_exercised_by_an_accepted_case(allowed):
    """Each kind on the allow-list appears in some accepted SQL (so none is allowed by accident)."""
    from pglast.parser import parse_sql_json

    seen: set[str] = set()

    def collect(value):
        if isinstance(value, dict):
            for k, v in value.items():
                if k[:1].isupper() and isinstance(v, dict):
                    seen.add(k)
                collect(v)
        elif isinstance(value, list):
            for v in value:
                collect(v)

    for case in ACCEPT:
        collect(json.loads(parse_sql_json(case["sql"])))
    assert ALLOWED_KINDS <= seen, ALLOWED_KINDS - seen


def test_location_points_into_the_sql(allowed):
    sql = "SELECT w.name,\n       w.env_dump FROM lake.k8s_workloads w LIMIT 1"
    v = check(sql, allowed).to_json(sql)["violations"][0]
    assert (v["line"], v["column"]) == (2, 8)


def test_identifiers_are_compared_after_postgres_truncation():
    long = "a" * 63
    allowed = AllowedSet({("s", "t"): frozenset({long})}, max_rows=10)
    assert check(f'SELECT x."{long}xyz" FROM s.t x LIMIT 1', allowed).ok  # PostgreSQL reads the same column
    assert not check(f'SELECT x."{long[:-1]}" FROM s.t x LIMIT 1', allowed).ok


def test_the_guard_knows_nothing_of_the_language(allowed):
    assert not check("explore hosts fields hostname", allowed).ok


def test_every_compiled_golden_passes_the_guard(demo):
    golden = yaml.safe_load((CASES / "golden.yaml").read_text())
    for case in golden:
        q = compile_exploration(case["source"], demo, case["role"])
        verdict = check(q.sql, allowed_for_role(demo, demo.role(case["role"])), len(q.params))
        assert verdict.ok and verdict.columns == q.touches, case["id"]


def test_a_tampered_compilation_is_an_internal_error_and_logged(demo, caplog):
    role = demo.role("analyst")
    q = compile_exploration("explore workloads fields name where namespace = 'secret-ns'", demo, "analyst")
    bad = dataclasses.replace(q, sql=q.sql.replace('"t0"."name" AS', '"t0"."env_dump" AS'))
    with caplog.at_level(logging.ERROR, logger="ontoos_explore.guard"):
        with pytest.raises(GuardViolation) as info:
            verify(bad, allowed_for_role(demo, role))
    env = info.value.to_envelope()
    assert (env["error"]["type"], env["error"]["code"]) == ("internal", "EX903")
    assert "env_dump" not in json.dumps(env) and "SELECT" not in json.dumps(env)
    assert info.value.violations and "env_dump" in caplog.text
    assert "secret-ns" not in caplog.text  # the shape is logged, not the values
    assert isinstance(info.value, ExploreError)


def test_compiler_and_guard_must_agree_on_the_columns(demo):
    q = compile_exploration("explore workloads fields name", demo, "analyst")
    lying = dataclasses.replace(q, touches=q.touches | {("lake", "k8s_workloads", "cluster")})
    with pytest.raises(GuardViolation) as info:
        verify(lying, allowed_for_role(demo, demo.role("analyst")))
    assert info.value.violations[0]["kind"] == "Columns"
