"""Governance, the audit trail: every request is exactly one event, with the exact outcome.

Sixty mixed requests go through the production `Tools` (MCP and REST share it)
with a real `AuditWriter` over the test PostgreSQL: answered explorations
(text, JSON and REST forms, dry runs, named queries, catalog calls), refusals
(secret and hidden columns, unknown and out-of-scope datasets, syntax errors,
budgets, malformed requests, no token, an unknown tool) and failures (the
database's own grants refusing a read, a database that is down). The events
are then read back from `ontoos_audit.events` and matched, one for one, with
the envelopes the callers saw.

The writer itself: `close()` flushes everything queued; `record()` never
blocks nor raises, and events wait in the queue while the store is down and
are written when it comes back. The CLI records its one event, surface "cli".
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import getpass
import json
import time
import warnings
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ontoos_explore import cli
from ontoos_explore.catalog import describe_dataset
from ontoos_explore.contract import load_contract
from ontoos_explore.engine.executor import Executor
from ontoos_explore.engine.pool import open_pool
from ontoos_explore.engine.settings import Settings
from ontoos_explore.governance import audit
from ontoos_explore.governance.audit import AuditWriter
from ontoos_explore.governance.registry import Registry
from ontoos_explore.grammar.forms import from_flags
from ontoos_explore.grammar.render import to_json_form
from ontoos_explore.pipeline import compile_exploration
from ontoos_explore.server.config import Principal
from ontoos_explore.server.tools import Tools
from ontoos_explore.service import Explorer
from tests.conftest import ROOT
from tests.databases import new_database

from .helpers import count_events, ev, fetch_events, reset_audit

ANA = Principal("gov-audit-ana", "analyst")
VIC = Principal("gov-audit-vic", "reader")
ADM = Principal("gov-audit-adm", "admin")

NAMED = {
    "id": "gov_workloads_in_namespace",
    "title": "Workloads of a namespace",
    "status": "approved",
    "read_sets": ["published"],
    "parameters": [{"name": "namespace", "type": "text", "description": "Kubernetes namespace"}],
    "sql": 'SELECT "w"."name" AS "name" FROM "lake"."k8s_workloads" AS "w" INNER JOIN "lake"."gitlab_projects" AS "p" '
           'ON "p"."project_id" = "w"."project_id" WHERE "w"."namespace" = $1 AND "w"."is_deleted" = $2 '
           'AND "p"."is_deleted" = $2 ORDER BY "w"."name" LIMIT 11',
    "bind": ["namespace", {"value": False, "type": "boolean"}],
    "columns": ["name"],
    "max_rows": 10,
}


def _ok(**kw) -> dict[str, Any]:
    return {"outcome": "ok", "error_type": None, "error_subtype": None, "error_code": None, "reason": None,
            "column_name": None, "message": None, "hint": None, **kw}


def _refused(subtype: str, code: str, reason: str | None = None, column: str | None = None, type_: str = "validation",
             **kw) -> dict[str, Any]:
    return {"outcome": "refused", "error_type": type_, "error_subtype": subtype, "error_code": code,
            "reason": reason or subtype, "column_name": column, **kw}


def _failed(subtype: str, code: str, reason: str, type_: str, **kw) -> dict[str, Any]:
    return {"outcome": "failed", "error_type": type_, "error_subtype": subtype, "error_code": code, "reason": reason,
            "column_name": None, **kw}


def _wl(ns: str, replicas: int) -> dict[str, Any]:
    return {"dataset": "workloads", "fields": ["name", "replicas"], "filter": f"namespace = '{ns}' and replicas > {replicas}",
            "order_by": ["name"], "limit": 5}


def build_cases() -> list[dict[str, Any]]:
    """(how, tool, args, principal, expected event fields); `how`: call | rest | variant | down."""
    cases: list[dict[str, Any]] = []

    def add(tool, args, principal, expect, how="call", surface="mcp"):
        cases.append({"how": how, "tool": tool, "args": args, "principal": principal, "expect": expect,
                      "surface": surface})

    # ---- answered (31)
    for i, ns in enumerate(["prod", "staging", "payments", "prod-fp", "default", "sandbox", "ml-serving", "data-platform"]):
        add("ontoos_explore", _wl(ns, i % 3), ANA if i % 2 else VIC, _ok(dataset="workloads"))
    for n in (100, 250, 500, 1000, 1500, 2000, 3000, 4000):
        add("ontoos_explore", {"dataset": "containers", "fields": ["name", "cpu_millis"],
                               "filter": f"cpu_millis >= {n}", "order_by": ["-cpu_millis"], "limit": 3},
            ADM if n > 1000 else ANA, _ok(dataset="containers"))
    for role_p in (ANA, VIC):
        add("ontoos_explore", {"query": "explore workloads via containers fields namespace, sum(containers.cpu_millis) "
                                        "as cpu group by namespace order by cpu desc limit 3"}, role_p,
            _ok(dataset="workloads"))
    for provider in ("aws", "gcp", "onprem"):
        add("ontoos_explore", {"query": f"explore hosts fields hostname, vcpus where provider = '{provider}' "
                                        f"order by hostname limit 4"}, ANA, _ok(dataset="hosts"))
    for p, vis in ((VIC, "public"), (ADM, "internal")):
        add("ontoos_explore", {"query": f"explore projects via stats fields name, stats.commit_count "
                                        f"where visibility = '{vis}' order by name limit 3"}, p, _ok(dataset="projects"))
    for ns in ("prod", "staging"):
        add("ontoos_explore", from_flags("workloads", ["name,namespace"], [f"namespace={ns}"], [], [], ["name"], 2),
            ANA, _ok(dataset="workloads"), how="rest", surface="rest")
    add("ontoos_explore", {**_wl("prod", 1), "dry_run": True}, ANA, _ok(dataset="workloads", rows=None))
    for ns in ("prod", "payments"):
        add("ontoos_run_query", {"id": NAMED["id"], "params": {"namespace": ns}}, VIC,
            _ok(dataset="workloads", fingerprint=f"named:{NAMED['id']}"))
    add("ontoos_catalog", {}, ANA, _ok(dataset=None, exploration=None, fingerprint=None, rows=None))
    add("ontoos_catalog", {"dataset": "workloads"}, VIC, _ok(dataset=None, exploration=None, fingerprint=None, rows=None))
    add("ontoos_queries", {}, VIC, _ok(dataset=None, exploration=None, fingerprint=None, rows=None))

    # ---- refused (26)
    secret = "SECRET_COLUMN_DENIED"
    add("ontoos_explore", {"dataset": "workloads", "fields": ["name", "env_dump"]}, ANA,
        _refused("UNKNOWN_FIELD", "EX201", secret, "env_dump", dataset="workloads"))
    add("ontoos_explore", {"dataset": "workloads", "fields": ["name", "env_dump"]}, VIC,
        _refused("UNKNOWN_FIELD", "EX201", secret, "env_dump", dataset="workloads"))
    add("ontoos_explore", {"dataset": "configs", "fields": ["key", "value"], "filter": "source = 'env'"}, ANA,
        _refused("UNKNOWN_FIELD", "EX201", secret, "value", dataset="configs",
                 exploration="explore configs fields key, value where source = 'env'"))
    add("ontoos_explore", {"query": "explore hosts fields hostname, ssh_private_key where region = 'eu-west-1'"}, ANA,
        _refused("UNKNOWN_FIELD", "EX201", secret, "ssh_private_key", dataset="hosts",
                 exploration="explore hosts fields hostname, ssh_private_key where region = 'eu-west-1'"))
    add("ontoos_explore", {"dataset": "workloads", "relations": ["containers"], "fields": ["name", "containers.env_vars"]},
        ANA, _refused("UNKNOWN_FIELD", "EX201", secret, "env_vars", dataset="workloads"))
    add("ontoos_explore", {"dataset": "images", "fields": ["repository", "registry_password"]}, VIC,
        _refused("UNKNOWN_FIELD", "EX201", secret, "registry_password", dataset="images"))
    add("ontoos_explore", {"dataset": "databases", "fields": ["name", "connection_password"]}, ADM,
        _refused("UNKNOWN_FIELD", "EX201", secret, "connection_password", dataset="databases"))
    add("ontoos_explore", {"dataset": "workloads", "fields": ["name", "is_deleted"]}, ANA,
        _refused("UNKNOWN_FIELD", "EX201", "HIDDEN_COLUMN_DENIED", "is_deleted", dataset="workloads"))
    add("ontoos_explore", {"dataset": "archives", "fields": ["storage_uri"]}, VIC,
        _refused("UNKNOWN_FIELD", "EX201", "HIDDEN_COLUMN_DENIED", "storage_uri", dataset="archives"))
    add("ontoos_explore", {"dataset": "workloads", "fields": ["name", "namspace"]}, ANA,
        _refused("UNKNOWN_FIELD", "EX201", "UNKNOWN_FIELD", None, dataset="workloads"))
    add("ontoos_explore", {"dataset": "nosuch", "fields": ["x"]}, ANA,
        _refused("UNKNOWN_DATASET", "EX202", "UNKNOWN_DATASET", dataset="nosuch"))
    add("ontoos_explore", {"dataset": "hosts", "fields": ["hostname"]}, VIC,
        _refused("UNKNOWN_DATASET", "EX202", "OUT_OF_SCOPE", dataset="hosts"))
    add("ontoos_explore", {"query": "explore workloads fields name wher namespace = 'prod'"}, ANA,
        _refused("SYNTAX_ERROR", "EX101", dataset=None, fingerprint=None))
    add("ontoos_explore", "explore workloads fields name,, replicas", VIC,
        _refused("SYNTAX_ERROR", "EX101", dataset=None, fingerprint=None,
                 exploration="explore workloads fields name,, replicas"), how="rest", surface="rest")
    add("ontoos_explore", {"dataset": "table_refs", "fields": ["file_path"]}, ANA,
        _refused("QUERY_BUDGET_EXCEEDED", "EX406", type_="policy", dataset="table_refs"))
    add("ontoos_explore", {"dataset": "workloads", "fields": [f"name as n{i}" for i in range(11)]}, VIC,
        _refused("QUERY_BUDGET_EXCEEDED", "EX401", type_="policy", dataset="workloads"))
    add("ontoos_explore", {"dataset": "projects", "relations": ["workloads", "stats"], "fields": ["name"]}, VIC,
        _refused("QUERY_BUDGET_EXCEEDED", "EX404", type_="policy", dataset="projects"))
    add("ontoos_explore", {"dataset": "workloads", "feilds": ["name"]}, ANA,
        _refused("INVALID_REQUEST", "EX102", dataset=None, fingerprint=None))
    add("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "dry_run": "yes"}, ANA,
        _refused("INVALID_REQUEST", "EX102"))
    add("ontoos_catalog", {"dataset": "nosuch"}, ANA, _refused("UNKNOWN_DATASET", "EX202", "UNKNOWN_DATASET"))
    add("ontoos_catalog", {"dataset": "hosts"}, VIC, _refused("UNKNOWN_DATASET", "EX202", "OUT_OF_SCOPE"))
    add("ontoos_run_query", {"id": "no_such_query"}, VIC, _refused("CAPABILITY_NOT_FOUND", "EX208"))
    add("ontoos_run_query", {"id": NAMED["id"], "params": {"namespace": 3}}, VIC, _refused("TYPE_MISMATCH", "EX301"))
    add("ontoos_explore", _wl("prod", 2), None,
        _refused("AUTH_REQUIRED", "EX502", type_="auth", principal="anonymous", role=None))
    add("ontoos_catalog", {}, None, _refused("AUTH_REQUIRED", "EX502", type_="auth", principal="anonymous", role=None))
    add("ontoos_drop_everything", {}, ANA, _refused("CAPABILITY_NOT_FOUND", "EX104"))

    # ---- failed (3): the database's grants refuse a column the (variant) contract allows; the database is down
    for p in (ANA, ADM):
        add("ontoos_explore", {"dataset": "workloads", "fields": ["name", "env_dump"], "limit": 2}, p,
            _failed("INTERNAL_ERROR", "EX904", "DATABASE_DENIED", "internal", dataset="workloads"), how="variant")
    add("ontoos_explore", _wl("prod", 0), ANA,
        _failed("UPSTREAM_UNAVAILABLE", "EX601", "POOL_TIMEOUT", "network", dataset="workloads"), how="down")
    return cases


CASES = build_cases()


def test_the_case_list_is_sixty_mixed_requests():
    outcomes = [c["expect"]["outcome"] for c in CASES]
    assert len(CASES) == 60
    assert (outcomes.count("ok"), outcomes.count("refused"), outcomes.count("failed")) == (31, 26, 3)


@pytest.fixture
def variant_contract(tmp_path):
    """The demo contract with workloads.env_dump no longer secret: the guard lets it through,
    the database role (granted from the real contract) does not."""
    data = yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text(encoding="utf-8"))
    data["datasets"]["workloads"]["columns"]["env_dump"].pop("secret")
    path = tmp_path / "variant.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return load_contract(path)


def _down_dsn(pg_dsn: str, socket_dir: Path) -> str:
    """pg_dsn, but looking for the server's socket in `socket_dir` (empty: nothing listens)."""
    info = conninfo_to_dict(pg_dsn)
    return make_conninfo(pg_dsn, host=str(socket_dir), port=str(info.get("port") or 5432), connect_timeout="1")


def _real_socket(pg_dsn: str) -> Path | None:
    info = conninfo_to_dict(pg_dsn)
    host = info.get("host") or ""
    if not host.startswith("/"):
        return None
    return Path(host) / f".s.PGSQL.{info.get('port') or 5432}"


@pytest.mark.anyio
async def test_every_request_is_exactly_one_event_with_its_exact_outcome(demo, pg_dsn, variant_contract, tmp_path):
    reset_audit(pg_dsn)
    registry_file = tmp_path / "queries.yaml"
    registry_file.write_text(yaml.safe_dump({"queries": [NAMED]}, sort_keys=False), encoding="utf-8")
    registry = Registry.load(registry_file, demo)
    assert not registry.problems

    settings = Settings(dsn=pg_dsn, pool_max=2)
    down_settings = Settings(dsn=pg_dsn, pool_max=1, pool_timeout_s=0.5)
    empty = tmp_path / "no-postgres"
    empty.mkdir()
    pool = await open_pool(pg_dsn, settings)
    down_pool = await open_pool(_down_dsn(pg_dsn, empty), down_settings)
    writer = AuditWriter(pg_dsn, interval=0.05)
    await writer.start()
    seen: list[tuple[dict[str, Any], Any]] = []  # (case, answer)
    started = dt.datetime.now(dt.timezone.utc)
    try:
        tools = Tools(demo, Explorer(demo, Executor(pool, settings)), registry, writer)
        variant = Tools(variant_contract, Explorer(variant_contract, Executor(pool, settings)),
                        None, writer)
        down = Tools(demo, Explorer(demo, Executor(down_pool, down_settings)), None, writer)
        for case in CASES:
            how, principal = case["how"], case["principal"]
            if how == "rest":  # as the REST GET form asks: the flags as the JSON form, a text under 'query'
                args = case["args"]
                form = {"query": args} if isinstance(args, str) else to_json_form(args)
                answer = await tools.call("ontoos_explore", form, principal, "rest")
            else:
                t = {"call": tools, "variant": variant, "down": down}[how]
                answer = await t.call(case["tool"], case["args"], principal, surface=case["surface"])
            seen.append((case, answer))
    finally:
        await writer.close()
        await pool.close()
        await down_pool.close()
    finished = dt.datetime.now(dt.timezone.utc)

    assert writer.queued == 0 and writer.dropped == 0
    assert writer.written == len(CASES)
    events = fetch_events(pg_dsn)
    assert len(events) == len(CASES), [e["exploration"] for e in events]
    by_id = {e["id"]: e for e in events}
    assert len(by_id) == len(CASES), "event ids are not unique"

    for case, answer in seen:
        env = answer.envelope
        label = f"{case['tool']} {case['args']!r} as {case['principal']}"
        exp = dict(case["expect"])
        assert env["ok"] is (exp["outcome"] == "ok"), (label, env)
        e = by_id.get(env["meta"]["exploration_id"])
        assert e is not None, f"no event for {label}"
        principal = case["principal"]
        assert e["principal"] == exp.pop("principal", principal.name if principal else None), label
        assert e["role"] == exp.pop("role", principal.role if principal else None), label
        assert e["surface"] == case["surface"], label
        assert started <= e["at"] <= finished, label
        for key, want in exp.items():
            assert e[key] == want, f"{label}: {key} is {e[key]!r}, expected {want!r}"
        if not env["ok"]:
            err = env["error"]
            assert (e["error_type"], e["error_subtype"], e["error_code"]) == (err["type"], err["subtype"], err["code"])
            assert e["message"] == err["message"], label
            assert e["hint"] == err["hint"], label
            assert e["rows"] is None and e["truncated"] is None and e["elapsed_ms"] is None, label
            continue
        dry = isinstance(case["args"], dict) and case["args"].get("dry_run") is True
        if case["tool"] == "ontoos_explore" and not dry:
            # answered explorations: the fingerprint and text of the compiled query, rows and timing filled
            source = case["args"]
            q = compile_exploration(source, demo, principal.role)
            assert answer.compiled is not None and answer.compiled.fingerprint == q.fingerprint
            assert e["fingerprint"] == q.fingerprint == env["meta"]["fingerprint"], label
            assert e["exploration"] == q.normalized, label
            assert e["rows"] == env["meta"]["rows"] == len(env["data"]["rows"]), label
            assert e["truncated"] is env["meta"]["truncated"], label
            assert e["elapsed_ms"] == env["meta"]["elapsed_ms"] and e["elapsed_ms"] > 0, label

    # the normalized exploration keeps its literals: one event per namespace asked
    wl = [e for e in events if e["outcome"] == "ok" and (e["exploration"] or "").startswith("explore workloads fields name, replicas")]
    for ns in ("prod", "staging", "payments", "prod-fp", "default", "sandbox", "ml-serving", "data-platform"):
        assert any(f"namespace = '{ns}'" in e["exploration"] for e in wl), ns
    # ... and the same shape with other values has one fingerprint
    assert len({e["fingerprint"] for e in wl}) == 1
    # the dry run is recorded with the fingerprint, no rows
    dry = [e for c, a in seen if c["args"] is not None and isinstance(c["args"], dict) and c["args"].get("dry_run") is True
           for e in [by_id[a.envelope["meta"]["exploration_id"]]]]
    assert len(dry) == 1 and dry[0]["fingerprint"] == compile_exploration(_wl("prod", 1), demo, "analyst").fingerprint
    assert dry[0]["rows"] is None
    # named-query runs: the dataset and the named fingerprint, with rows
    named = [e for e in events if e["fingerprint"] == f"named:{NAMED['id']}"]
    assert len(named) == 2 and all(e["rows"] > 0 and e["elapsed_ms"] > 0 for e in named)

    # totals by outcome and surface
    assert sum(e["outcome"] == "ok" for e in events) == 31
    assert sum(e["outcome"] == "refused" for e in events) == 26
    assert sum(e["outcome"] == "failed" for e in events) == 3
    assert sum(e["surface"] == "rest" for e in events) == 3


@pytest.mark.anyio
async def test_secret_reason_is_recorded_but_never_shown(demo, pg_dsn):
    """The event keeps SECRET_COLUMN_DENIED and the column; the caller sees a missing column."""
    reset_audit(pg_dsn)
    settings = Settings(dsn=pg_dsn, pool_max=1)
    pool = await open_pool(pg_dsn, settings)
    writer = AuditWriter(pg_dsn, interval=0.05)
    await writer.start()
    try:
        tools = Tools(demo, Explorer(demo, Executor(pool, settings)), None, writer)
        answers = {}
        for principal, dataset, column, extra in (
            (ANA, "workloads", "env_dump", {}),
            (ANA, "configs", "value", {"filter": "source = 'env'"}),
            (ANA, "hosts", "ssh_private_key", {}),
            (VIC, "workloads", "env_dump", {}),
        ):
            answers[(principal.name, dataset, column)] = await tools.call(
                "ontoos_explore", {"dataset": dataset, "fields": [column], **extra}, principal)
            # a column that does not exist at all, for comparison
            answers[(principal.name, dataset, "nonexistent_col")] = await tools.call(
                "ontoos_explore", {"dataset": dataset, "fields": ["nonexistent_col"], **extra}, principal)
    finally:
        await writer.close()
        await pool.close()

    events = {e["id"]: e for e in fetch_events(pg_dsn)}
    assert len(events) == 8
    for (who, dataset, column), answer in answers.items():
        env = answer.envelope
        text = json.dumps(env)
        e = events[env["meta"]["exploration_id"]]
        role = ANA.role if who == ANA.name else VIC.role
        readable = [c["name"] for c in describe_dataset(demo, role, dataset)["columns"]]
        err = env["error"]
        assert (err["subtype"], err["code"]) == ("UNKNOWN_FIELD", "EX201")
        assert err["message"] == f"'{column}' is not a readable column of {dataset}"
        # the hint lists readable columns only: never the secret one, nor anything about secrecy
        assert err["hint"] == f"readable columns of {dataset}: {', '.join(sorted(readable))}"
        for hidden_word in ("SECRET", "secret", "HIDDEN", "DENIED", "reason", "detail", "column_name"):
            assert hidden_word not in text, (hidden_word, text)
        if column == "nonexistent_col":
            assert (e["reason"], e["column_name"]) == ("UNKNOWN_FIELD", None)
        else:
            assert (e["reason"], e["column_name"], e["dataset"]) == ("SECRET_COLUMN_DENIED", column, dataset)
            assert e["principal"] == who
            # and a secret column reads byte for byte like a missing one (modulo its name and the ids)
            other = answers[(who, dataset, "nonexistent_col")].envelope
            assert err["hint"] == other["error"]["hint"]
            assert set(err) == set(other["error"])


def _events(n: int, principal: str) -> list[audit.Event]:
    return [ev(principal, dataset="workloads", exploration=f"explore workloads fields name where replicas = {i}",
               fingerprint="f" * 16, rows=i, truncated=False, elapsed_ms=0.5) for i in range(n)]


@pytest.mark.anyio
async def test_close_flushes_everything_queued(pg_dsn):
    reset_audit(pg_dsn)
    # a long interval and a small batch: nothing would be written for seconds without close()
    writer = AuditWriter(pg_dsn, interval=30.0, batch=64)
    await writer.start()
    events = _events(1000, "gov-audit-burst")
    for e in events:
        writer.record(e)
    assert (writer.queued, writer.written) == (1000, 0)  # record() only enqueues
    await writer.close()
    assert writer.written == 1000 and writer.queued == 0 and writer.dropped == 0
    rows = fetch_events(pg_dsn, "principal = %s", ["gov-audit-burst"])
    assert sorted(r["id"] for r in rows) == sorted(e.id for e in events)
    assert sorted(r["rows"] for r in rows) == list(range(1000))


@pytest.mark.anyio
async def test_a_whole_batch_is_written_without_waiting_out_the_interval(pg_dsn):
    """The writer gathers a batch for `interval` after its first event, unless a whole batch is queued
    first: then it is written at once (and a partial one waits its interval)."""
    reset_audit(pg_dsn)
    writer = AuditWriter(pg_dsn, interval=30.0, batch=8)
    await writer.start()
    try:
        writer.record(_events(1, "gov-audit-early")[0])
        await asyncio.sleep(0.3)
        assert writer.written == 0  # one event: its batch is still gathering
        for e in _events(7, "gov-audit-early"):
            writer.record(e)
        deadline = time.monotonic() + 10
        while writer.written < 8 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert writer.written == 8 and count_events(pg_dsn) == 8  # long before the 30 s interval
    finally:
        await writer.close()


@pytest.mark.anyio
async def test_record_does_not_touch_the_database(pg_dsn):
    """Recording only enqueues: right after record() the event is not in the table yet."""
    reset_audit(pg_dsn)
    writer = AuditWriter(pg_dsn, interval=1.0)
    await writer.start()
    try:
        for e in _events(10, "gov-audit-queued"):
            writer.record(e)
        assert count_events(pg_dsn) == 0
        deadline = time.monotonic() + 30
        while count_events(pg_dsn) < 10 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert count_events(pg_dsn) == 10  # written in the background, without close()
    finally:
        await writer.close()


@pytest.mark.anyio
async def test_events_wait_while_the_store_is_down_and_are_written_when_it_is_back(pg_dsn, tmp_path):
    reset_audit(pg_dsn)
    socket_dir = tmp_path / "store"
    socket_dir.mkdir()
    dsn = _down_dsn(pg_dsn, socket_dir)
    writer = AuditWriter(dsn, interval=0.05, retry=0.1)
    await asyncio.wait_for(writer.start(), 30)  # the store is unreachable: start() must still come up
    events = _events(25, "gov-audit-down")
    try:
        for i, e in enumerate(events):
            writer.record(e)  # never raises, never waits: queued at once
            assert (writer.queued, writer.written) == (i + 1, 0)
            await asyncio.sleep(0.01)  # let the writer try (and fail) in between
        await asyncio.sleep(0.6)  # several failed flushes
        assert writer.queued == 25 and writer.written == 0 and writer.dropped == 0
        assert count_events(pg_dsn) == 0

        # the store comes back at the same address
        real = _real_socket(pg_dsn)
        if real is not None and real.exists():
            (socket_dir / real.name).symlink_to(real)
        else:  # a TCP test database: point the writer at it instead
            writer.dsn = pg_dsn
        deadline = time.monotonic() + 30
        while writer.written < 25 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert writer.written == 25 and writer.queued == 0
    finally:
        await writer.close()
    rows = fetch_events(pg_dsn, "principal = %s", ["gov-audit-down"])
    assert sorted(r["id"] for r in rows) == sorted(e.id for e in events)


@pytest.mark.anyio
async def test_close_with_the_store_down_returns_and_never_raises(pg_dsn, tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    writer = AuditWriter(_down_dsn(pg_dsn, empty), interval=0.05, retry=0.1)
    await writer.start()
    for e in _events(5, "gov-audit-lost"):
        writer.record(e)
    # cannot flush: gives up after a second without progress, loudly but without raising (were it to
    # wait for the store instead, wait_for would fail the test)
    await asyncio.wait_for(writer.close(timeout=1.0), 30)
    assert (writer.written, writer.lost) == (0, 5)
    assert count_events(pg_dsn, "principal = %s", ["gov-audit-lost"]) == 0


@pytest.mark.anyio
async def test_a_full_queue_drops_and_counts_without_raising(pg_dsn, tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    writer = AuditWriter(_down_dsn(pg_dsn, empty), interval=0.05, retry=0.1, queue_max=10)
    await writer.start()
    try:
        for e in _events(30, "gov-audit-full"):
            writer.record(e)
        assert writer.dropped >= 20 - 1  # the background task may already hold one event
        assert writer.queued + writer.dropped == 30
    finally:
        await writer.close(timeout=0.5)


# ---------------------------------------------------------------- the writer's own connection


def _writer_backends(dsn: str) -> list[tuple[int, str | None]]:
    """(pid, wait_event_type) of the audit writers' backends in `dsn`'s database."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT pid, wait_event_type FROM pg_catalog.pg_stat_activity "
                            "WHERE application_name = 'ontoos-audit' AND datname = current_database()").fetchall()


async def _until(predicate, timeout: float = 30.0) -> bool:
    """Whether `predicate()` held within `timeout` seconds (checked every 50 ms)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


@pytest.mark.anyio
async def test_close_closes_the_writers_connection(pg_dsn):
    """Checked while this process is alive: a process that exits closes its sockets anyway, so only here
    does an empty pg_stat_activity show that close() itself let go of the connection. A backend leaves
    pg_stat_activity a moment after its client said goodbye, hence the wait."""
    dsn = new_database(pg_dsn, "writer")
    writer = AuditWriter(dsn, interval=0.05)
    await writer.start()
    assert len(_writer_backends(dsn)) == 1
    writer.record(_events(1, "gov-audit-conn")[0])
    await writer.close()
    assert writer.written == 1
    assert await _until(lambda: _writer_backends(dsn) == []), _writer_backends(dsn)


@pytest.mark.anyio
async def test_a_connection_made_after_close_gave_up_is_closed_not_abandoned(pg_dsn):
    """close() cancels a writer that makes no progress for its timeout, here while the writer is
    reconnecting (its new connection waits on a lock held by this test). The thread making the
    connection cannot be stopped and finishes once the lock is gone; the writer must close what it
    made rather than drop it (psycopg then warns that a connection was deleted while still open)."""
    dsn = new_database(pg_dsn, "writer")
    writer = AuditWriter(dsn, interval=0.02, retry=0.05)
    await writer.start()
    locker = psycopg.connect(dsn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        try:
            locker.execute("LOCK TABLE ontoos_audit.events IN ACCESS EXCLUSIVE MODE")
            with psycopg.connect(dsn, autocommit=True) as admin:  # the writer's connection breaks ...
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity "
                              "WHERE application_name = 'ontoos-audit' AND datname = current_database()")
            writer.record(_events(1, "gov-audit-abandoned")[0])
            # ... so the next write fails and the writer reconnects: its new connection waits on the lock
            assert await _until(lambda: [w for _, w in _writer_backends(dsn)] == ["Lock"]), _writer_backends(dsn)
            await asyncio.wait_for(writer.close(timeout=0.2), 30)
            assert (writer.written, writer.lost) == (0, 1)  # gave up, and said so
        finally:
            locker.rollback()
            locker.close()
        # the thread's connection is made now that the lock is gone, and closed, not kept
        assert await _until(lambda: _writer_backends(dsn) == []), _writer_backends(dsn)
        gc.collect()
    abandoned = [w for w in caught if "deleted while still open" in str(w.message)]
    assert abandoned == [], [str(w.message) for w in abandoned]


@pytest.mark.anyio
async def test_how_long_the_store_is_away_is_timed_on_the_writers_clock(pg_dsn, tmp_path):
    now = [1000.0]
    empty = tmp_path / "nothing"
    empty.mkdir()
    writer = AuditWriter(_down_dsn(pg_dsn, empty), interval=0.05, retry=0.05, clock=lambda: now[0])
    assert writer.stats()["store_down_s"] == 0.0
    await writer.start()  # unreachable: down since 1000.0 on its clock
    try:
        assert writer.stats()["store_down_s"] == 0.0
        now[0] += 12.34
        assert writer.stats()["store_down_s"] == 12.3
        now[0] += 600
        assert writer.stats()["store_down_s"] == 612.3
    finally:
        await writer.close(timeout=0.2)


# ---------------------------------------------------------------- the CLI is a surface too


@pytest.fixture
def cli_env(monkeypatch, pg_dsn):
    for k in ("ONTOOS_AUDIT_DSN", "ONTOOS_AUDIT", "ONTOOS_CONTRACT", "ONTOOS_ROLE", "ONTOOS_QUERIES"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("ONTOOS_DSN", pg_dsn)
    return pg_dsn


def test_cli_explore_writes_one_event_with_surface_cli(cli_env, capsys, demo):
    reset_audit(cli_env)
    text = "explore workloads fields name, replicas where namespace = 'payments' and replicas > 1 order by name limit 4"
    code = cli.main(["explore", "--role", "analyst", "--format", "json", "-q", text])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["ok"] is True
    events = fetch_events(cli_env)
    assert len(events) == 1
    e = events[0]
    q = compile_exploration(text, demo, "analyst")
    assert e["id"] == out["meta"]["exploration_id"]
    assert (e["surface"], e["principal"], e["role"], e["outcome"]) == ("cli", f"cli:{getpass.getuser()}", "analyst", "ok")
    assert (e["dataset"], e["fingerprint"], e["exploration"]) == ("workloads", q.fingerprint, q.normalized)
    assert "namespace = 'payments'" in e["exploration"]
    assert e["rows"] == out["meta"]["rows"] and e["truncated"] is out["meta"]["truncated"]
    assert e["elapsed_ms"] == out["meta"]["elapsed_ms"]


def test_cli_refusal_is_recorded_with_its_reason(cli_env, capsys):
    reset_audit(cli_env)
    code = cli.main(["explore", "--role", "reader", "--format", "json", "-q", "explore hosts fields hostname, ssh_private_key"])
    out = json.loads(capsys.readouterr().out)
    assert code == 2 and out["ok"] is False
    code = cli.main(["explore", "--role", "analyst", "--format", "json", "-q", "explore hosts fields hostname, ssh_private_key"])
    out2 = json.loads(capsys.readouterr().out)
    assert code == 2 and "SECRET" not in json.dumps(out2)
    events = {e["id"]: e for e in fetch_events(cli_env)}
    assert len(events) == 2
    viewer = events[out["meta"]["exploration_id"]]
    analyst = events[out2["meta"]["exploration_id"]]
    assert (viewer["surface"], viewer["outcome"], viewer["error_code"], viewer["reason"]) == ("cli", "refused", "EX202", "OUT_OF_SCOPE")
    assert (analyst["outcome"], analyst["error_code"], analyst["reason"], analyst["column_name"]) == \
        ("refused", "EX201", "SECRET_COLUMN_DENIED", "ssh_private_key")


def test_cli_with_the_audit_off_records_nothing(cli_env, capsys, monkeypatch):
    reset_audit(cli_env)
    monkeypatch.setenv("ONTOOS_AUDIT", "off")
    code = cli.main(["explore", "--role", "analyst", "--format", "json", "-q", "explore workloads fields name limit 1"])
    assert code == 0 and json.loads(capsys.readouterr().out)["ok"] is True
    assert count_events(cli_env) == 0


def test_cli_with_the_audit_store_down_still_answers(cli_env, capsys, monkeypatch, tmp_path):
    empty = tmp_path / "nothing"
    empty.mkdir()
    monkeypatch.setenv("ONTOOS_AUDIT_DSN", _down_dsn(cli_env, empty))
    code = cli.main(["explore", "--role", "analyst", "--format", "json", "-q", "explore workloads fields name limit 1"])
    captured = capsys.readouterr()
    assert code == 0 and json.loads(captured.out)["ok"] is True
    assert "not recorded" in captured.err
    assert str(empty) not in captured.err and str(empty) not in captured.out



def test_a_store_made_before_auth_flood_gaps_takes_them_after_ensure_schema(pg_dsn):
    """The gaps table of an older store had a check without AUTH_FLOOD: ensure_schema widens it,
    once (a second run changes nothing), in a database of its own so the shared store is untouched."""
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS audit_migration")
        admin.execute("CREATE DATABASE audit_migration")
    dsn = make_conninfo(pg_dsn, dbname="audit_migration")
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA ontoos_audit")
            conn.execute("CREATE TABLE ontoos_audit.gaps (id text PRIMARY KEY, at timestamptz NOT NULL, "
                         "reason text NOT NULL CHECK (reason IN ('QUEUE_FULL', 'REJECTED')), events integer NOT NULL, "
                         "first_at timestamptz, last_at timestamptz, writer text, detail text)")
            now = dt.datetime.now(dt.timezone.utc)
            gap = audit.Gap("g1", now, "AUTH_FLOOD", 3, now, now, "test", "3 requests")
            with pytest.raises(psycopg.errors.CheckViolation):
                audit.write_gaps(conn, [gap])
            audit.ensure_schema(conn)
            oid_before = conn.execute("SELECT oid FROM pg_constraint WHERE conname = 'gaps_reason_check'").fetchone()
            audit.ensure_schema(conn)
            assert conn.execute("SELECT oid FROM pg_constraint WHERE conname = 'gaps_reason_check'").fetchone() == oid_before
            audit.write_gaps(conn, [gap])
            assert conn.execute("SELECT reason, events FROM ontoos_audit.gaps").fetchall() == [("AUTH_FLOOD", 3)]
            with pytest.raises(psycopg.errors.CheckViolation):
                audit.write_gaps(conn, [audit.Gap("g2", now, "ANYTHING", 1, now, now, "test", "")])
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS audit_migration")
