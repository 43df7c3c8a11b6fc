"""service.py: `Explorer.explore(source, role)` -> an Answer holding the envelope, on the real test
PostgreSQL. Every outcome is an envelope, never an exception: answered (the rows and the meta
every surface shows), a dry run (the plan), refused (the error with exploration_id and the
contract hash), failed in the database or on the way there (network / internal envelopes), and
anything unexpected (INTERNAL_ERROR, logged with its traceback). Each call has its own id.
"""

from __future__ import annotations

import json
import logging

import psycopg
import pytest

from ontoos_explore import compile_exploration
from ontoos_explore.engine.executor import Executor
from ontoos_explore.engine.pool import open_pool
from ontoos_explore.engine.settings import Settings
from ontoos_explore.service import Answer, Explorer
from tests.envelopes import comparable

pytestmark = pytest.mark.anyio

ASK = "explore workloads fields name, namespace where namespace = 'payments' order by name limit 3"
META_KEYS = {"exploration_id", "fingerprint", "rows", "truncated", "limit", "elapsed_ms", "masked_columns", "notes",
             "contract_hash", "evidence"}


@pytest.fixture
async def explorer(pool, demo):
    p, settings = pool
    yield Explorer(demo, Executor(p, settings))


def assert_error_envelope(answer: Answer, code: str, contract_hash: str) -> dict:
    env = answer.envelope
    assert answer.ok is False and env["ok"] is False and "data" not in env, env
    assert env["error"]["code"] == code, env
    assert env["error"]["hint"], env
    assert len(env["meta"]["exploration_id"]) == 16 and env["meta"]["contract_hash"] == contract_hash, env
    assert answer.error is not None and answer.error.code == code
    json.dumps(env)  # JSON-safe, as every surface sends it
    return env["error"]


async def test_an_answer_has_the_rows_postgresql_returns_and_the_meta(explorer, demo, pg_dsn):
    answer = await explorer.explore(ASK, "analyst")
    env = answer.envelope
    assert answer.ok is True and env["ok"] is True and answer.error is None, env
    assert env["data"]["columns"] == ["name", "namespace"]
    with psycopg.connect(pg_dsn) as conn:
        expected = [list(r) for r in conn.execute(
            "SELECT name, namespace FROM lake.k8s_workloads WHERE namespace = 'payments' AND NOT is_deleted "
            "ORDER BY name LIMIT 3").fetchall()]
    assert env["data"]["rows"] == expected
    meta = env["meta"]
    assert set(meta) == META_KEYS
    compiled = compile_exploration(ASK, demo, "analyst")
    assert answer.compiled.fingerprint == compiled.fingerprint == meta["fingerprint"]
    assert (meta["rows"], meta["limit"], meta["contract_hash"]) == (len(expected), 3, demo.hash)
    assert meta["elapsed_ms"] > 0 and meta["masked_columns"] == [] and isinstance(meta["truncated"], bool)


async def test_a_dry_run_is_the_plan_without_rows(explorer, demo):
    answer = await explorer.explore(ASK, "analyst", dry_run=True)
    env = answer.envelope
    assert answer.ok and "rows" not in env["data"]
    plan = env["data"]["plan"]
    assert (plan["datasets"], plan["columns"], plan["limit"]) == (["workloads"], ["name", "namespace"], 3)
    assert plan["within_budget"] is True and plan["cost_class"] == "low" and "estimated_cost" not in plan
    assert plan["timeout_ms"] == demo.role("analyst").timeout_ms
    assert env["meta"]["dry_run"] is True and env["meta"]["fingerprint"] == answer.compiled.fingerprint


async def test_every_call_has_an_exploration_id_of_its_own(explorer):
    answers = [await explorer.explore(ASK, "analyst") for _ in range(3)]
    answers.append(await explorer.explore("explore workloads fields nope", "analyst"))
    ids = [a.envelope["meta"]["exploration_id"] for a in answers]
    assert len(set(ids)) == 4


@pytest.mark.parametrize(("source", "role", "code"), [
    ("explore workloads fields name limit", "analyst", "EX101"),  # syntax
    (12345, "analyst", "EX102"),  # not a form at all
    ({"dataset": "workloads", "fields": ["name"], "bogus": 1}, "analyst", "EX102"),
    ("explore workloads fields name, namspace", "analyst", "EX201"),  # unknown field
    ("explore hosts fields hostname", "viewer", "EX202"),  # out of the role's scope: as if missing
    ("explore workloads fields name", "nosuchrole", "EX501"),
])
async def test_a_refusal_is_an_error_envelope_with_its_id_and_never_an_exception(explorer, demo, source, role, code):
    answer = await explorer.explore(source, role)
    assert_error_envelope(answer, code, demo.hash)
    assert answer.compiled is None  # refused before anything was compiled


async def test_a_budget_refusal_after_compiling_keeps_the_compiled_query(demo, pg_dsn):
    """The time budget runs out in PostgreSQL (a lock held here): EX410, with the query that was run."""
    settings = Settings(dsn=pg_dsn, pool_max=1)
    p = await open_pool(pg_dsn, settings)
    try:
        explorer = Explorer(demo, Executor(p, settings))
        ds = demo.dataset("databases")
        with psycopg.connect(pg_dsn) as locker:
            locker.execute(f'LOCK TABLE "{ds.schema_name}"."{ds.table_name}" IN ACCESS EXCLUSIVE MODE')
            try:
                answer = await explorer.explore("explore databases fields name limit 2", "analyst")
            finally:
                locker.rollback()
        assert_error_envelope(answer, "EX410", demo.hash)
        assert answer.compiled is not None and answer.compiled.datasets[0] == "databases"
    finally:
        await p.close()


async def test_a_database_that_is_gone_is_an_upstream_envelope(demo, pg_dsn):
    settings = Settings(dsn=pg_dsn, pool_max=1, pool_timeout_s=1)
    p = await open_pool(pg_dsn, settings)
    explorer = Explorer(demo, Executor(p, settings))
    assert (await explorer.explore(ASK, "analyst")).ok
    await p.close()  # the pool (and every connection) is gone
    answer = await explorer.explore(ASK, "analyst")
    err = assert_error_envelope(answer, "EX601", demo.hash)
    assert (err["type"], err["subtype"]) == ("network", "UPSTREAM_UNAVAILABLE")
    assert pg_dsn not in json.dumps(answer.envelope)


async def test_anything_unexpected_is_an_internal_error_logged_with_its_traceback(explorer, demo, caplog):
    """A caller handing run_compiled something that is not a compiled query: an AttributeError deep in
    the executor. It is logged (with the traceback, for the operator) and answered, never raised."""
    with caplog.at_level(logging.ERROR, logger="ontoos_explore.service"):
        answer = await explorer.run_compiled("not a compiled query")
    err = assert_error_envelope(answer, answer.envelope["error"]["code"], demo.hash)
    assert (err["type"], err["subtype"]) == ("internal", "INTERNAL_ERROR")
    assert "AttributeError" not in json.dumps(answer.envelope) and "Traceback" not in json.dumps(answer.envelope)
    logged = [r for r in caplog.records if r.name == "ontoos_explore.service"]
    assert logged and logged[0].exc_info is not None
    assert answer.envelope["meta"]["exploration_id"] in logged[0].getMessage()


async def test_run_compiled_runs_what_was_compiled_elsewhere(explorer, demo):
    compiled = compile_exploration(ASK, demo, "analyst")
    answer = await explorer.run_compiled(compiled)
    assert answer.ok and answer.compiled is compiled
    assert answer.envelope["data"] == (await explorer.explore(ASK, "analyst")).envelope["data"]


async def test_the_template_cache_changes_nothing_a_caller_sees(pool, demo):
    p, settings = pool
    cached, uncached = Explorer(demo, Executor(p, settings)), Explorer(demo, Executor(p, settings), cache=None)
    for text in (ASK, ASK.replace("payments", "prod"), "explore workloads fields nme"):
        a, b = await cached.explore(text, "analyst"), await uncached.explore(text, "analyst")
        assert comparable(a.envelope) == comparable(b.envelope), text
