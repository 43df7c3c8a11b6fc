"""`ontoos check-sql`: the guard and the contract's named-query rules on hand-written SQL, verdict as JSON,
exit 0/2."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ontoos_explore.cli import main

from tests.named_queries import CONFIG_KEYS_FROM, KEPT

INVENTORY = Path(__file__).resolve().parent / "cases" / "contracts" / "inventory.yaml"


def run(capsys, monkeypatch, sql: str, *args: str):
    monkeypatch.setattr("sys.stdin", io.StringIO(sql))
    code = main(["check-sql", *args])
    return code, json.loads(capsys.readouterr().out)


def test_allowed_sql_exits_0(capsys, monkeypatch):
    code, out = run(capsys, monkeypatch, 'SELECT h.hostname FROM lake.hosts h WHERE h.provider = $1 LIMIT 10',
                    "--read-set", "engineering")
    assert code == 0 and out["ok"] is True and out["violations"] == []
    assert out["relations"] == ["lake.hosts"] and out["columns"] == ["lake.hosts.hostname", "lake.hosts.provider"]


@pytest.mark.parametrize(
    "sql, kind",
    [
        ("DELETE FROM lake.hosts", "DeleteStmt"),
        ("SELECT h.ssh_private_key FROM lake.hosts h LIMIT 1", "ColumnRef"),
        ("SELECT pg_sleep(5), h.hostname FROM lake.hosts h LIMIT 1", "FuncCall"),
        ("SELECT t.relname FROM pg_catalog.pg_class t LIMIT 1", "RangeVar"),
    ],
)
def test_refused_sql_exits_2_and_explains(capsys, monkeypatch, sql, kind):
    code, out = run(capsys, monkeypatch, sql, "--read-set", "engineering")
    assert code == 2 and out["ok"] is False
    assert any(v["kind"] == kind and v["message"] for v in out["violations"])


def test_a_dataset_outside_the_read_set_is_refused(capsys, monkeypatch):
    sql = "SELECT h.hostname FROM lake.hosts h LIMIT 1"
    assert run(capsys, monkeypatch, sql, "--read-set", "published")[0] == 2
    assert run(capsys, monkeypatch, sql, "--read-set", "published", "--read-set", "engineering")[0] == 0


def test_max_rows_and_params(capsys, monkeypatch):
    sql = "SELECT h.hostname FROM lake.hosts h WHERE h.vcpus > $1 LIMIT 11"
    assert run(capsys, monkeypatch, sql, "--read-set", "engineering", "--max-rows", "10")[0] == 0
    code, out = run(capsys, monkeypatch, sql, "--read-set", "engineering", "--max-rows", "9")
    assert code == 2 and out["violations"][0]["kind"] == "Limit" and "at most 10" in out["violations"][0]["message"]
    assert run(capsys, monkeypatch, sql, "--read-set", "engineering", "--params", "2")[0] == 2


def test_unknown_read_set_is_an_envelope(capsys, monkeypatch):
    code, out = run(capsys, monkeypatch, "SELECT 1", "--read-set", "publishd")
    assert code == 2 and out["error"]["subtype"] == "UNKNOWN_READ_SET" and "'published'" in out["error"]["hint"]


def test_sql_from_a_file(tmp_path, capsys):
    f = tmp_path / "q.sql"
    f.write_text("SELECT h.hostname FROM lake.hosts h LIMIT 5")
    assert main(["check-sql", "--read-set", "engineering", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


# ---------------------------------------------------------------- the contract's rules, as the registry applies them


def problems(out) -> list[tuple[str, str]]:
    return [(v["kind"], v["message"]) for v in out["violations"]]


def test_a_hidden_column_selected_without_the_always_filter_is_refused_for_both(capsys, monkeypatch):
    code, out = run(capsys, monkeypatch, "SELECT c.key, c.is_sensitive FROM lake.config_entries c LIMIT 1",
                    "--read-set", "engineering")
    assert code == 2 and out["ok"] is False
    found = problems(out)
    assert ("HiddenColumn", "lake.config_entries.is_sensitive is not readable: it may only filter or join, "
                            "not appear in the SELECT list") in found
    assert any(kind == "AlwaysFilter" and "without the contract's always-filter on is_sensitive" in message
               for kind, message in found)


@pytest.mark.parametrize("sql, says", [
    ("SELECT c.key FROM lake.config_entries c WHERE (c.is_sensitive = $1 OR $2) LIMIT 1",
     "c.is_sensitive = false must be ANDed at the top level of WHERE"),
    ("SELECT c.key FROM lake.config_entries c WHERE c.is_sensitive = $1 LIMIT 1",
     "$1 is a parameter whose value check-sql cannot verify"),
    ("SELECT c.key FROM lake.config_entries c WHERE c.is_sensitive <> $1 LIMIT 1", "tested with <>, not ="),
    ("SELECT c.key FROM lake.config_entries c WHERE c.key = $1 ORDER BY c.is_sensitive LIMIT 1",
     "not appear in ORDER BY"),
    ("SELECT count(*) FROM lake.config_entries c WHERE c.key = $1 GROUP BY c.is_sensitive LIMIT 1",
     "not appear in GROUP BY"),
    ("SELECT p.name FROM lake.gitlab_projects p WHERE p.is_deleted = $1 LIMIT 1",
     "$1 is a parameter whose value check-sql cannot verify"),
], ids=["ored", "parameter", "wrong-operator", "order-by", "group-by", "projects"])
def test_always_filters_and_hidden_columns_are_held_to_the_contract(capsys, monkeypatch, sql, says):
    code, out = run(capsys, monkeypatch, sql, "--read-set", "engineering", "--read-set", "published")
    assert code == 2 and out["ok"] is False
    assert any(says in message for _, message in problems(out)), problems(out)


def test_every_problem_is_listed(capsys, monkeypatch):
    sql = ("SELECT c.is_sensitive FROM lake.config_entries c "
           "INNER JOIN lake.k8s_workloads w ON w.workload_id = c.workload_id ORDER BY c.is_sensitive LIMIT 1")
    code, out = run(capsys, monkeypatch, sql, "--read-set", "engineering", "--read-set", "published")
    assert code == 2
    # configs' and workloads' always-filters, is_sensitive selected and sorted on, workloads' project not joined
    assert sorted(kind for kind, _ in problems(out)) == ["AlwaysFilter", "AlwaysFilter", "HiddenColumn", "HiddenColumn",
                                                         "ParentJoin"]


def test_a_literal_always_filter_satisfies_the_rule_though_the_guard_still_wants_parameters(capsys, monkeypatch):
    sql = f"SELECT c.key {CONFIG_KEYS_FROM} WHERE {KEPT.replace('${n}', 'false')} LIMIT 1"
    code, out = run(capsys, monkeypatch, sql, "--read-set", "engineering")
    assert code == 2 and [kind for kind, _ in problems(out)] == ["A_Const"] * 3


def test_a_child_read_without_its_parents_is_named(capsys, monkeypatch):
    code, out = run(capsys, monkeypatch, "SELECT c.key FROM lake.config_entries c WHERE c.is_sensitive = $1 LIMIT 1",
                    "--read-set", "engineering")
    assert code == 2 and [kind for kind, _ in problems(out)] == ["AlwaysFilter", "ParentJoin"]
    assert "without its parent workloads" in problems(out)[1][1]


def test_an_always_filter_it_can_verify_passes(tmp_path, capsys, monkeypatch):
    """A contract whose always-filter needs no value (IS NOT NULL): check-sql verifies it from the SQL alone."""
    contract = tmp_path / "inventory.yaml"
    contract.write_text(INVENTORY.read_text().replace('{column: is_test_order, op: "=", value: false}',
                                                      '{column: placed_at, op: "is not null"}'))
    args = ("--contract", str(contract), "--read-set", "logistics")
    ok = "SELECT s.order_no FROM sales.order_headers s WHERE s.site_no = $1 AND s.placed_at IS NOT NULL LIMIT 5"
    code, out = run(capsys, monkeypatch, ok, *args)
    assert code == 0 and out["ok"] is True, out
    code, out = run(capsys, monkeypatch, ok.replace("IS NOT NULL", "IS NULL"), *args)
    assert code == 2 and "tested with IS NULL, not IS NOT NULL" in out["violations"][0]["message"]
    code, out = run(capsys, monkeypatch, ok.replace("AND s.placed_at", "OR s.placed_at"), *args)
    assert code == 2 and "always-filter on placed_at" in out["violations"][0]["message"]


@pytest.mark.parametrize("sql", [
    "SELECT h.hostname FROM lake.hosts h WHERE h.provider = $1\0 OR true LIMIT 10",
    "\0SELECT h.hostname FROM lake.hosts h LIMIT 10",
    "SELECT h.hostname FROM lake.hosts h LIMIT 10\0",
    "SELECT h.hostname FROM lake.hosts h LIMIT 10;\0 DROP TABLE lake.hosts",
], ids=["before-an-or", "first", "last", "before-a-statement"])
def test_a_nul_anywhere_is_refused(capsys, monkeypatch, sql):
    code, out = run(capsys, monkeypatch, sql, "--read-set", "engineering")
    assert code == 2 and out["ok"] is False
    assert [v["kind"] for v in out["violations"]] == ["NulCharacter"]


def test_a_nul_in_a_file_is_refused(tmp_path, capsys):
    f = tmp_path / "q.sql"
    f.write_bytes(b"SELECT h.hostname FROM lake.hosts h LIMIT 5\x00 UNION SELECT h.ssh_private_key FROM lake.hosts h")
    assert main(["check-sql", "--read-set", "engineering", str(f)]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["violations"][0]["kind"] == "NulCharacter" and out["violations"][0]["column"] == 44


# ---------------------------------------------------------------- --bind: what each $n is bound to, as the registry binds it

FALSE = {"value": False, "type": "boolean"}
BOUND = f"SELECT c.key {CONFIG_KEYS_FROM} WHERE c.key = $1 AND {KEPT.format(n=2)} LIMIT 5"


def test_with_bind_an_always_filter_bound_to_the_contracts_constant_passes(capsys, monkeypatch):
    code, out = run(capsys, monkeypatch, BOUND, "--read-set", "engineering", "--bind", json.dumps(["key", FALSE]))
    assert code == 0 and out["ok"] is True, out
    # without it, the same SQL cannot be verified, and fails closed
    code, out = run(capsys, monkeypatch, BOUND, "--read-set", "engineering")
    assert code == 2 and {kind for kind, _ in problems(out)} == {"AlwaysFilter"}
    assert all("cannot verify without --bind" in message for _, message in problems(out))


@pytest.mark.parametrize("bind, says", [
    (["key", "sensitive"], "$2 is the caller's parameter 'sensitive', not the contract's constant"),
    (["key", {"value": True, "type": "boolean"}], "$2 is bound to true, not the contract's false"),
    (["key", {"value": 0, "type": "integer"}], "$2 is bound to an integer constant, not a boolean one"),
], ids=["a-caller-parameter", "another-constant", "another-type"])
def test_with_bind_an_always_filter_bound_otherwise_is_refused(capsys, monkeypatch, bind, says):
    code, out = run(capsys, monkeypatch, BOUND, "--read-set", "engineering", "--bind", json.dumps(bind))
    assert code == 2 and all(kind == "AlwaysFilter" for kind, _ in problems(out))
    assert len(problems(out)) == 3 and all(says in message for _, message in problems(out))


@pytest.mark.parametrize("args, says", [
    (["--bind", "[1, 2"], "--bind must be a JSON list"),
    (["--bind", '[{"value": 1}]'], "--bind must be a JSON list"),
    (["--bind", '{"a": 1}'], "--bind must be a JSON list"),
    (["--bind", '["key"]'], None),  # one value for two $n: the guard says which is missing
    (["--params", "3", "--bind", json.dumps(["key", FALSE])], "--params 3 but --bind has 2 values"),
], ids=["not-json", "constant-without-type", "not-a-list", "too-few", "params-disagree"])
def test_a_bad_bind_list_is_an_envelope_or_a_violation(capsys, monkeypatch, args, says):
    code, out = run(capsys, monkeypatch, BOUND, "--read-set", "engineering", *args)
    assert code == 2 and out["ok"] is False
    if says is None:
        assert problems(out)[0] == ("ParamRef", "$2 is not one of the 1 given parameters")
        assert "$2 is bound to nothing" in problems(out)[-1][1]
    else:
        assert out["error"]["code"] == "EX102" and says in out["error"]["message"] and "--bind" in out["error"]["hint"]
