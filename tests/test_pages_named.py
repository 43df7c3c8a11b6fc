"""Paging a named query: a truncated answer of an entry whose ORDER BY makes the order total carries
meta.next_cursor; its pages, followed to the end, are exactly the rows the entry's SQL returns without
LIMIT, each page's SQL (the entry's with an OFFSET) verified again by the guard. Through `Tools` (MCP and
REST's one entry point) on real PostgreSQL: ontoos_run_query and the query's own tool alike."""

from __future__ import annotations

import json

import psycopg
import pytest
import yaml

from ontoos_explore.cursors import Cursors
from ontoos_explore.engine.executor import Executor
from ontoos_explore.governance.registry import Registry, page_sql
from ontoos_explore.policy.named_paging import with_offset
from ontoos_explore.server.config import Principal
from ontoos_explore.server.tools import Tools
from ontoos_explore.service import Explorer

pytestmark = pytest.mark.anyio

ANALYST = Principal("ann", "analyst")
PAGED_SQL = """
SELECT w.name AS workload, p.path AS project
FROM lake.k8s_workloads AS w
INNER JOIN lake.gitlab_projects AS p ON p.project_id = w.project_id
WHERE w.namespace = :namespace AND w.is_deleted = :kept AND p.is_deleted = :kept
ORDER BY p.path, w.workload_id
LIMIT 7
"""
KEPT = [{"name": "kept", "type": "boolean", "value": False}]  # the contract's always-filters
ENTRIES = [
    {"id": "prod_workloads", "title": "Workloads of a namespace, a page at a time", "read_sets": ["published"],
     "params": [{"name": "namespace", "type": "string", "required": True}], "constants": KEPT,
     "budget": {"max_rows": 6}, "sql": PAGED_SQL},
    # ordered by names only: two workloads of one name in one project would tie, so it does not page
    {"id": "unkeyed", "title": "Workloads by name", "read_sets": ["published"],
     "constants": KEPT, "budget": {"max_rows": 6},
     "sql": "SELECT w.name AS workload FROM lake.k8s_workloads AS w INNER JOIN lake.gitlab_projects AS p "
            "ON p.project_id = w.project_id WHERE w.is_deleted = :kept AND p.is_deleted = :kept "
            "ORDER BY w.name LIMIT 7"},
]
ORACLE = ("SELECT w.name, p.path FROM lake.k8s_workloads w JOIN lake.gitlab_projects p ON p.project_id = "
          "w.project_id WHERE w.namespace = 'prod' AND NOT w.is_deleted AND NOT p.is_deleted "
          "ORDER BY p.path, w.workload_id")


@pytest.fixture
def registry(demo, tmp_path):
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "queries": ENTRIES}))
    loaded = Registry.load(path, demo)
    assert not loaded.problems
    return loaded


@pytest.fixture
def tools(demo, pool, registry):
    p, settings = pool
    return Tools(demo, Explorer(demo, Executor(p, settings)), registry, cursors=Cursors("a-test-secret-of-some-length"))


async def walk(tools: Tools, name: str, first: dict) -> list[dict]:
    pages = [(await tools.call(name, first, ANALYST, "mcp")).envelope]
    while pages[-1]["ok"] and pages[-1]["meta"].get("next_cursor"):
        pages.append((await tools.call(name, {"cursor": pages[-1]["meta"]["next_cursor"]}, ANALYST, "mcp")).envelope)
    return pages


def error(env: dict) -> tuple[str, str]:
    return env["error"]["code"], env["error"]["subtype"]


def test_an_order_by_that_names_each_table_or_a_joined_key_is_total(registry):
    assert registry.entries["prod_workloads"].pageable is True  # p by its key's equality with w.project_id
    assert registry.entries["unkeyed"].pageable is False


@pytest.mark.parametrize("name, first", [
    ("ontoos_run_query", {"id": "prod_workloads", "params": {"namespace": "prod"}}),
    ("ontoos_q_prod_workloads", {"namespace": "prod"}),
])
async def test_the_pages_of_a_named_query_are_its_rows_in_order(tools, demo, pg_dsn, name, first):
    with psycopg.connect(pg_dsn) as conn:
        expected = [list(r) for r in conn.execute(ORACLE).fetchall()]
    pages = await walk(tools, name, first)
    assert all(p["ok"] for p in pages), pages[-1]
    assert [p["meta"]["page"] for p in pages] == list(range(1, len(pages) + 1))
    rows = [r for p in pages for r in p["data"]["rows"]]
    max_pages = demo.role("analyst").max_pages
    assert len(expected) > 6
    assert rows == expected[: 6 * max_pages]
    if len(expected) > 6 * max_pages:
        assert any("max_pages" in n for n in pages[-1]["meta"]["notes"])
    else:
        assert pages[-1]["meta"]["truncated"] is False and len(pages) == -(-len(expected) // 6)


async def test_a_named_query_whose_order_is_not_total_says_so_and_gives_no_cursor(tools):
    env = (await tools.call("ontoos_run_query", {"id": "unkeyed"}, ANALYST, "mcp")).envelope
    assert env["ok"] and env["meta"]["truncated"] is True and "next_cursor" not in env["meta"]
    assert any("ORDER BY does not make the order total" in n for n in env["meta"]["notes"])


async def test_a_cursor_pages_only_its_own_question(tools):
    first = (await tools.call("ontoos_run_query", {"id": "prod_workloads", "params": {"namespace": "prod"}},
                              ANALYST, "mcp")).envelope
    cursor = first["meta"]["next_cursor"]
    same = (await tools.call("ontoos_run_query", {"id": "prod_workloads", "params": {"namespace": "prod"},
                                                  "cursor": cursor}, ANALYST, "mcp")).envelope
    assert same["ok"] and same["meta"]["page"] == 2
    assert same["data"]["rows"][0] != first["data"]["rows"][0]
    other_params = (await tools.call("ontoos_run_query", {"id": "prod_workloads", "params": {"namespace": "dev"},
                                                          "cursor": cursor}, ANALYST, "mcp")).envelope
    other_query = (await tools.call("ontoos_q_unkeyed", {"cursor": cursor}, ANALYST, "mcp")).envelope
    as_exploration = (await tools.call("ontoos_explore", {"cursor": cursor}, ANALYST, "mcp")).envelope
    for env in (other_params, other_query):
        assert error(env) == ("EX703", "RESULT_EXPIRED") and "another question" in env["error"]["message"]
    assert error(as_exploration) == ("EX703", "RESULT_EXPIRED")
    assert "named query" in as_exploration["error"]["message"]
    explored = (await tools.call("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "limit": 2},
                                 ANALYST, "mcp")).envelope
    as_query = (await tools.call("ontoos_run_query", {"cursor": explored["meta"]["next_cursor"]}, ANALYST,
                                 "mcp")).envelope
    assert error(as_query) == ("EX703", "RESULT_EXPIRED") and "exploration" in as_query["error"]["message"]


async def test_a_cursor_is_its_principals_own(tools):
    first = (await tools.call("ontoos_q_prod_workloads", {"namespace": "prod"}, ANALYST, "mcp")).envelope
    env = (await tools.call("ontoos_q_prod_workloads", {"cursor": first["meta"]["next_cursor"]},
                            Principal("bob", "analyst"), "mcp")).envelope
    assert error(env) == ("EX703", "RESULT_EXPIRED") and "another principal" in env["error"]["message"]


def test_a_page_sql_is_the_entry_with_an_offset_and_is_verified_again(registry, demo):
    entry = registry.entries["prod_workloads"]
    sql = page_sql(entry, 12, demo)
    assert sql.endswith("LIMIT 7 OFFSET 12") and "ORDER BY p.path, w.workload_id" in sql
    assert with_offset(sql, 6).endswith("LIMIT 7 OFFSET 18")  # an OFFSET it has moves on


def test_the_cli_pages_an_exploration_and_a_named_query_with_the_servers_secret(capsys, monkeypatch, pg_dsn,
                                                                                 tmp_path):
    from ontoos_explore.cli import main

    monkeypatch.setenv("ONTOOS_DSN", pg_dsn)
    monkeypatch.setenv("ONTOOS_AUDIT", "off")
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "queries": ENTRIES}))

    def run(*argv):
        code = main(list(argv))
        return code, json.loads(capsys.readouterr().out)

    named = ("--role", "analyst", "--queries", str(path), "--format", "json")
    code, first = run("queries", "run", "prod_workloads", *named, "-p", "namespace=prod")
    assert code == 0, first
    assert "next_cursor" not in first["meta"]  # no secret: no cursor, and a note says why
    assert any("ONTOOS_SECRET" in n for n in first["meta"]["notes"])
    monkeypatch.setenv("ONTOOS_SECRET", "the-deployments-own-secret")
    for ask, again in ((("queries", "run", "prod_workloads", *named, "-p", "namespace=prod"), ("queries", "run", *named)),
                       (("explore", "--role", "analyst", "-q", "explore workloads fields name order by name limit 4"),
                        ("explore", "--role", "analyst"))):
        code, first = run(*ask)
        code2, second = run(*again, "--cursor", first["meta"]["next_cursor"])
        assert (code, code2) == (0, 0) and second["meta"]["page"] == 2
        assert len(second["data"]["rows"]) == len(first["data"]["rows"])
        assert not set(map(tuple, second["data"]["rows"])) & set(map(tuple, first["data"]["rows"]))
    monkeypatch.setenv("ONTOOS_SECRET", "another-deployments-secret")
    code, refused = run("explore", "--role", "analyst", "--cursor", first["meta"]["next_cursor"])
    assert code != 0 and refused["error"]["subtype"] == "RESULT_EXPIRED"


async def test_a_cursor_of_a_query_changed_since_page_1_is_refused(tools, registry, demo, tmp_path):
    first = (await tools.call("ontoos_q_prod_workloads", {"namespace": "prod"}, ANALYST, "mcp")).envelope
    changed = [{**ENTRIES[0], "sql": PAGED_SQL.replace("ORDER BY p.path, w.workload_id",
                                                       "ORDER BY w.name, w.workload_id")}]
    path = tmp_path / "changed.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "queries": changed}))
    tools.registry = Registry.load(path, demo)
    env = (await tools.call("ontoos_q_prod_workloads", {"cursor": first["meta"]["next_cursor"]}, ANALYST,
                            "mcp")).envelope
    assert error(env) == ("EX703", "RESULT_EXPIRED") and "changed since page 1" in env["error"]["message"]
