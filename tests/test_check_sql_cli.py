"""`ontoos check-sql`: the guard on hand-written SQL, verdict as JSON, exit 0/2."""

from __future__ import annotations

import io
import json

import pytest

from ontoos_explore.cli import main


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
    f.write_text("SELECT w.name FROM lake.k8s_workloads w LIMIT 5")
    assert main(["check-sql", "--read-set", "published", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
