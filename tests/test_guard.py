"""Guard stage: hand-written SQL against the demo contract's read sets (cases as data)."""

from __future__ import annotations

import dataclasses
import json
import logging
from decimal import Decimal

import pytest
import yaml

from ontoos_explore import compile_exploration
from ontoos_explore.allowed import allowed_for_read_sets, allowed_for_role
from ontoos_explore.errors import ExploreError, GuardViolation
from ontoos_explore.guard import ALLOWED_KINDS, AllowedSet, check, line_column
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


# ---------------------------------------------------------------- targets: what each SELECT-list item reads

TWO = AllowedSet({("s", "w"): frozenset({"id", "name", "ns", "size"}),
                  ("s", "c"): frozenset({"wid", "image", "size"})}, max_rows=10)
W, C = ("s", "w"), ("s", "c")


def targets(sql: str, allowed: AllowedSet = TWO, n_params: int | None = None) -> list[set[tuple[str, str, str]]]:
    verdict = check(sql, allowed, n_params)
    assert verdict.ok, verdict.to_json(sql)
    assert all(isinstance(t, frozenset) for t in verdict.targets)
    return [set(t) for t in verdict.targets]


@pytest.mark.parametrize("sql, expected", [
    ("SELECT w.name, w.ns FROM s.w w LIMIT 1", [{(*W, "name")}, {(*W, "ns")}]),
    ('SELECT "w"."ns" AS "namespace", w.name AS n FROM s.w w LIMIT 1', [{(*W, "ns")}, {(*W, "name")}]),
    ("SELECT name FROM s.w LIMIT 1", [{(*W, "name")}]),  # unqualified, and the table's own name as its alias
    ("SELECT max(w.size) AS biggest, count(w.id) FROM s.w w LIMIT 1", [{(*W, "size")}, {(*W, "id")}]),
    ("SELECT count(*) FROM s.w w LIMIT 1", [set()]),
    ("SELECT w.name, $1::int FROM s.w w LIMIT 1", [{(*W, "name")}, set()]),
    ("SELECT x.image, w.name FROM s.w w INNER JOIN s.c x ON x.wid = w.id LIMIT 1", [{(*C, "image")}, {(*W, "name")}]),
    ("SELECT w.size = x.size AS same, w.name IS NULL OR x.image IS NULL "
     "FROM s.w w LEFT JOIN s.c x ON x.wid = w.id LIMIT 1",
     [{(*W, "size"), (*C, "size")}, {(*W, "name"), (*C, "image")}]),
    ("SELECT w.size BETWEEN x.size AND $1 FROM s.w w JOIN s.c x ON x.wid = w.id LIMIT 1",
     [{(*W, "size"), (*C, "size")}]),
    ("SELECT w.name, w.name FROM s.w w LIMIT 1", [{(*W, "name")}, {(*W, "name")}]),
], ids=["plain", "aliases", "unqualified", "aggregates", "count-star", "parameter", "join-alias",
        "two-columns", "between-two-columns", "same-column-twice"])
def test_targets_name_the_columns_each_output_position_reads(sql, expected):
    assert targets(sql) == expected


def test_targets_leave_out_columns_read_only_outside_the_select_list():
    sql = ("SELECT count(*) AS n, w.ns FROM s.w w INNER JOIN s.c x ON x.wid = w.id "
           "WHERE x.image = $1 GROUP BY w.ns, w.name ORDER BY w.size LIMIT 1")
    verdict = check(sql, TWO, 1)
    assert targets(sql, n_params=1) == [set(), {(*W, "ns")}]
    assert {(*C, "image"), (*C, "wid"), (*W, "size"), (*W, "name")} <= verdict.columns


def test_targets_are_empty_when_the_walk_never_starts():
    for sql in ("SELEC 1", "SELECT w.name FROM s.w w LIMIT 1; SELECT 1", "DELETE FROM s.w"):
        assert check(sql, TWO).targets == ()


@pytest.mark.parametrize("case", ACCEPT, ids=[c["id"] for c in ACCEPT])
def test_targets_agree_with_the_select_list_and_the_placed_columns(case, allowed):
    from pglast.parser import parse_sql_json

    verdict = check(case["sql"], allowed, case.get("params"))
    select = json.loads(parse_sql_json(case["sql"]))["stmts"][0]["stmt"]["SelectStmt"]
    assert len(verdict.targets) == len(select["targetList"])
    assert set().union(*verdict.targets) == {(s, t, c) for clause, s, t, c in verdict.placed if clause == "targetList"}


def test_every_compiled_golden_has_one_target_per_output_column(demo):
    golden = yaml.safe_load((CASES / "golden.yaml").read_text())
    for case in golden:
        q = compile_exploration(case["source"], demo, case["role"])
        verdict = check(q.sql, allowed_for_role(demo, demo.role(case["role"])), len(q.params))
        assert len(verdict.targets) == len(q.columns), case["id"]
        assert set().union(*verdict.targets) <= q.touches, case["id"]


# ---------------------------------------------------------------- conjuncts: the simple tests ANDed at the top of WHERE

FLAGS = AllowedSet({("s", "w"): frozenset({"id", "name", "ns", "size", "gone"}),
                    ("s", "c"): frozenset({"wid", "image", "size"})}, max_rows=10)


def conjuncts(sql: str, allowed: AllowedSet = FLAGS) -> list[tuple]:
    return [(k.alias, k.schema, k.table, k.column, k.op, k.kind, k.values) for k in check(sql, allowed).conjuncts]


@pytest.mark.parametrize("where, expected", [
    ("w.gone = $1", [("w", "gone", "=", "param", (1,))]),  # the whole WHERE
    ("w.name = $1 AND w.gone = $2", [("w", "name", "=", "param", (1,)), ("w", "gone", "=", "param", (2,))]),
    ("w.name = $1 AND (w.ns = $2 AND w.gone = $3)",  # an AND in an AND is more of the same conjunction
     [("w", "name", "=", "param", (1,)), ("w", "ns", "=", "param", (2,)), ("w", "gone", "=", "param", (3,))]),
    ("$1 < w.size AND $2 <> w.gone", [("w", "size", ">", "param", (1,)), ("w", "gone", "<>", "param", (2,))]),
    ("w.gone != $1", [("w", "gone", "<>", "param", (1,))]),
    ("w.ns IN ($1, $2) AND w.ns NOT IN ($3) AND NOT (w.name IN ($4, $5))",
     [("w", "ns", "IN", "param", (1, 2)), ("w", "ns", "NOT IN", "param", (3,)),
      ("w", "name", "NOT IN", "param", (4, 5))]),
    ("w.gone IS NULL AND w.ns IS NOT NULL",
     [("w", "gone", "IS NULL", "none", ()), ("w", "ns", "IS NOT NULL", "none", ())]),
    ("gone = $1", [("w", "gone", "=", "param", (1,))]),  # unqualified: its one relation
    # constants (the guard refuses them, and says so; policy still sees what they are)
    ("w.size = 0 AND w.gone = false AND w.ns = '' AND w.name = 'x' AND w.id = -1.50 AND w.ns IN ('a', 'b')",
     [("w", "size", "=", "const", (0,)), ("w", "gone", "=", "const", (False,)), ("w", "ns", "=", "const", ("",)),
      ("w", "name", "=", "const", ("x",)), ("w", "id", "=", "const", (Decimal("-1.50"),)),
      ("w", "ns", "IN", "const", ("a", "b"))]),
], ids=["whole-where", "and", "nested-and", "reversed", "not-equals", "in-lists", "null-tests", "unqualified",
        "constants"])
def test_conjuncts_are_the_simple_tests_anded_at_the_top_of_where(where, expected):
    sql = f"SELECT w.name FROM s.w w WHERE {where} LIMIT 1"
    assert conjuncts(sql) == [(a, "s", "w", c, op, kind, values) for a, c, op, kind, values in expected]


@pytest.mark.parametrize("where", [
    "w.gone = $1 OR $2",  # under OR: not every row
    "(w.gone = $1 OR w.name = $2)",
    "NOT (w.gone = $1)",  # NOT of anything but IN
    "NOT (NOT (w.gone IN ($1)))",
    "w.gone = $1::boolean",  # a cast is no single $n
    "w.gone = w.ns",  # two columns
    "$1 = $2",
    "w.gone = NULL",
    "w.ns IN ($1, 'x')",  # parameters and constants mixed
    "w.name LIKE $1 AND w.size BETWEEN $2 AND $3",  # not an always-filter's operator
    "x.gone = $1",  # no such alias
    "w.ctid = $1 AND w.secret = $2",  # a system column, a column the guard refuses
    "$1",
], ids=["or-a-parameter", "or", "not", "not-not-in", "cast", "two-columns", "two-parameters", "equals-null",
        "mixed-in", "like-between", "unknown-alias", "refused-columns", "bare-parameter"])
def test_other_shapes_are_not_conjuncts(where):
    assert conjuncts(f"SELECT w.name FROM s.w w WHERE {where} LIMIT 1") == []


def test_conjuncts_name_the_alias_so_a_table_read_twice_is_two_relations():
    sql = ("SELECT w.name FROM s.w w INNER JOIN s.w v ON v.id = w.id INNER JOIN s.c x ON x.wid = w.id "
           "WHERE w.gone = $1 AND x.size > $2 LIMIT 1")
    verdict = check(sql, FLAGS)
    assert verdict.ok and verdict.relations == {W, C}
    assert verdict.ranges == {("w", *W), ("v", *W), ("x", *C)}
    assert [(k.alias, k.column) for k in verdict.conjuncts] == [("w", "gone"), ("x", "size")]
    assert check("SELECT name FROM s.w LIMIT 1", FLAGS).ranges == {("w", *W)}  # the table's own name
    # unqualified and ambiguous between two aliases of one table: no conjunct (and the guard refuses it)
    ambiguous = "SELECT w.name FROM s.w w INNER JOIN s.w v ON v.id = w.id WHERE gone = $1 LIMIT 1"
    assert check(ambiguous, FLAGS).conjuncts == ()


def test_conjuncts_and_ranges_are_empty_without_where_or_when_the_walk_never_starts():
    assert check("SELECT w.name FROM s.w w LIMIT 1", FLAGS).conjuncts == ()
    for sql in ("SELEC 1", "DELETE FROM s.w", "SELECT w.name FROM s.w w WHERE w.gone = $1\0 LIMIT 1"):
        verdict = check(sql, FLAGS)
        assert verdict.conjuncts == () and verdict.ranges == frozenset()


@pytest.mark.parametrize("sql, expected", [
    # ANDed at the top of WHERE, either way round, or of an INNER JOIN's ON
    ("SELECT w.name FROM s.w w, s.c x WHERE x.wid = w.id AND w.gone = $1 LIMIT 1", {(("w", "id"), ("x", "wid"))}),
    ("SELECT w.name FROM s.w w INNER JOIN s.c x ON w.id = x.wid AND x.size > $1 LIMIT 1", {(("w", "id"), ("x", "wid"))}),
    ("SELECT w.name FROM s.w w INNER JOIN s.c x ON (x.size = w.size AND (x.wid = w.id)) LIMIT 1",
     {(("w", "size"), ("x", "size")), (("w", "id"), ("x", "wid"))}),
    # an INNER JOIN nested under a LEFT JOIN: a row it null-extends has neither side
    ("SELECT w.name FROM s.w w LEFT JOIN (s.c x INNER JOIN s.c y ON y.wid = x.wid) ON x.wid = w.id LIMIT 1",
     {(("x", "wid"), ("y", "wid"))}),
    # not for every row: a LEFT JOIN's ON, under OR or NOT, against a parameter, between other operators
    ("SELECT w.name FROM s.w w LEFT JOIN s.c x ON x.wid = w.id LIMIT 1", set()),
    ("SELECT w.name FROM s.w w INNER JOIN s.c x ON x.wid = w.id OR $1 LIMIT 1", set()),
    ("SELECT w.name FROM s.w w, s.c x WHERE NOT (x.wid = w.id) LIMIT 1", set()),
    ("SELECT w.name FROM s.w w, s.c x WHERE x.wid = $1 AND w.id <> x.wid AND w.id >= x.wid LIMIT 1", set()),
], ids=["where", "inner-on", "nested-and", "inner-under-left", "left-on", "or", "not", "other-operators"])
def test_equalities_are_the_column_equations_every_row_satisfies(sql, expected):
    verdict = check(sql, FLAGS)
    assert verdict.equalities == expected


def test_compared_pairs_each_column_of_a_test_in_where_or_on_with_its_other_operands():
    sql = ("SELECT w.name FROM s.w w INNER JOIN s.c x ON x.wid = w.id WHERE w.gone = $1 AND "
           "(w.ns IN ($2, $3::text) OR w.name LIKE $4) AND w.size BETWEEN $5 AND $6 ORDER BY w.size LIMIT 1")
    verdict = check(sql, FLAGS)
    assert verdict.ok, verdict.violations
    col = {"gone": ("s", "w", "gone"), "ns": ("s", "w", "ns"), "name": ("s", "w", "name"), "size": ("s", "w", "size"),
           "id": ("s", "w", "id"), "wid": ("s", "c", "wid")}
    assert verdict.compared == {
        (col["wid"], ("column", col["id"])), (col["id"], ("column", col["wid"])), (col["gone"], ("param", 1)),
        (col["ns"], ("param", 2)), (col["ns"], ("param", 3)), (col["name"], ("param", 4)),
        (col["size"], ("param", 5)), (col["size"], ("param", 6))}
    # outside WHERE and ON (here HAVING) a test is not a filter of rows read: the placement rule judges it
    having = "SELECT w.ns FROM s.w w GROUP BY w.ns HAVING max(w.size) > $1 LIMIT 1"
    assert check(having, FLAGS).compared == frozenset()


def test_conjunct_locations_point_at_the_test(allowed):
    sql = "SELECT c.key FROM lake.config_entries c\nWHERE c.key = $1 AND c.is_sensitive = $2 LIMIT 10"
    (_, filtered) = check(sql, allowed).conjuncts
    assert line_column(sql, filtered.location) == (2, 37)


def test_every_compiled_golden_writes_each_always_filter_as_a_top_level_conjunct(demo):
    """The compiler's contract parameters (ParamSlot.caller False) all meet a column in a top-level conjunct."""
    golden = yaml.safe_load((CASES / "golden.yaml").read_text())
    for case in golden:
        q = compile_exploration(case["source"], demo, case["role"])
        verdict = check(q.sql, allowed_for_role(demo, demo.role(case["role"])), len(q.params))
        pinned = {n for k in verdict.conjuncts if k.kind == "param" for n in k.values}
        contract = {i + 1 for i, slot in enumerate(q.slots) if not slot.caller}
        assert contract <= pinned, case["id"]
        assert len(verdict.ranges) == len(q.datasets) + len(q.parents), case["id"]  # parents: exists_with joins


def test_a_nul_is_refused_where_it_is_whatever_follows_it(allowed):
    sql = "SELECT w.name\nFROM lake.k8s_workloads w\0 LIMIT 1"
    verdict = check(sql, allowed)
    assert [v.kind for v in verdict.violations] == ["NulCharacter"]
    v = verdict.to_json(sql)["violations"][0]
    assert (v["line"], v["column"]) == (2, 26)
    # the same text up to the NUL is accepted: the NUL is the whole refusal
    assert check(sql.replace("\0", ""), allowed).ok
    surrogate = "SELECT w.name FROM lake.k8s_workloads w LIMIT 1 -- \ud800"
    assert check(surrogate, allowed).to_json(surrogate)["violations"][0]["kind"] == "Encoding"
