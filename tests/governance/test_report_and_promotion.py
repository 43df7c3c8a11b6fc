"""Governance, reports and promotion.

- The candidate rule: a fingerprint answered N times by M principals in the
  window is a candidate; one use or one principal fewer, or uses older than
  the window, is not.
- The report views (by subtype, dataset, column with who, principal, day;
  recent with message and hint; recurring; totals) with their filters, on a
  known set of synthetic events; `ontoos audit --format json` prints the same.
- The round trip: several principals ask the same question with other values
  through MCP with the audit on; the fingerprint becomes a candidate;
  `ontoos promote` writes a pending named query (parameters named after the
  columns, typed from the contract, the observed range as examples, SQL the
  guard accepts); pending is not runnable; `ontoos queries approve`; the
  approved query runs through MCP with new values and matches hand-written SQL;
  `ontoos queries list|show|run` work.
- A registry with broken hand-written entries: each is reported and skipped.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter
from decimal import Decimal
from typing import Any

import anyio
import psycopg
import pytest
import yaml
from jsonschema import Draft202012Validator
from mcp import Client

from ontoos_explore import cli
from ontoos_explore.allowed import allowed_for_read_sets
from ontoos_explore.engine.executor import Executor
from ontoos_explore.governance import report as rep
from ontoos_explore.governance.audit import AuditWriter
from ontoos_explore.governance.authoring import normalize
from ontoos_explore.governance.registry import Registry
from ontoos_explore.guard import check
from ontoos_explore.pipeline import compile_exploration
from ontoos_explore.server.config import Principal
from ontoos_explore.server.mcp_server import build_server, fixed
from ontoos_explore.server.tools import Tools
from ontoos_explore.service import Explorer
from tests.named_queries import HOSTS_BY_PROVIDER

from .helpers import ev, fetch_events, insert, refusal, reset_audit

H = dt.timedelta(hours=1)
D = dt.timedelta(days=1)


@pytest.fixture
def cli_env(monkeypatch, pg_dsn):
    for k in ("ONTOOS_AUDIT_DSN", "ONTOOS_AUDIT", "ONTOOS_CONTRACT", "ONTOOS_ROLE", "ONTOOS_QUERIES",
              "ONTOOS_PROMOTE_USES", "ONTOOS_PROMOTE_PRINCIPALS", "ONTOOS_PROMOTE_DAYS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("ONTOOS_DSN", pg_dsn)
    return pg_dsn


def run_cli(capsys, *argv: str) -> tuple[int, Any, str]:
    code = cli.main(list(argv))
    return _captured(capsys, code)


async def arun_cli(capsys, *argv: str) -> tuple[int, Any, str]:
    """cli.main from an async test: in a thread, since commands that query run their own event loop."""
    code = await anyio.to_thread.run_sync(cli.main, list(argv))
    return _captured(capsys, code)


def _captured(capsys, code: int) -> tuple[int, Any, str]:
    captured = capsys.readouterr()
    try:
        out = json.loads(captured.out)
    except json.JSONDecodeError:
        out = captured.out
    return code, out, captured.err


def _report(dsn: str, f: rep.Filters, rule: rep.Rule = rep.Rule()) -> dict[str, Any]:
    with psycopg.connect(dsn) as conn:
        return rep.report(conn, f, rule)


def _candidates(dsn: str, rule: rep.Rule, dataset: str | None = None) -> dict[str, dict[str, Any]]:
    with psycopg.connect(dsn) as conn:
        return {c["fingerprint"]: c for c in rep.candidates(conn, rule, dataset)}


# ---------------------------------------------------------------- the candidate rule


def uses(fingerprint: str, per_principal: dict[str, int], *, ago: dt.timedelta = H, outcome: str = "ok",
         dataset: str = "workloads") -> list:
    out = []
    for principal, n in per_principal.items():
        for i in range(n):
            out.append(ev(principal, ago=ago + i * dt.timedelta(minutes=1), outcome=outcome, dataset=dataset,
                          fingerprint=fingerprint, exploration=f"explore {dataset} fields name where x = {i}",
                          **({"error_type": "validation", "error_subtype": "UNKNOWN_FIELD", "error_code": "EX201"}
                             if outcome != "ok" else {"rows": 1, "truncated": False, "elapsed_ms": 1.0})))
    return out


def test_the_default_rule_is_five_uses_two_principals_fourteen_days():
    assert rep.Rule() == rep.Rule(min_uses=5, min_principals=2, days=14)


def test_candidate_rule_thresholds(pg_dsn):
    reset_audit(pg_dsn)
    events = [
        *uses("at_threshold", {"p1": 4, "p2": 1}),                      # 5 uses, 2 principals: yes
        *uses("above", {"p1": 3, "p2": 3, "p3": 1}),                    # 7 uses, 3 principals: yes
        *uses("one_use_short", {"p1": 3, "p2": 1}),                      # 4 uses: no
        *uses("one_principal_short", {"p1": 5}),                         # 1 principal: no
        *uses("old_use", {"p1": 4}), *uses("old_use", {"p2": 1}, ago=15 * D),       # 5th use outside: no
        *uses("old_principal", {"p1": 5}), *uses("old_principal", {"p2": 2}, ago=20 * D),  # 2nd principal outside
        *uses("just_inside", {"p1": 4}), *uses("just_inside", {"p2": 1}, ago=14 * D - H),  # inside by an hour: yes
        *uses("refusals_do_not_count", {"p1": 4}), *uses("refusals_do_not_count", {"p2": 3}, outcome="refused"),
        *uses("failures_do_not_count", {"p1": 4}), *uses("failures_do_not_count", {"p2": 1}, outcome="failed"),
        *uses("named:already_a_query", {"p1": 5, "p2": 5}),             # a named query's runs: never
        *uses("on_hosts", {"p1": 3, "p3": 2}, dataset="hosts"),         # yes, on another dataset
    ]
    insert(pg_dsn, events)
    rule = rep.Rule(min_uses=5, min_principals=2, days=14)
    found = _candidates(pg_dsn, rule)
    assert sorted(found) == ["above", "at_threshold", "just_inside", "on_hosts"]
    assert (found["at_threshold"]["uses"], found["at_threshold"]["principals"]) == (5, 2)
    assert (found["above"]["uses"], found["above"]["principals"]) == (7, 3)
    assert (found["just_inside"]["uses"], found["just_inside"]["principals"]) == (5, 2)
    assert found["at_threshold"]["dataset"] == "workloads" and found["on_hosts"]["dataset"] == "hosts"
    assert found["at_threshold"]["example"] == "explore workloads fields name where x = 0"  # the newest use
    # ordered by uses, most first
    assert list(found)[0] == "above"

    # the thresholds are parameters
    assert sorted(_candidates(pg_dsn, rep.Rule(min_uses=4, min_principals=2, days=14))) == \
        ["above", "at_threshold", "just_inside", "on_hosts", "one_use_short"]
    assert sorted(_candidates(pg_dsn, rep.Rule(min_uses=5, min_principals=1, days=14))) == \
        sorted(["above", "at_threshold", "just_inside", "on_hosts", "one_principal_short", "old_principal"])
    assert sorted(_candidates(pg_dsn, rep.Rule(min_uses=5, min_principals=2, days=30))) == \
        sorted(["above", "at_threshold", "just_inside", "on_hosts", "old_use", "old_principal"])
    assert sorted(_candidates(pg_dsn, rep.Rule(min_uses=7, min_principals=3, days=14))) == ["above"]
    # and the dataset filter applies
    assert sorted(_candidates(pg_dsn, rule, "hosts")) == ["on_hosts"]


# ---------------------------------------------------------------- the report views

ALICE, BOB, CAROL = "gov-rep-alice", "gov-rep-bob", "gov-rep-carol"


def report_events() -> list:
    secret = "SECRET_COLUMN_DENIED"
    return [
        refusal(ALICE, "UNKNOWN_FIELD", "EX201", dataset="workloads", column="env_dump", reason=secret, ago=1 * H,
                fingerprint="ir:envdump", message="'env_dump' is not a readable column of workloads",
                hint="readable columns of workloads: cluster, name", exploration="explore workloads fields env_dump"),
        refusal(ALICE, "UNKNOWN_FIELD", "EX201", dataset="workloads", column="env_dump", reason=secret, ago=2 * H,
                fingerprint="ir:envdump"),
        refusal(ALICE, "UNKNOWN_FIELD", "EX201", dataset="workloads", column="env_dump", reason=secret, ago=D + H,
                fingerprint="ir:envdump"),
        refusal(BOB, "UNKNOWN_FIELD", "EX201", dataset="workloads", column="env_dump", reason=secret, ago=3 * H,
                role="viewer", fingerprint="ir:envdump"),
        refusal(ALICE, "UNKNOWN_FIELD", "EX201", dataset="hosts", column="ssh_private_key", reason=secret, ago=4 * H,
                message="'ssh_private_key' is not a readable column of hosts", hint="readable columns of hosts: hostname"),
        refusal(BOB, "UNKNOWN_DATASET", "EX202", dataset="hosts", reason="OUT_OF_SCOPE", ago=5 * H, role="viewer",
                message="'hosts' is not a readable dataset", hint="readable datasets: projects, workloads"),
        refusal(BOB, "UNKNOWN_DATASET", "EX202", dataset="hosts", reason="OUT_OF_SCOPE", ago=2 * D, role="viewer"),
        refusal(CAROL, "SYNTAX_ERROR", "EX101", ago=6 * H, role="admin", message="unexpected 'wher'",
                hint="expected 'where'", surface="rest"),
        refusal(CAROL, "SYNTAX_ERROR", "EX101", ago=7 * H, role="admin", surface="rest"),
        refusal(ALICE, "QUERY_BUDGET_EXCEEDED", "EX406", dataset="table_refs", error_type="policy", ago=dt.timedelta(minutes=30),
                message="table_refs is a heavy dataset and cannot be explored without a filter",
                hint="add a where clause"),
        refusal(BOB, "UNKNOWN_FIELD", "EX201", dataset="workloads", column="is_deleted", reason="HIDDEN_COLUMN_DENIED",
                ago=8 * H, role="viewer"),
        refusal("anonymous", "AUTH_REQUIRED", "EX502", error_type="auth", role=None, ago=9 * H,
                message="a bearer token is required", hint="send Authorization: Bearer <token>"),
        # outside the default window
        refusal(ALICE, "UNKNOWN_FIELD", "EX201", dataset="configs", column="value", reason=secret, ago=30 * D),
        # a failure, not a refusal
        ev(CAROL, outcome="failed", role="admin", dataset="workloads", error_type="internal", error_subtype="INTERNAL_ERROR",
           error_code="EX904", reason="DATABASE_DENIED", message="the exploration could not be run", ago=2 * H,
           fingerprint="fp_failed"),
        # answered
        *[ev(p, dataset="workloads", fingerprint="fp_workloads", exploration=f"explore workloads fields name where replicas > {i}",
             rows=3, truncated=False, elapsed_ms=2.0, ago=(10 + i) * H) for i, p in enumerate([ALICE, ALICE, ALICE, BOB, BOB])],
        ev(CAROL, dataset="hosts", fingerprint="fp_hosts", exploration="explore hosts fields hostname", rows=1, ago=H),
    ]


@pytest.fixture
def report_data(pg_dsn):
    reset_audit(pg_dsn)
    events = report_events()
    insert(pg_dsn, events)
    return events


def _kv(rows):
    return [(r["key"], r["n"]) for r in rows]


def _by_day_expected(dsn: str, events, days: int, pred=lambda e: True) -> list[tuple[str, int]]:
    tz = dt.timezone.utc  # the report's days are UTC days, whatever the server's TimeZone
    now = dt.datetime.now(dt.timezone.utc)
    counts: dict[str, int] = {}
    for e in events:
        if e.outcome == "refused" and e.at >= now - days * D + dt.timedelta(minutes=1) and pred(e):
            day = e.at.astimezone(tz).date().isoformat()
            counts[day] = counts.get(day, 0) + 1
    return sorted(counts.items())


def test_report_views_on_known_events(pg_dsn, report_data):
    r = _report(pg_dsn, rep.Filters())
    assert r["filters"] == {"days": 14, "dataset": None, "subtype": None, "principal": None, "surface": None,
                            "outcome": None}
    assert r["totals"] == {"requests": 19, "refused": 12, "failed": 1, "principals": 4}
    assert _kv(r["by_subtype"]) == [("UNKNOWN_FIELD", 6), ("SYNTAX_ERROR", 2), ("UNKNOWN_DATASET", 2),
                                    ("AUTH_REQUIRED", 1), ("QUERY_BUDGET_EXCEEDED", 1)]
    assert _kv(r["by_dataset"]) == [("workloads", 5), ("hosts", 3), ("table_refs", 1)]
    assert _kv(r["by_principal"]) == [(ALICE, 5), (BOB, 4), (CAROL, 2), ("anonymous", 1)]
    cols = [(c["dataset"], c["column_name"], c["reason"], c["n"], c["principals"], sorted(c["who"])) for c in r["by_column"]]
    assert cols == [
        ("workloads", "env_dump", "SECRET_COLUMN_DENIED", 4, 2, [ALICE, BOB]),
        ("hosts", "ssh_private_key", "SECRET_COLUMN_DENIED", 1, 1, [ALICE]),
        ("workloads", "is_deleted", "HIDDEN_COLUMN_DENIED", 1, 1, [BOB]),
    ]
    assert [(d["day"], d["n"]) for d in r["by_day"]] == _by_day_expected(pg_dsn, report_data, 14)
    assert sum(d["n"] for d in r["by_day"]) == 12

    recent = r["recent"]
    assert len(recent) == 12
    assert [e["at"] for e in recent] == sorted((e["at"] for e in recent), reverse=True)
    first = recent[0]
    assert (first["principal"], first["subtype"], first["code"], first["dataset"]) == \
        (ALICE, "QUERY_BUDGET_EXCEEDED", "EX406", "table_refs")
    assert first["message"] == "table_refs is a heavy dataset and cannot be explored without a filter"
    assert first["hint"] == "add a where clause"
    secret = next(e for e in recent if e["exploration"] == "explore workloads fields env_dump")
    assert secret["message"] == "'env_dump' is not a readable column of workloads"
    assert secret["hint"] == "readable columns of workloads: cluster, name"
    assert {e["surface"] for e in recent if e["principal"] == CAROL} == {"rest"}
    assert "reason" not in first and "column_name" not in first  # recent shows what the caller saw

    rec = [(e["fingerprint"], e["uses"], e["principals"], e["ok"]) for e in r["recurring"]]
    assert rec == [("fp_workloads", 5, 2, 5), ("ir:envdump", 4, 2, 0), ("fp_failed", 1, 1, 0), ("fp_hosts", 1, 1, 1)]
    assert r["recurring"][0]["example"] == "explore workloads fields name where replicas > 0"  # the newest
    assert [(c["fingerprint"], c["uses"], c["principals"]) for c in r["candidates"]] == [("fp_workloads", 5, 2)]
    assert r["rule"] == {"min_uses": 5, "min_principals": 2, "days": 14}


def test_report_filters(pg_dsn, report_data):
    # dataset
    r = _report(pg_dsn, rep.Filters(dataset="workloads"))
    assert r["totals"] == {"requests": 11, "refused": 5, "failed": 1, "principals": 3}
    assert _kv(r["by_subtype"]) == [("UNKNOWN_FIELD", 5)]
    assert _kv(r["by_dataset"]) == [("workloads", 5)]
    assert _kv(r["by_principal"]) == [(ALICE, 3), (BOB, 2)]
    assert [(c["column_name"], c["n"]) for c in r["by_column"]] == [("env_dump", 4), ("is_deleted", 1)]
    assert len(r["recent"]) == 5 and {e["dataset"] for e in r["recent"]} == {"workloads"}
    assert [e["fingerprint"] for e in r["recurring"]] == ["fp_workloads", "ir:envdump", "fp_failed"]
    assert [c["fingerprint"] for c in r["candidates"]] == ["fp_workloads"]
    assert _report(pg_dsn, rep.Filters(dataset="hosts"))["candidates"] == []

    # subtype
    r = _report(pg_dsn, rep.Filters(subtype="UNKNOWN_DATASET"))
    assert r["totals"]["refused"] == 2 and r["totals"]["requests"] == 2
    assert _kv(r["by_subtype"]) == [("UNKNOWN_DATASET", 2)]
    assert _kv(r["by_dataset"]) == [("hosts", 2)]
    assert _kv(r["by_principal"]) == [(BOB, 2)]
    assert r["by_column"] == []
    assert [e["subtype"] for e in r["recent"]] == ["UNKNOWN_DATASET", "UNKNOWN_DATASET"]

    # both
    r = _report(pg_dsn, rep.Filters(dataset="hosts", subtype="UNKNOWN_FIELD"))
    assert [(c["dataset"], c["column_name"], c["n"]) for c in r["by_column"]] == [("hosts", "ssh_private_key", 1)]
    assert _kv(r["by_principal"]) == [(ALICE, 1)]

    # window: 1 day leaves out what is older than 24 hours; 60 days brings the old configs.value in
    r = _report(pg_dsn, rep.Filters(days=1))
    assert r["totals"]["refused"] == 10
    assert [(c["column_name"], c["n"]) for c in r["by_column"]][0] == ("env_dump", 3)
    assert sum(d["n"] for d in r["by_day"]) == 10
    assert [(d["day"], d["n"]) for d in r["by_day"]] == _by_day_expected(pg_dsn, report_data, 1)
    r = _report(pg_dsn, rep.Filters(days=60))
    assert r["totals"]["refused"] == 13
    assert ("configs", "value", 1) in [(c["dataset"], c["column_name"], c["n"]) for c in r["by_column"]]
    assert [(d["day"], d["n"]) for d in r["by_day"]] == _by_day_expected(pg_dsn, report_data, 60)


def test_report_filters_by_principal_surface_and_outcome(pg_dsn, report_data):
    """Counted from the events themselves (in the window of 14 days)."""
    within = [e for e in report_data if e.at >= dt.datetime.now(dt.timezone.utc) - 14 * D + dt.timedelta(minutes=1)]
    for f, pred in ((rep.Filters(principal=BOB), lambda e: e.principal == BOB),
                    (rep.Filters(surface="rest"), lambda e: e.surface == "rest"),
                    (rep.Filters(outcome="ok"), lambda e: e.outcome == "ok"),
                    (rep.Filters(principal=ALICE, outcome="refused"), lambda e: e.principal == ALICE
                     and e.outcome == "refused")):
        chosen = [e for e in within if pred(e)]
        r = _report(pg_dsn, f)
        assert r["totals"]["requests"] == len(chosen) > 0, f
        assert r["totals"]["principals"] == len({e.principal for e in chosen}), f
        refused = [e for e in chosen if e.outcome == "refused"]
        assert sorted(_kv(r["by_principal"])) == sorted(Counter(e.principal for e in refused).items()), f
        assert r["counts"]["recent"] == len(refused) and {e["id"] for e in r["recent"]} <= {e.id for e in refused}
        assert sum(x["uses"] for x in r["recurring"]) == len([e for e in chosen if e.fingerprint]), f


def test_cli_audit_json_prints_the_same_report(cli_env, capsys, report_data):
    for argv, f in (([], rep.Filters()), (["--dataset", "workloads"], rep.Filters(dataset="workloads")),
                    (["--subtype", "UNKNOWN_DATASET", "--days", "60"], rep.Filters(days=60, subtype="UNKNOWN_DATASET")),
                    (["--principal", BOB, "--surface", "mcp", "--outcome", "refused"],
                     rep.Filters(principal=BOB, surface="mcp", outcome="refused"))):
        code, out, _ = run_cli(capsys, "audit", "--format", "json", *argv)
        assert code == 0 and out["ok"] is True
        expected = json.loads(json.dumps(_report(cli_env, f), default=str))
        assert out["data"] == expected, argv


def test_cli_audit_table_names_the_secret_columns_and_who(cli_env, capsys, report_data):
    code, out, _ = run_cli(capsys, "audit", "--format", "table")
    assert code == 0 and isinstance(out, str)
    assert out.startswith("19 requests, 12 refused, 1 failed, 4 principals in 14 days")
    section = out.split("## Secret and hidden columns reached for")[1].split("##")[0]
    line = next(ln for ln in section.splitlines() if "env_dump" in ln)
    assert "workloads" in line and "SECRET_COLUMN_DENIED" in line and f"{ALICE}, {BOB}" in line
    for title in ("Rejections by subtype", "Rejections by dataset", "Rejections by principal", "Rejections by day",
                  "Recent rejections", "Recurring explorations", "Promotion candidates"):
        assert f"## {title}" in out
    assert "fp_workloads" in out.split("## Promotion candidates")[1]


def test_cli_audit_uses_the_configured_promotion_rule(cli_env, capsys, monkeypatch):
    """ONTOOS_PROMOTE_USES/PRINCIPALS/DAYS configure the rule (README); the terminal report must show the
    same candidates as the dashboard does with the same settings."""
    reset_audit(cli_env)
    insert(cli_env, uses("three_uses", {"p1": 2, "p2": 1}))
    monkeypatch.setenv("ONTOOS_PROMOTE_USES", "3")
    monkeypatch.setenv("ONTOOS_PROMOTE_PRINCIPALS", "2")
    code, out, _ = run_cli(capsys, "audit", "--format", "json")
    assert code == 0
    assert out["data"]["rule"] == {"min_uses": 3, "min_principals": 2, "days": 14}
    assert [c["fingerprint"] for c in out["data"]["candidates"]] == ["three_uses"]


# ---------------------------------------------------------------- the round trip

QUESTION = ("explore workloads fields name, namespace, kind, replicas where namespace = '{ns}' and kind = '{kind}' "
            "and replicas >= {n} order by name limit {limit}")
# (principal, role, namespace, kind, replicas, limit): six uses by three principals
ASKED = [
    ("gov-promo-ann", "analyst", "prod", "Deployment", 8, 50),
    ("gov-promo-ann", "analyst", "staging", "Deployment", 2, 50),
    ("gov-promo-ben", "reader", "payments", "StatefulSet", 4, 20),
    ("gov-promo-ben", "reader", "prod", "StatefulSet", 3, 50),
    ("gov-promo-cat", "analyst", "prod-fp", "Deployment", 9, 40),
    ("gov-promo-ann", "analyst", "sandbox", "Deployment", 6, 50),
]
QUERY_ID = "workloads_by_namespace_and_kind"


def _expected_rows(dsn: str, ns: str, kind: str, n: int) -> list[list[Any]]:
    with psycopg.connect(dsn) as conn:
        return [list(r) for r in conn.execute(
            "SELECT name, namespace, kind, replicas FROM lake.k8s_workloads "
            "WHERE namespace = %s AND kind = %s AND replicas >= %s AND NOT is_deleted", [ns, kind, n]).fetchall()]


def _sorted(rows):
    return sorted(rows, key=lambda r: json.dumps(r))


async def _three_principals_ask_the_same_question(demo, p, settings, registry_file, pg_dsn) -> str:
    """Over MCP, with the audit on, each with other values: one fingerprint, the answers right."""
    writer = AuditWriter(pg_dsn, interval=0.05)
    await writer.start()
    fingerprints = set()
    try:
        tools = Tools(demo, Explorer(demo, Executor(p, settings)), Registry.load(registry_file, demo), writer)
        for who, role, ns, kind, n, limit in ASKED:
            server = build_server(tools, fixed(Principal(who, role)))
            async with Client(server) as client:
                r = await client.call_tool("ontoos_explore", {"query": QUESTION.format(ns=ns, kind=kind, n=n, limit=limit)})
                assert r.is_error is False, r.content[0].text
                env = r.structured_content
                assert _sorted(env["data"]["rows"]) == _sorted(_expected_rows(pg_dsn, ns, kind, n))
                fingerprints.add(env["meta"]["fingerprint"])
    finally:
        await writer.close()
    assert len(fingerprints) == 1
    fingerprint = fingerprints.pop()
    assert fingerprint == compile_exploration(QUESTION.format(ns="x", kind="Job", n=0, limit=5), demo, "admin").fingerprint
    return fingerprint


def _it_is_a_candidate_recorded_with_its_literals(pg_dsn, fingerprint: str) -> None:
    """6 uses by 3 principals."""
    found = _candidates(pg_dsn, rep.Rule())
    assert list(found) == [fingerprint]
    assert (found[fingerprint]["uses"], found[fingerprint]["principals"]) == (6, 3)
    recorded = [e["exploration"] for e in fetch_events(pg_dsn, "fingerprint = %s", [fingerprint])]
    assert any("namespace = 'payments'" in t and "kind = 'StatefulSet'" in t and "replicas >= 4" in t for t in recorded)


async def _ontoos_promote_writes_a_pending_entry(capsys, demo, registry_file, fingerprint, tmp_path) -> dict[str, Any]:
    """Parameters named after the columns and typed from the contract, the observed range as examples,
    the always-filter a constant, SQL the guard (and `ontoos check-sql`) accepts."""
    code, out, err = await arun_cli(capsys, "promote", fingerprint, "--id", QUERY_ID, "--title", "Workloads by namespace and kind",
                                    "--queries", str(registry_file))
    assert code == 0, (out, err)
    assert out["ok"] is True and out["data"]["registry"] == str(registry_file)
    saved = yaml.safe_load(registry_file.read_text(encoding="utf-8"))
    assert [q["id"] for q in saved["queries"]] == [QUERY_ID]
    entry = saved["queries"][0]
    assert entry == out["data"]["query"]
    assert entry["status"] == "pending"
    assert entry["title"] == "Workloads by namespace and kind"
    assert entry["origin_fingerprint"] == fingerprint
    assert entry["read_sets"] == ["published"]
    assert entry["columns"] == ["name", "namespace", "kind", "replicas"]
    # written in the shape its authors write: :name placeholders, params, constants, budget
    params = {prm["name"]: prm for prm in entry["params"]}
    assert [prm["name"] for prm in entry["params"]] == ["namespace", "kind", "replicas"]
    assert params["namespace"]["type"] == "string"
    assert params["kind"]["type"] == "enum"
    assert params["kind"]["values"] == ["Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job"]
    assert params["replicas"]["type"] == "integer"
    # the observed range as examples, of the safe kinds only: the namespaces callers typed are free text,
    # kept only with --keep-text-examples (every agent reads them); the enum's and the integers' are kept
    assert params["namespace"]["examples"] == []
    assert params["kind"]["examples"] == ["Deployment", "StatefulSet"]
    assert params["replicas"]["examples"] == [2, 9]
    assert entry["promoted_by"].startswith("cli")
    # the always-filters stay one constant: the workload's, then its project's (workloads exist with their
    # project), both `is_deleted = false`
    assert entry["constants"] == [{"name": "kept", "type": "boolean", "value": False}]
    assert Counter(re.findall(r"(?<!:):([a-z_]+)", entry["sql"])) == {"namespace": 1, "kind": 1, "replicas": 1, "kept": 2}
    for literal in ("'prod'", "'Deployment'", "sandbox", "$"):
        assert literal not in entry["sql"]
    # what runs: $1..$3 the named parameters, $4 the constant
    running = normalize(entry)
    assert running["bind"] == ["namespace", "kind", "replicas", {"value": False, "type": "boolean"}]
    assert running["sql"].count("$4") == 2 and "$5" not in running["sql"]
    assert running["max_rows"] == 50 and entry["budget"]["max_rows"] == 50
    # its SQL passes the guard; `ontoos check-sql` without the bind list passes all but the always-filters,
    # whose value it cannot see ($4 is bound to the contract's constant in the registry): it fails closed;
    # given the entry's bind list it verifies them
    verdict = check(running["sql"], allowed_for_read_sets(demo, entry["read_sets"], running["max_rows"]),
                    len(running["bind"]))
    assert verdict.ok, verdict.violations
    sql_file = tmp_path / "promoted.sql"
    sql_file.write_text(running["sql"], encoding="utf-8")
    code, out, _ = await arun_cli(capsys, "check-sql", "--read-set", "published", "--max-rows", str(running["max_rows"]),
                                  "--params", "4", str(sql_file))
    assert code == 2 and out["ok"] is False
    assert [v["kind"] for v in out["violations"]] == ["AlwaysFilter"] * 2
    assert all("$4" in v["message"] for v in out["violations"])
    code, out, _ = await arun_cli(capsys, "check-sql", "--read-set", "published", "--max-rows", str(running["max_rows"]),
                                  "--bind", json.dumps(running["bind"]), str(sql_file))
    assert code == 0 and out["ok"] is True, out
    return entry


async def _promoting_again_or_badly_is_refused(capsys, registry_file, fingerprint) -> None:
    """The same id again, an unknown fingerprint, a bad id: refused, and the file unchanged."""
    before = registry_file.read_text(encoding="utf-8")
    code, out, _ = await arun_cli(capsys, "promote", fingerprint, "--id", QUERY_ID, "--title", "again", "--queries", str(registry_file))
    assert code == 2 and out["ok"] is False
    assert registry_file.read_text(encoding="utf-8") == before
    code, out, _ = await arun_cli(capsys, "promote", "0000000000000000", "--id", "other_id", "--title", "t", "--queries", str(registry_file))
    assert code == 2 and out["error"]["code"] == "EX208"
    code, out, _ = await arun_cli(capsys, "promote", fingerprint, "--id", "not an id!", "--title", "t", "--queries", str(registry_file))
    assert code == 2 and out["ok"] is False
    assert registry_file.read_text(encoding="utf-8") == before


async def _a_pending_entry_is_not_runnable(capsys, demo, p, settings, registry_file) -> None:
    registry = Registry.load(registry_file, demo)
    assert not registry.problems and registry.visible("analyst") == []
    async with _mcp(demo, p, settings, registry, Principal("gov-promo-dan", "viewer")) as client:
        listed = (await client.call_tool("ontoos_queries", {})).structured_content
        assert listed["data"]["queries"] == []
        r = await client.call_tool("ontoos_run_query", {"id": QUERY_ID, "params": {"namespace": "prod", "kind": "Job",
                                                                                   "replicas": 1}})
        assert r.is_error is True and json.loads(r.content[0].text)["error"]["code"] == "EX208"
    code, out, _ = await arun_cli(capsys, "queries", "run", QUERY_ID, "-p", "namespace=prod", "-p", "kind=Job", "-p", "replicas=1",
                                  "--queries", str(registry_file), "--role", "analyst")
    assert code == 2 and out["error"]["code"] == "EX208"


async def _ontoos_queries_approve(capsys, registry_file, entry) -> None:
    """The status changes, and who approved it and when are recorded; nothing else."""
    code, out, _ = await arun_cli(capsys, "queries", "approve", QUERY_ID, "--queries", str(registry_file))
    assert code == 0 and out == {"ok": True, "data": {"approved": QUERY_ID, "status": "approved"}}
    saved = yaml.safe_load(registry_file.read_text(encoding="utf-8"))["queries"][0]
    assert saved["status"] == "approved" and saved["approved_by"].startswith("cli:")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", saved["approved_at"])
    changed = ("status", "approved_by", "approved_at")
    assert {k: v for k, v in saved.items() if k not in changed} == {k: v for k, v in entry.items() if k not in changed}


async def _it_runs_over_mcp_with_new_values(demo, p, settings, registry_file, pg_dsn, entry) -> dict[str, Any]:
    """Listed with a JSON Schema of its parameters; the rows match hand-written SQL; bad parameters are
    refusals with hints; each run is audited under the named fingerprint. Returns the schema."""
    registry = Registry.load(registry_file, demo)
    assert not registry.problems
    reset_audit(pg_dsn)
    writer = AuditWriter(pg_dsn, interval=0.05)
    await writer.start()
    try:
        async with _mcp(demo, p, settings, registry, Principal("gov-promo-dan", "viewer"), writer) as client:
            listed = (await client.call_tool("ontoos_queries", {})).structured_content["data"]["queries"]
            assert [q["id"] for q in listed] == [QUERY_ID]
            schema = listed[0]["parameters"]
            assert schema["type"] == "object" and schema["additionalProperties"] is False
            assert schema["required"] == ["namespace", "kind", "replicas"]
            assert schema["properties"]["namespace"]["type"] == "string"
            assert schema["properties"]["kind"] == {
                "type": "string", "description": schema["properties"]["kind"]["description"],
                "enum": ["Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job"],
                "examples": ["Deployment", "StatefulSet"]}
            assert schema["properties"]["replicas"]["type"] == "integer"
            assert schema["properties"]["replicas"]["examples"] == [2, 9]
            assert all(prop.get("description") for prop in schema["properties"].values())
            Draft202012Validator.check_schema(schema)
            new_values = {"namespace": "ml-serving", "kind": "Deployment", "replicas": 3}
            assert not list(Draft202012Validator(schema).iter_errors(new_values))
            assert list(Draft202012Validator(schema).iter_errors({**new_values, "kind": "Pod"}))

            r = await client.call_tool("ontoos_run_query", {"id": QUERY_ID, "params": new_values})
            assert r.is_error is False, r.content[0].text
            env = r.structured_content
            expected = _expected_rows(pg_dsn, "ml-serving", "Deployment", 3)
            assert 0 < len(expected) < entry["budget"]["max_rows"]
            assert env["data"]["columns"] == ["name", "namespace", "kind", "replicas"]
            assert _sorted(env["data"]["rows"]) == _sorted(expected)
            assert env["meta"]["rows"] == len(expected) and env["meta"]["truncated"] is False
            assert [row[0] for row in env["data"]["rows"]] == sorted(row[0] for row in env["data"]["rows"])

            # bad parameters are refusals with hints, not crashes
            r = await client.call_tool("ontoos_run_query", {"id": QUERY_ID, "params": {**new_values, "kind": "Pod"}})
            assert r.is_error is True and json.loads(r.content[0].text)["error"]["subtype"] == "TYPE_MISMATCH"
            r = await client.call_tool("ontoos_run_query", {"id": QUERY_ID, "params": {"namespace": "prod"}})
            assert r.is_error is True and json.loads(r.content[0].text)["error"]["code"] == "EX102"
    finally:
        await writer.close()
    runs = fetch_events(pg_dsn, "fingerprint = %s", [f"named:{QUERY_ID}"])
    assert [(e["outcome"], e["rows"]) for e in runs if e["outcome"] == "ok"] == [("ok", len(expected))]
    assert all(e["dataset"] == "workloads" for e in runs)
    return schema


async def _the_cli_lists_shows_and_runs_it(capsys, registry_file, pg_dsn, entry, schema) -> None:
    """`ontoos queries list|show|run`: the same entry and schema; a CLI run is audited with surface cli."""
    code, out, _ = await arun_cli(capsys, "queries", "list", "--queries", str(registry_file))
    assert code == 0
    assert out["data"] == {"queries": [{"id": QUERY_ID, "title": "Workloads by namespace and kind", "status": "approved",
                                        "domain": None, "parameters": ["namespace", "kind", "replicas"]}], "skipped": []}
    code, out, _ = await arun_cli(capsys, "queries", "show", QUERY_ID, "--queries", str(registry_file))
    assert code == 0
    assert out["data"]["id"] == QUERY_ID and out["data"]["status"] == "approved"
    assert out["data"]["sql"] == normalize(entry)["sql"]  # the SQL that runs: $n where the file has :name
    assert out["data"]["parameters"] == schema
    code, out, _ = await arun_cli(capsys, "queries", "run", QUERY_ID, "-p", "namespace=prod", "-p", "kind=StatefulSet",
                           "-p", "replicas=2", "--queries", str(registry_file), "--role", "analyst", "--format", "json")
    assert code == 0, out
    assert _sorted(out["data"]["rows"]) == _sorted(_expected_rows(pg_dsn, "prod", "StatefulSet", 2))
    assert out["meta"]["rows"] == len(_expected_rows(pg_dsn, "prod", "StatefulSet", 2))
    cli_runs = fetch_events(pg_dsn, "surface = 'cli' AND fingerprint = %s", [f"named:{QUERY_ID}"])
    assert len(cli_runs) == 1 and cli_runs[0]["outcome"] == "ok"
    # a bad value on the command line is a refusal
    code, out, _ = await arun_cli(capsys, "queries", "run", QUERY_ID, "-p", "namespace=prod", "-p", "kind=StatefulSet",
                           "-p", "replicas=many", "--queries", str(registry_file), "--role", "analyst")
    assert code == 2 and out["error"]["subtype"] == "TYPE_MISMATCH"
    code, out, _ = await arun_cli(capsys, "queries", "show", "no_such_query", "--queries", str(registry_file))
    assert code == 2 and out["ok"] is False


@pytest.mark.anyio
async def test_round_trip_from_repeated_explorations_to_an_approved_named_query(
        demo, pg_dsn, pool, cli_env, capsys, tmp_path):
    reset_audit(pg_dsn)
    p, settings = pool
    registry_file = tmp_path / "queries.yaml"
    fingerprint = await _three_principals_ask_the_same_question(demo, p, settings, registry_file, pg_dsn)
    _it_is_a_candidate_recorded_with_its_literals(pg_dsn, fingerprint)
    entry = await _ontoos_promote_writes_a_pending_entry(capsys, demo, registry_file, fingerprint, tmp_path)
    await _promoting_again_or_badly_is_refused(capsys, registry_file, fingerprint)
    await _a_pending_entry_is_not_runnable(capsys, demo, p, settings, registry_file)
    await _ontoos_queries_approve(capsys, registry_file, entry)
    schema = await _it_runs_over_mcp_with_new_values(demo, p, settings, registry_file, pg_dsn, entry)
    await _the_cli_lists_shows_and_runs_it(capsys, registry_file, pg_dsn, entry, schema)


def test_promotion_examples_are_the_observed_range_by_value(demo, cli_env, capsys, tmp_path):
    """min/max of the values as the column's type orders them: 20 < 300 < 1000.5, not as strings."""
    reset_audit(cli_env)
    text = ("explore images fields repository, size_bytes where size_bytes > {size} and built_at >= '{at}' "
            "and repository in ({repos}) order by repository limit 10")
    asked = [(Decimal("1000.5"), "2024-03-01T00:00:00", "'api', 'web'"), (Decimal("20"), "2023-11-15T08:30:00", "'db', 'x'"),
             (Decimal("300"), "2024-01-10T00:00:00", "'cache', 'zz'")]
    compiled = [compile_exploration(text.format(size=s, at=a, repos=r), demo, "analyst") for s, a, r in asked]
    assert len({q.fingerprint for q in compiled}) == 1
    fp = compiled[0].fingerprint
    insert(cli_env, [ev(who, dataset="images", exploration=q.normalized, fingerprint=fp, rows=0, ago=(3 - i) * H)
                     for i, (q, who) in enumerate(zip(compiled, ["gov-ex-1", "gov-ex-2", "gov-ex-1"]))])
    path = tmp_path / "queries.yaml"
    code, out, err = run_cli(capsys, "promote", fp, "--id", "images_over_a_size", "--title", "Images over a size",
                             "--queries", str(path), "--keep-text-examples")
    assert code == 0, (out, err)
    params = {p["name"]: p for p in out["data"]["query"]["params"]}
    assert list(params) == ["size_bytes", "built_at", "repository", "repository_2"]
    assert (params["size_bytes"]["type"], params["built_at"]["type"], params["repository"]["type"]) == \
        ("number", "timestamp", "string")  # the authors' names for numeric and text
    assert [Decimal(str(x)) for x in params["size_bytes"]["examples"]] == [Decimal("20"), Decimal("1000.5")]
    assert [dt.datetime.fromisoformat(x) for x in params["built_at"]["examples"]] == \
        [dt.datetime(2023, 11, 15, 8, 30), dt.datetime(2024, 3, 1)]
    assert params["repository"]["examples"] == ["api", "db"]
    assert params["repository_2"]["examples"] == ["web", "zz"]
    schema = Registry.load(path, demo).entries["images_over_a_size"].params_schema()
    assert schema["properties"]["built_at"]["format"] == "date-time"
    assert schema["properties"]["size_bytes"]["type"] == "number"


def _mcp(demo, p, settings, registry, principal, writer=None):
    import contextlib

    @contextlib.asynccontextmanager
    async def go():
        tools = Tools(demo, Explorer(demo, Executor(p, settings)), registry, writer)
        async with Client(build_server(tools, fixed(principal))) as client:
            yield client

    return go()


# ---------------------------------------------------------------- broken registry entries

GOOD = {**HOSTS_BY_PROVIDER, "id": "good_hosts_by_provider",
        "sql": HOSTS_BY_PROVIDER["sql"].replace(" LIMIT 51", ' ORDER BY "h"."hostname" LIMIT 51')}
BROKEN = [
    {**GOOD, "id": "reads_a_secret", "sql": 'SELECT "h"."ssh_private_key" AS "k" FROM "lake"."hosts" AS "h" LIMIT 51',
     "parameters": [], "bind": [], "columns": ["k"]},
    {**GOOD, "id": "deletes", "sql": 'DELETE FROM "lake"."hosts"', "parameters": [], "bind": [], "columns": []},
    {**GOOD, "id": "sleeps", "sql": 'SELECT "h"."hostname", pg_sleep(5) FROM "lake"."hosts" AS "h" LIMIT 51',
     "parameters": [], "bind": []},
    {**GOOD, "id": "outside_its_read_set", "read_sets": ["published"]},
    {**GOOD, "id": "unknown_read_set", "read_sets": ["everything"]},
    {**GOOD, "id": "binds_an_unknown_parameter", "bind": ["providr"]},
    {**GOOD, "id": "limit_over_budget", "sql": GOOD["sql"].replace("LIMIT 51", "LIMIT 100000")},
    {"id": "not_a_query", "title": "no sql at all", "read_sets": ["engineering"]},
    {**GOOD, "id": "unknown_key", "colour": "blue"},
    # a hand-written query must keep the contract's always-filter, and may not select a hidden column
    {**GOOD, "id": "skips_the_always_filter", "read_sets": ["published"], "parameters": [], "bind": [],
     "sql": 'SELECT "w"."name" AS "name" FROM "lake"."k8s_workloads" AS "w" LIMIT 51', "columns": ["name"]},
    {**GOOD, "id": "selects_a_hidden_column", "read_sets": ["published"], "parameters": [],
     "bind": [{"value": False, "type": "boolean"}], "columns": ["name", "is_deleted"],
     "sql": 'SELECT "w"."name" AS "name", "w"."is_deleted" AS "is_deleted" FROM "lake"."k8s_workloads" AS "w" '
            'WHERE "w"."is_deleted" = $1 LIMIT 51'},
]


def test_broken_registry_entries_are_reported_and_skipped(demo, pg_dsn, cli_env, capsys, tmp_path):
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"queries": [BROKEN[0], GOOD, *BROKEN[1:], "just a string"]}, sort_keys=False),
                    encoding="utf-8")
    registry = Registry.load(path, demo)
    assert list(registry.entries) == ["good_hosts_by_provider"]
    skipped = dict(registry.problems)
    assert sorted(skipped) == sorted([b["id"] for b in BROKEN] + [f"#{len(BROKEN) + 1}"])
    assert "ssh_private_key" in skipped["reads_a_secret"] or "secret" in skipped["reads_a_secret"].lower()
    assert "guard" in skipped["deletes"]
    assert "pg_sleep" in skipped["sleeps"]
    assert "everything" in skipped["unknown_read_set"]
    assert "providr" in skipped["binds_an_unknown_parameter"]

    code, out, err = run_cli(capsys, "queries", "list", "--queries", str(path))
    assert code == 0
    assert [q["id"] for q in out["data"]["queries"]] == ["good_hosts_by_provider"]
    assert sorted(out["data"]["skipped"]) == sorted(skipped)
    for ident in skipped:
        assert f"named query {ident} skipped" in err
    code, out, _ = run_cli(capsys, "queries", "run", "good_hosts_by_provider", "-p", "provider=gcp", "--queries", str(path),
                           "--role", "analyst")
    assert code == 0 and out["meta"]["rows"] == 33
    code, out, _ = run_cli(capsys, "queries", "run", "reads_a_secret", "--queries", str(path), "--role", "analyst")
    assert code == 2 and out["error"]["code"] == "EX208"
    code, out, _ = run_cli(capsys, "queries", "show", "deletes", "--queries", str(path))
    assert code == 2 and out["ok"] is False
    before = path.read_text(encoding="utf-8")
    code, out, _ = run_cli(capsys, "queries", "approve", "no_such_query", "--queries", str(path))
    assert code == 2 and out["error"]["code"] == "EX208"
    assert path.read_text(encoding="utf-8") == before


@pytest.mark.anyio
async def test_broken_entries_are_invisible_over_mcp(demo, pool, tmp_path):
    p, settings = pool
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"queries": [*BROKEN, GOOD]}, sort_keys=False), encoding="utf-8")
    registry = Registry.load(path, demo)
    async with _mcp(demo, p, settings, registry, Principal("gov-broken", "analyst")) as client:
        listed = (await client.call_tool("ontoos_queries", {})).structured_content["data"]["queries"]
        assert [q["id"] for q in listed] == ["good_hosts_by_provider"]
        r = await client.call_tool("ontoos_run_query", {"id": "good_hosts_by_provider", "params": {"provider": "onprem"}})
        assert r.is_error is False and r.structured_content["meta"]["rows"] == 22
        for b in BROKEN:
            r = await client.call_tool("ontoos_run_query", {"id": b["id"], "params": {}})
            assert r.is_error is True and json.loads(r.content[0].text)["error"]["code"] == "EX208", b["id"]
    # the viewer cannot see an engineering query at all
    async with _mcp(demo, p, settings, registry, Principal("gov-broken-v", "viewer")) as client:
        assert (await client.call_tool("ontoos_queries", {})).structured_content["data"]["queries"] == []
