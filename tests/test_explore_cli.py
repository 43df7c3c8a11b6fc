"""`ontoos explore` on a real PostgreSQL, and the embedded default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ontoos_explore.cli import main
from tests.databases import pg_data_dir

QUESTION = "explore workloads fields namespace, count() as n where kind = 'Deployment' group by namespace order by namespace limit 5"


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, out


@pytest.fixture
def dsn_env(monkeypatch, pg_dsn):
    monkeypatch.setenv("ONTOOS_DSN", pg_dsn)
    return pg_dsn


def test_three_forms_give_the_same_rows(capsys, dsn_env):
    forms = [
        ["-q", QUESTION],
        ["--json", json.dumps({"dataset": "workloads", "fields": ["namespace", "count() as n"],
                               "filter": "kind = 'Deployment'", "group_by": ["namespace"],
                               "order_by": ["namespace"], "limit": 5})],
        ["--dataset", "workloads", "--fields", "namespace,count() as n", "--filter", "kind=Deployment",
         "--group-by", "namespace", "--order-by", "namespace", "--limit", "5"],
    ]
    answers = []
    for form in forms:
        code, out = run(capsys, "explore", "--role", "analyst", "--format", "json", *form)
        env = json.loads(out)
        assert code == 0 and env["ok"] is True
        answers.append((env["data"], env["meta"]["fingerprint"]))
    assert answers[0] == answers[1] == answers[2]
    assert len(answers[0][0]["rows"]) == 5


def test_table_output(capsys, dsn_env):
    code, out = run(capsys, "explore", "--role", "analyst", "--format", "table", "-q", QUESTION)
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split() == ["namespace", "n"] and set(lines[1]) <= {"-", " "}
    assert "5 rows (truncated: more rows exist)" in out


def test_refusal_and_dry_run(capsys, dsn_env):
    code, out = run(capsys, "explore", "--role", "reader", "-q", "explore hosts fields hostname")
    assert code == 2 and json.loads(out)["error"]["subtype"] == "UNKNOWN_DATASET"
    code, out = run(capsys, "explore", "--role", "analyst", "--dry-run", "-q", QUESTION)
    env = json.loads(out)
    assert code == 0 and env["data"]["plan"]["datasets"] == ["workloads"] and env["meta"]["dry_run"] is True


def test_a_freshness_requirement_from_the_command_line(capsys, dsn_env):
    """--max-age and --consistency are the JSON form's `require`: tables (fed by the demo's stale cmdb
    source) refused with how old it is and no rows; workloads (a fresh source) answered, read in one snapshot."""
    code, out = run(capsys, "explore", "--role", "analyst", "--format", "json", "--max-age", "3600",
                    "-q", "explore tables fields table_name limit 2")
    env = json.loads(out)
    age = env["meta"]["evidence"]["freshness"]["age_seconds"]
    assert code == 2 and env["error"]["subtype"] == "CONSISTENCY_UNVERIFIED" and "data" not in env
    assert age > 3600 and f"collected {age} s" in env["error"]["message"] and str(age) in env["error"]["hint"]
    code, out = run(capsys, "explore", "--role", "analyst", "--format", "json", "--max-age", str(age + 86400),
                    "--consistency", "fixed_read", "-q", "explore workloads fields name limit 2")
    env = json.loads(out)
    assert code == 0 and len(env["data"]["rows"]) == 2 and env["meta"]["evidence"]["consistency"] == "fixed_read"
    code, out = run(capsys, "queries", "run", "workloads_in_namespace", "--role", "viewer", "--format", "json",
                    "--max-age", "1", "-p", "namespace=prod-fp")
    env = json.loads(out)
    assert code == 2 and env["error"]["subtype"] == "CONSISTENCY_UNVERIFIED" and "data" not in env


def test_a_refusal_before_the_database_carries_the_contracts_notice(capsys, dsn_env):
    from ontoos_explore import __version__

    code, out = run(capsys, "explore", "--role", "viewer", "-q", "explore workloads fields name limit 1")
    env = json.loads(out)
    assert code == 2 and env["error"]["subtype"] == "CAPABILITY_NOT_FOUND"
    code, out = run(capsys, "explore", "--role", "analyst", "-q", "explore workloads fields name limit 1")
    answered = json.loads(out)["_notice"]
    assert env["_notice"] == answered == {"min_cli_version": __version__, "schema_drift": False,
                                          "contract_hash": answered["contract_hash"]}


def test_unreachable_database_is_an_envelope(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("ONTOOS_DSN", f"postgresql://postgres@/postgres?host={tmp_path}&connect_timeout=1")
    code, out = run(capsys, "explore", "--role", "analyst", "-q", QUESTION)
    env = json.loads(out)
    assert code == 1 and env["error"]["subtype"] == "UPSTREAM_UNAVAILABLE"
    assert str(tmp_path) not in out


def test_a_database_without_the_query_roles_says_how_to_fix_it(capsys, monkeypatch, pg_dsn):
    monkeypatch.setenv("ONTOOS_DSN", pg_dsn)
    monkeypatch.setenv("ONTOOS_ROLE_PREFIX", "nobody_made_these_")
    code, out = run(capsys, "explore", "--role", "analyst", "-q", QUESTION)
    env = json.loads(out)
    assert code == 1 and env["error"]["subtype"] == "DATABASE_SETUP" and "ontoos grants" in env["error"]["hint"]


def demo_roles() -> list[str]:
    import yaml

    from tests.conftest import ROOT

    return list(yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text(encoding="utf-8"))["roles"])


def test_grants_prints_the_script(capsys):
    code, out = run(capsys, "grants")
    assert code == 0 and out.count("CREATE ROLE") == len(demo_roles()) and "GRANT SELECT" in out


def test_embedded_default_starts_loads_and_reuses():
    """No DSN: the CLI starts pgserver in the data dir, loads the demo once, reuses it next time."""
    env = {k: v for k, v in os.environ.items() if k not in ("ONTOOS_DSN",)}
    data_dir = pg_data_dir("cli-embedded")
    env["ONTOOS_DATA_DIR"] = str(data_dir)
    script = Path(sys.executable).parent / "ontoos"
    argv = [str(script), "explore", "--role", "analyst", "--format", "json", "-q", QUESTION]
    first = subprocess.run(argv, capture_output=True, env=env, timeout=180)
    assert first.returncode == 0, first.stdout + first.stderr
    assert (data_dir / "PG_VERSION").exists()
    second = subprocess.run(argv, capture_output=True, env=env, timeout=180)
    assert second.returncode == 0
    assert json.loads(first.stdout)["data"] == json.loads(second.stdout)["data"]
    assert b"Traceback" not in first.stderr + second.stderr
