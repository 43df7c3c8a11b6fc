"""Paging past a truncated answer: meta.next_cursor, signed and bound to the principal, its role, the
contract, the question and the batches of its first page; the pages of one question, followed to the end,
are exactly the rows an independent query returns, up to the role's max_pages. Through `Tools` (the one
entry point of MCP and REST) on real PostgreSQL."""

from __future__ import annotations

import base64
import json

import psycopg
import pytest

from ontoos_explore.cursors import Cursors
from ontoos_explore.engine.executor import Executor
from ontoos_explore.server.config import Principal
from ontoos_explore.server.tools import Tools
from ontoos_explore.service import Explorer
from tests.conftest import executor_for
from tests.databases import demo_database

pytestmark = pytest.mark.anyio

VIEWER = Principal("vic", "reader")  # the published read set, exploring
QUESTION = {"dataset": "workloads", "fields": ["name", "namespace"], "filter": "namespace = 'prod'",
            "order_by": ["name"], "limit": 7}
ORACLE = ("SELECT w.name, w.namespace FROM lake.k8s_workloads w JOIN lake.gitlab_projects p ON p.project_id = "
          "w.project_id WHERE w.namespace = 'prod' AND NOT w.is_deleted AND NOT p.is_deleted "
          "ORDER BY w.name, w.workload_id")


@pytest.fixture
def tools(demo, pool):
    p, settings = pool
    return Tools(demo, Explorer(demo, Executor(p, settings)), cursors=Cursors("a-test-secret-of-some-length"))


async def walk(tools: Tools, first: dict, principal: Principal = VIEWER) -> list[dict]:
    """Every page of a question, following next_cursor to the end."""
    pages = [(await tools.call("ontoos_explore", first, principal, "rest")).envelope]
    while pages[-1]["ok"] and pages[-1]["meta"].get("next_cursor"):
        pages.append((await tools.call("ontoos_explore", {"cursor": pages[-1]["meta"]["next_cursor"]}, principal,
                                       "rest")).envelope)
    return pages


def error(env: dict) -> tuple[str, str]:
    return env["error"]["code"], env["error"]["subtype"]


async def test_the_pages_of_a_question_are_its_rows_in_a_total_order(tools, demo, pg_dsn):
    with psycopg.connect(pg_dsn) as conn:
        expected = [list(r) for r in conn.execute(ORACLE).fetchall()]
    pages = await walk(tools, QUESTION)
    assert all(p["ok"] for p in pages)
    assert [p["meta"]["page"] for p in pages] == list(range(1, len(pages) + 1))
    rows = [r for p in pages for r in p["data"]["rows"]]
    max_pages = demo.role("reader").max_pages
    assert len(expected) > 7 * max_pages  # the demo has more: the walk stops at max_pages
    assert len(pages) == max_pages and rows == expected[: 7 * max_pages]
    assert pages[-1]["meta"]["truncated"] is True and "next_cursor" not in pages[-1]["meta"]
    assert any("max_pages" in n for n in pages[-1]["meta"]["notes"])


async def test_a_grouped_question_pages_by_its_groups(tools, pg_dsn):
    asked = {"dataset": "workloads", "fields": ["namespace", "count()"], "group_by": ["namespace"], "limit": 3}
    with psycopg.connect(pg_dsn) as conn:
        expected = [list(r) for r in conn.execute(
            "SELECT w.namespace, count(*) FROM lake.k8s_workloads w JOIN lake.gitlab_projects p ON p.project_id = "
            "w.project_id WHERE NOT w.is_deleted AND NOT p.is_deleted GROUP BY w.namespace ORDER BY w.namespace")]
    pages = await walk(tools, asked)
    assert [r for p in pages for r in p["data"]["rows"]] == expected
    assert pages[-1]["meta"]["truncated"] is False and len(pages) == -(-len(expected) // 3)


async def test_a_cursor_alone_or_with_its_own_question_but_not_another(tools):
    first = (await tools.call("ontoos_explore", QUESTION, VIEWER, "rest")).envelope
    cursor = first["meta"]["next_cursor"]
    alone = (await tools.call("ontoos_explore", {"cursor": cursor}, VIEWER, "mcp")).envelope
    beside = (await tools.call("ontoos_explore", {**QUESTION, "cursor": cursor}, VIEWER, "mcp")).envelope
    assert alone["data"]["rows"] == beside["data"]["rows"] != first["data"]["rows"]
    other = (await tools.call("ontoos_explore", {**QUESTION, "filter": "namespace = 'payments'", "cursor": cursor},
                              VIEWER, "mcp")).envelope
    assert error(other) == ("EX703", "RESULT_EXPIRED") and "another question" in other["error"]["message"]
    dry = (await tools.call("ontoos_explore", {"cursor": cursor, "dry_run": True}, VIEWER, "mcp")).envelope
    assert error(dry) == ("EX703", "RESULT_EXPIRED")


def _altered(cursor: str) -> str:
    body, sig = cursor.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["o"] = 0  # back to the first rows
    raw = base64.urlsafe_b64encode(json.dumps(claims, separators=(",", ":")).encode()).rstrip(b"=").decode()
    return f"{raw}.{sig}"


async def test_a_cursor_is_refused_for_anyone_else_altered_or_old(demo, pool):
    p, settings = pool
    now = [1_000_000.0]
    cursors = Cursors("a-test-secret-of-some-length", ttl_s=60, clock=lambda: now[0])
    tools = Tools(demo, Explorer(demo, Executor(p, settings)), cursors=cursors)
    cursor = (await tools.call("ontoos_explore", QUESTION, VIEWER, "rest")).envelope["meta"]["next_cursor"]
    refused = {
        "another principal": await tools.call("ontoos_explore", {"cursor": cursor}, Principal("eve", "reader")),
        "another role": await tools.call("ontoos_explore", {"cursor": cursor}, Principal("vic", "analyst")),
        "altered": await tools.call("ontoos_explore", {"cursor": _altered(cursor)}, VIEWER),
        "not one": await tools.call("ontoos_explore", {"cursor": "x" * 40}, VIEWER),
        "not ASCII": await tools.call("ontoos_explore", {"cursor": cursor[:-1] + "é"}, VIEWER),
        "another deployment": await Tools(demo, Explorer(demo, Executor(p, settings)),
                                          cursors=Cursors("another-secret-entirely")).call(
            "ontoos_explore", {"cursor": cursor}, VIEWER),
    }
    for why, answer in refused.items():
        assert error(answer.envelope) == ("EX703", "RESULT_EXPIRED"), why
        assert answer.status == 410 and "rows" not in json.dumps(answer.envelope.get("data", {})), why
    assert (await tools.call("ontoos_explore", {"cursor": cursor}, VIEWER)).ok  # still good for its own caller
    now[0] += 61
    old = await tools.call("ontoos_explore", {"cursor": cursor}, VIEWER)
    assert error(old.envelope) == ("EX703", "RESULT_EXPIRED") and "61 s old" in old.envelope["error"]["message"]


async def test_a_page_read_from_republished_batches_is_refused(demo, pg_dsn):
    dsn = demo_database(pg_dsn, "pages_republished", demo)
    async with executor_for(dsn, demo) as executor:
        tools = Tools(demo, Explorer(demo, executor), cursors=Cursors("a-test-secret-of-some-length"))
        first = (await tools.call("ontoos_explore", QUESTION, VIEWER)).envelope
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO lake.publish_log (source, batch_id, collected_at, published_at, as_of) "
                         "VALUES ('k8s', 'newer_k8s', now(), now(), now())")
        second = (await tools.call("ontoos_explore", {"cursor": first["meta"]["next_cursor"]}, VIEWER)).envelope
    assert first["ok"] and error(second) == ("EX703", "RESULT_EXPIRED")
    assert "republished" in second["error"]["message"] and "rows" not in second.get("data", {})


async def test_a_dataset_without_a_key_gives_no_cursor(tmp_path, pool):
    import yaml

    from ontoos_explore import load_contract
    from tests.conftest import ROOT

    data = yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text(encoding="utf-8"))
    del data["datasets"]["workloads"]["key"]
    path = tmp_path / "no-key.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    contract = load_contract(path)
    p, settings = pool
    tools = Tools(contract, Explorer(contract, Executor(p, settings)), cursors=Cursors("a-test-secret-of-some-length"))
    env = (await tools.call("ontoos_explore", QUESTION, VIEWER)).envelope
    assert env["meta"]["truncated"] is True and "next_cursor" not in env["meta"]
    assert any("not total" in n for n in env["meta"]["notes"])


async def test_rest_get_pages_with_cursor_as_post_does(tools):
    """The GET form takes `cursor` too (alone: the cursor's own question)."""
    from urllib.parse import urlencode

    from tests.server.test_tools import app_for, asgi

    first = (await tools.call("ontoos_explore", QUESTION, Principal("alice", "analyst"), "rest")).envelope
    cursor = first["meta"]["next_cursor"]
    app = app_for(tools)
    status, body, _ = await asgi(app, "GET", "/api/v1/explore", query=urlencode({"cursor": cursor}))
    posted = (await tools.call("ontoos_explore", {"cursor": cursor}, Principal("alice", "analyst"), "rest")).envelope
    assert status == 200 and body["meta"]["page"] == 2 and body["data"]["rows"] == posted["data"]["rows"]
    status, body, _ = await asgi(app, "GET", "/api/v1/explore", query=urlencode({"cursor": cursor[:-3] + "AAA"}))
    assert status == 410 and body["error"]["subtype"] == "RESULT_EXPIRED"
