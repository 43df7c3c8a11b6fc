"""`ontoos doctor` on real PostgreSQL: clean on the demo (its stale and unsourced datasets are warnings),
and on a lake with planted drift a precise list of what moved, exit 2; 1 when it cannot run."""

from __future__ import annotations

import json

import pytest
import yaml

from ontoos_explore import __version__
from ontoos_explore.cli import main

from ..conftest import ROOT
from .conftest import PREFIX

CONTRACT = ROOT / "contracts" / "demo.yaml"
REGISTRY = {"queries": [
    {"id": "host_clusters", "title": "Host clusters", "status": "approved", "read_sets": ["engineering"],
     "columns": ["cluster"], "max_rows": 5,
     "parameters": [{"name": "provider", "type": "text", "examples": ["aws"]}],
     "sql": "SELECT h.cluster AS cluster FROM lake.hosts AS h WHERE h.provider = $1 LIMIT 6", "bind": ["provider"]},
    {"id": "db_names", "title": "Database names", "status": "pending", "read_sets": ["engineering"],
     "columns": ["name"], "max_rows": 5, "sql": "SELECT d.name AS name FROM lake.databases AS d LIMIT 6"},
    {"id": "no_example", "title": "Needs a value", "status": "approved", "read_sets": ["engineering"],
     "columns": ["cluster"], "max_rows": 5, "parameters": [{"name": "region", "type": "text"}],
     "sql": "SELECT h.cluster AS cluster FROM lake.hosts AS h WHERE h.hostname = $1 LIMIT 6", "bind": ["region"]},
    {"id": "by_default", "title": "A default to ask with", "status": "approved", "read_sets": ["engineering"],
     "columns": ["cluster"], "max_rows": 5, "parameters": [{"name": "provider", "type": "text", "default": "gcp"}],
     "sql": "SELECT h.cluster AS cluster FROM lake.hosts AS h WHERE h.provider = $1 LIMIT 6", "bind": ["provider"]},
]}


@pytest.fixture
def env(monkeypatch, tmp_path):
    for var in ("ONTOOS_CONTRACT", "ONTOOS_ROLE", "ONTOOS_DEBUG", "ONTOOS_QUERIES"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump(REGISTRY, sort_keys=False))
    monkeypatch.setenv("ONTOOS_CONTRACT", str(CONTRACT))
    monkeypatch.setenv("ONTOOS_ROLE_PREFIX", PREFIX)
    monkeypatch.setenv("ONTOOS_QUERIES", str(path))
    monkeypatch.setenv("ONTOOS_AUDIT_SPOOL", str(tmp_path / "spool"))
    return monkeypatch


def doctor(capsys, *argv) -> tuple[int, dict]:
    code = main(["doctor", "--json", *argv])
    out = capsys.readouterr().out
    report = json.loads(out)
    assert report["exit"] == code and report["ok"] is (code == 0)
    names = [c["name"] for c in report["checks"]]
    assert len(names) == len(set(names)), names  # each check once
    return code, {c["name"]: c for c in report["checks"]}


def test_doctor_on_the_demo_is_clean_with_the_lakes_warnings(pg_dsn, env, capsys):
    code, checks = doctor(capsys, "--dsn", pg_dsn)
    assert code == 0
    assert {n: c["status"] for n, c in checks.items()} == {
        "contract": "ok", "database": "ok", "drift": "ok", "grants": "ok", "freshness": "warn", "registry": "warn",
        "spool": "ok"}
    assert checks["database"]["details"][0]["standby"] is False  # a primary
    worrying = {d["dataset"]: d for d in checks["freshness"]["details"] if d["fresh"] is not True}
    assert set(worrying) == {"tables", "databases", "hosts"}  # cmdb is stale; hosts has no source
    assert worrying["hosts"]["unknown_because"] == "no source feeds hosts"
    entries = {d["id"]: d for d in checks["registry"]["details"]}
    assert entries["host_clusters"]["status"] == "ok" and entries["host_clusters"]["role"] == "analyst"
    assert entries["db_names"]["status"] == "ok" and entries["db_names"]["entry_status"] == "pending"
    assert entries["by_default"]["status"] == "ok"  # EXPLAINed with its default, as a caller leaving it out asks
    assert entries["no_example"] == {"id": "no_example", "status": "unchecked",
                                     "problem": "no example for region to EXPLAIN with"}


def test_doctor_on_a_lake_that_moved_lists_what_moved_with_its_place(drifted_dsn, env, capsys):
    code, checks = doctor(capsys, "--dsn", drifted_dsn)
    assert code == 2
    assert checks["drift"]["status"] == "fail" and checks["grants"]["status"] == "fail"
    lines = CONTRACT.read_text().splitlines()
    found = {d["place"]: d for d in checks["drift"]["details"]}
    assert set(found) == {"datasets.databases.relation", "datasets.hosts.columns.region",
                          "datasets.workloads.columns.replicas"}
    for place, d in found.items():
        line = int(d["where"].rsplit(":", 1)[1])
        assert place.split(".")[-1] + ":" in lines[line - 1]
    [grant] = checks["grants"]["details"]
    assert grant["kind"] == "grant_missing" and "ontoos_q_analyst cannot read lake.hosts (hostname)" in grant["message"]
    entries = {d["id"]: d for d in checks["registry"]["details"]}
    assert entries["db_names"]["status"] == "failed" and entries["db_names"]["code"] == "EX702"
    assert entries["host_clusters"]["status"] == "ok"  # it reads nothing that moved


def test_doctor_on_a_terminal_prints_a_table_of_what_is_wrong(drifted_dsn, env, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    code = main(["doctor", "--dsn", drifted_dsn])
    out = capsys.readouterr().out
    assert code == 2
    assert "FAIL  drift      3 finding(s)" in out
    assert "demo.yaml:" in out and "datasets.hosts.columns.region: lake.hosts.region does not exist" in out
    assert "tables: exact, STALE" in out and "workloads: exact" not in out  # only what is wrong
    assert out.rstrip().endswith("3 check(s) failed; exit 2")


def test_doctor_when_the_database_cannot_be_reached_fails_and_skips_the_rest(env, capsys, tmp_path):
    code, checks = doctor(capsys, "--dsn", f"postgresql://postgres@/postgres?host={tmp_path}&connect_timeout=1")
    assert code == 2 and checks["database"]["status"] == "fail"
    assert all(checks[n]["status"] == "skip" for n in ("drift", "grants", "freshness", "registry"))
    assert str(tmp_path) not in json.dumps(checks)  # nothing of the DSN


def test_doctor_with_a_contract_that_does_not_load_says_where(env, capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ndatasets: {}\nread_sets: {}\nroles: {x: {read_sets: [nope]}}\n")
    code, checks = doctor(capsys, "--contract", str(bad))
    assert code == 2 and checks["contract"]["status"] == "fail"
    assert any("bad.yaml:" in d["message"] for d in checks["contract"]["details"])


def test_doctor_that_cannot_run_exits_1(env, capsys):
    env.setenv("ONTOOS_POOL_MAX", "zero")
    code = main(["doctor", "--json"])
    assert code == 1 and json.loads(capsys.readouterr().out)["error"]["code"] == "EX907"


def test_stats_freshness_prints_each_readable_datasets_evidence(pg_dsn, env, capsys, monkeypatch):
    code = main(["stats", "freshness", "--dsn", pg_dsn, "--role", "viewer", "--format", "json"])
    answer = json.loads(capsys.readouterr().out)
    data = answer["data"]
    assert code == 0 and data["role"] == "viewer"
    assert answer["_notice"] == {"min_cli_version": __version__, "schema_drift": False,
                                 "contract_hash": answer["meta"]["contract_hash"]}
    assert [d["name"] for d in data["datasets"]] == ["archives", "containers", "images", "projects", "repo_stats",
                                                     "workloads"]
    code = main(["stats", "freshness", "--dsn", pg_dsn, "--role", "analyst", "--format", "table"])
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:]}
    assert "STALE" in rows["tables"] and "no source feeds hosts" in rows["hosts"] and "fresh" in rows["workloads"]


@pytest.mark.parametrize("bump, warned", [((0, 0, 0), False), ((0, 0, -1), False), ((0, 1, 0), True),
                                          ((1, 0, 0), True), (None, False)])
def test_a_cli_older_than_the_server_expects_warns_and_never_fails(bump, warned, capsys):
    from ontoos_explore import __version__
    from ontoos_explore.cli.doctor import warn_if_outdated

    mine = [int(p) for p in __version__.split(".")]
    minimum = None if bump is None else ".".join(str(max(0, a + b)) for a, b in zip(mine, bump))
    if bump == (0, 0, -1) and mine[2] == 0:
        minimum = __version__  # nothing older to name: the same version
    assert warn_if_outdated(minimum) is None
    err = capsys.readouterr().err
    assert ("older than the server expects" in err) is warned
    assert (f"min_cli_version {minimum}" in err) is warned


def test_a_publish_log_that_fails_to_read_fails_freshness_alone(pg_dsn, demo, env, capsys):
    from tests.databases import demo_database

    dsn = demo_database(pg_dsn, "badlog", demo, "ALTER TABLE lake.publish_log RENAME TO publish_log_kept",
                        "CREATE VIEW lake.publish_log AS SELECT source, batch_id, collected_at, published_at, "
                        "as_of FROM lake.publish_log_kept WHERE 1 / (length(source) - length(source)) = 1")
    code, checks = doctor(capsys, "--dsn", dsn)
    assert code == 2
    assert [n for n in checks] == ["contract", "database", "drift", "grants", "freshness", "registry", "spool"]
    assert checks["database"]["status"] == "ok" and checks["drift"]["status"] == "ok"  # kept, not skipped
    assert checks["freshness"]["status"] == "fail" and checks["freshness"]["details"] == [{"sqlstate": "22012"}]


def test_events_a_killed_server_left_in_the_spool_are_reported_not_claimed(pg_dsn, env, capsys, tmp_path):
    """doctor reads the spool and says what waits there (a warning: the next start writes it); it takes
    nothing, and a live owner's files are not counted."""
    from ontoos_explore.governance.audit import Spool, spool_directory
    from tests.governance.helpers import ev
    from tests.governance.test_audit import _down_dsn
    from tests.governance.test_audit_spool import _killed_with_events

    directory = spool_directory(tmp_path / "spool", pg_dsn)  # the store: the exploration database
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    _killed_with_events(_down_dsn(pg_dsn, nothing), directory, 7)
    alive = Spool(directory)
    alive.append(ev("doctor-live"))
    try:
        code, checks = doctor(capsys, "--dsn", pg_dsn)
    finally:
        alive.close()
    spool = checks["spool"]
    assert code == 0 and spool["status"] == "warn" and "7 audit events left by 1 ended" in spool["summary"]
    assert [d["events"] for d in spool["details"]] == [7]
    assert len(list(directory.glob("*.jsonl"))) == 2  # nothing was claimed
