"""Named queries as tools of their own: listed after the built-in tools for the roles that may run them,
with their parameters as the input schema (nested objects for dotted names), answered as ontoos_run_query
answers, and announced with notifications/tools/list_changed when the registry changes. Driven by the
official SDK client over the production server (`build_server`) on real PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json

import anyio
import pytest
import yaml
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import ToolListChangedNotification

from ontoos_explore.engine.executor import Executor
from ontoos_explore.governance.registry import Registry
from ontoos_explore.governance.store import DEMO_REGISTRY, LiveRegistry, RegistryStore
from ontoos_explore.server.config import Principal
from ontoos_explore.server.mcp_server import LIST_TTL_MS, build_server, fixed
from ontoos_explore.server.tool_models import MAX_DESCRIPTION
from ontoos_explore.server.tools import Tools
from ontoos_explore.service import Explorer
from tests.named_queries import DEMO_QUERY_TOOLS

pytestmark = pytest.mark.anyio
BUILT_IN = 7  # the tools of a role that explores; the viewer (named queries only) has six


def own(tools) -> list:
    """The named queries' own tools of a tools/list, in its order (after the built-in ones)."""
    return [t for t in tools if t.name.startswith("ontoos_q_")]


@pytest.fixture(params=["auto", "legacy"])
def mode(request) -> str:
    return request.param


@pytest.fixture
def connect(demo, pool):
    p, settings = pool

    @contextlib.asynccontextmanager
    async def go(role: str, mode: str, registry=None, **client):
        tools = Tools(demo, Explorer(demo, Executor(p, settings)), registry or Registry.load(DEMO_REGISTRY, demo))
        server = build_server(tools, fixed(Principal("alice", role)))
        async with Client(server, mode=mode, **client) as c:
            yield c, server

    return go


async def test_each_query_a_role_may_run_is_a_tool_of_its_own(connect, mode, demo):
    registry = Registry.load(DEMO_REGISTRY, demo)
    for role in ("viewer", "analyst"):
        async with connect(role, mode) as (client, _):
            listed = await client.list_tools()
        names = [t.name for t in listed.tools]
        built_in = BUILT_IN - (role == "viewer")  # no ontoos_explore for the viewer
        assert names[built_in:] == DEMO_QUERY_TOOLS[role] == [t.name for t in own(listed.tools)]
        assert ("ontoos_explore" in names) is (role != "viewer")
        if mode == "auto":  # a 2026-07-28 field: a legacy wire does not carry it
            assert (listed.ttl_ms, listed.cache_scope) == (LIST_TTL_MS, "private")
        for tool in own(listed.tools):
            query = registry.entries[tool.name.removeprefix("ontoos_q_")]
            assert tool.title == query.title and tool.description.startswith(query.title)
            assert all(c in tool.description for c in query.columns)
            assert len(tool.description.encode()) <= MAX_DESCRIPTION
            Draft202012Validator.check_schema(tool.input_schema)
            assert set(tool.input_schema["properties"]) == {p.name.split(".")[0] for p in query.parameters} | {"require", "cursor"}
            assert tool.input_schema["additionalProperties"] is False and tool.output_schema["type"] == "object"
            a = tool.annotations
            assert (a.read_only_hint, a.idempotent_hint, a.destructive_hint, a.open_world_hint) == (True, True, False, False)


async def test_a_nested_parameter_is_an_object_in_the_schema(connect, mode):
    async with connect("viewer", mode) as (client, _):
        tool = {t.name: t for t in (await client.list_tools()).tools}["ontoos_q_images_built_in_window"]
    window = tool.input_schema["properties"]["window"]
    assert window["type"] == "object" and window["required"] == ["from", "to"]
    assert window["properties"]["from"]["format"] == "date-time"
    assert tool.input_schema["required"] == ["window"]
    assert tool.input_schema["properties"]["language"]["default"] == "java"


async def test_a_query_tool_answers_as_run_query_does(connect, mode):
    async with connect("viewer", mode) as (client, _):
        own = await client.call_tool("ontoos_q_languages_by_group", {"namespace": "fp"})
        generic = await client.call_tool("ontoos_run_query", {"id": "languages_by_group", "params": {"namespace": "fp"}})
        window = {"from": "2026-01-01T00:00:00Z", "to": "2026-07-01T00:00:00Z"}
        nested = await client.call_tool("ontoos_q_images_built_in_window", {"window": window, "language": "go"})
        typo = await client.call_tool("ontoos_q_images_built_in_window", {"window": window, "langauge": "go"})
    assert own.is_error is False and generic.is_error is False
    env = own.structured_content
    assert env["data"]["rows"] and env["data"]["rows"] == generic.structured_content["data"]["rows"]
    assert env["data"]["columns"] == ["language", "archives", "loc"] and env["meta"]["fingerprint"] == "named:languages_by_group"
    assert nested.is_error is False and nested.structured_content["data"]["rows"]
    err = json.loads(typo.content[0].text)["error"]
    assert typo.is_error is True and err["code"] == "EX102" and "did you mean 'language'" in err["hint"]


async def test_a_query_the_role_may_not_run_is_a_tool_that_does_not_exist(connect, mode):
    async with connect("viewer", mode) as (client, _):
        with pytest.raises(MCPError, match="Unknown tool: ontoos_q_hosts_by_provider"):
            await client.call_tool("ontoos_q_hosts_by_provider", {"provider": "aws"})
        queries = await client.call_tool("ontoos_queries", {})
    assert "hosts_by_provider" not in json.dumps(queries.structured_content)


async def test_a_registry_change_is_announced_and_listed(connect, demo, tmp_path):
    """Legacy sessions get notifications/tools/list_changed (a 2026-07-28 client listens for it with
    subscriptions/listen); the next tools/list shows the change."""
    entries = yaml.safe_load(DEMO_REGISTRY.read_text(encoding="utf-8"))
    first, second = entries["queries"][:2]
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "queries": [first]}), encoding="utf-8")
    live = LiveRegistry(RegistryStore(path), demo, interval=0.05)
    changed = asyncio.Event()

    async def on_message(message) -> None:
        if isinstance(getattr(message, "root", message), ToolListChangedNotification):
            changed.set()

    async with connect("viewer", "legacy", registry=live, message_handler=on_message) as (client, server):
        assert client.server_capabilities.tools.list_changed is True
        server.changes.interval_s = 0.05
        watching = asyncio.ensure_future(server.changes.watch())
        try:
            before = [t.name for t in own((await client.list_tools()).tools)]
            path.write_text(yaml.safe_dump({"version": 1, "queries": [first, second]}), encoding="utf-8")
            with anyio.fail_after(10):
                await changed.wait()
            after = [t.name for t in own((await client.list_tools()).tools)]
        finally:
            watching.cancel()
    assert before == ["ontoos_q_" + first["id"]]
    assert after == sorted(["ontoos_q_" + first["id"], "ontoos_q_" + second["id"]])


def test_the_tools_a_role_sees_follow_the_registry_served(demo, tmp_path):
    """Listed once per role and reused (an MCP call asks three times), but a registry edit is seen on the
    next ask, and each role keeps its own list."""
    entries = yaml.safe_load(DEMO_REGISTRY.read_text(encoding="utf-8"))
    first, second = entries["queries"][:2]
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "queries": [first]}), encoding="utf-8")
    live = LiveRegistry(RegistryStore(path), demo, interval=3600)  # changed only by refresh() below
    tools = Tools(demo, None, live)
    analyst, viewer = Principal("alice", "analyst"), Principal("bob", "viewer")
    before = tools.visible(analyst)
    assert tools.visible(analyst) is before  # the same registry: the same list
    assert "ontoos_explore" in before and "ontoos_explore" not in tools.visible(viewer)
    assert [n for n in before if n.startswith("ontoos_q_")] == ["ontoos_q_" + first["id"]]
    path.write_text(yaml.safe_dump({"version": 1, "queries": [first, second]}), encoding="utf-8")
    assert live.refresh() is True
    after = tools.visible(analyst)
    assert [n for n in after if n.startswith("ontoos_q_")] == sorted(["ontoos_q_" + first["id"], "ontoos_q_" + second["id"]])


# ================================================================ over streamable HTTP, a real server


@pytest.fixture(scope="module")
def http_server(pg_dsn, tmp_path_factory):
    from tests.server.test_http import start_server

    srv = start_server("query-tools", tmp_path_factory.mktemp("query-tools"), {"ONTOOS_DSN": pg_dsn, "ONTOOS_AUDIT": "off"},
                       [pg_dsn])
    yield srv
    srv.stop_cleanly()


async def test_over_http_a_query_tool_runs_and_a_registry_edit_is_announced(http_server):
    """The server started where no queries.yaml is, on the demo contract: the demo registry's tools; the
    file written there replaces them, and the open session hears of it."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from tests.server.test_http import ALICE

    changed = asyncio.Event()

    async def on_message(message) -> None:
        if isinstance(getattr(message, "root", message), ToolListChangedNotification):
            changed.set()

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {ALICE}"})
    async with http, Client(streamable_http_client(http_server.base + "/mcp", http_client=http), mode="legacy",
                            message_handler=on_message) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names[BUILT_IN:] == DEMO_QUERY_TOOLS["analyst"]
        blast = await client.call_tool("ontoos_q_table_change_blast_radius", {"table_name": "orders"})
        assert blast.is_error is False, blast.content[0].text
        rows = blast.structured_content["data"]["rows"]
        assert rows and {r[1].lower() for r in rows} == {"orders"}  # table_name, matched case-insensitively
        entries = yaml.safe_load(DEMO_REGISTRY.read_text(encoding="utf-8"))["queries"]
        only = [e for e in entries if e["id"] == "hosts_by_provider"]
        (http_server.workdir / "queries.yaml").write_text(yaml.safe_dump({"version": 1, "queries": only}),
                                                          encoding="utf-8")
        with anyio.fail_after(15):
            await changed.wait()
        names = [t.name for t in (await client.list_tools()).tools]
        assert names[BUILT_IN:] == ["ontoos_q_hosts_by_provider"]


@pytest.mark.parametrize("option", ["require", "cursor"])
async def test_a_parameter_named_as_an_option_is_the_querys_own(connect, demo, tmp_path, option):
    """`require` (freshness) and `cursor` (the next page) are options of a query tool, unless the query
    declares a parameter so named: then its schema has no option of that name, and the value reaches the
    query."""
    entry = {"id": "kinds", "title": "Workloads of a kind", "read_sets": ["published"],
             "params": [{"name": option, "type": "enum", "values": ["Deployment", "Job"], "required": True}],
             "constants": [{"name": "kept", "type": "boolean", "value": False}],
             "sql": "SELECT w.name AS name, w.kind AS kind FROM lake.k8s_workloads AS w INNER JOIN "
                    "lake.gitlab_projects AS p ON p.project_id = w.project_id WHERE w.kind = :" + option +
                    " AND w.is_deleted = :kept AND p.is_deleted = :kept ORDER BY w.workload_id LIMIT 6"}
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "queries": [entry]}), encoding="utf-8")
    async with connect("reader", "legacy", registry=Registry.load(path, demo)) as (client, _):
        tool = {t.name: t for t in (await client.list_tools()).tools}["ontoos_q_kinds"]
        jobs = await client.call_tool("ontoos_q_kinds", {option: "Job"})
    assert tool.input_schema["properties"][option]["enum"] == ["Deployment", "Job"]
    rows = jobs.structured_content["data"]["rows"]
    assert jobs.is_error is False and rows and {kind for _, kind in rows} == {"Job"}


async def test_the_sdk_looks_up_a_tools_schema_as_the_callers_tools_list_would_give_it(connect, mode, demo,
                                                                                      monkeypatch):
    """The SDK asks `get_tool_input_schema(name)` before each tools/call over HTTP, to check the call's
    Mcp-Param headers against it; answered for the request's caller (CALLER), it is the schema
    tools/list gives that caller when the schema declares a header, and None for one that declares
    none (nothing to check), a tool the caller may not see, one that does not exist, or no caller."""
    from ontoos_explore.server import mcp_server
    from ontoos_explore.server.mcp_server import CALLER

    for declaring in (False, True):  # no tool of ours declares a header; were they all to, each is answered
        if declaring:
            monkeypatch.setattr(mcp_server, "declares_headers", lambda tool: True)
        for role, hidden in (("viewer", "ontoos_q_hosts_by_provider"), ("analyst", None)):
            async with connect(role, mode) as (client, server):
                listed = {t.name: t.input_schema for t in (await client.list_tools()).tools}
                lookup = server.get_tool_input_schema
                token = CALLER.set(Principal("alice", role))
                try:
                    assert {name: lookup(name) for name in listed} == (listed if declaring else dict.fromkeys(listed))
                    assert lookup("ontoos_nope") is None
                    if hidden is not None:
                        assert hidden not in listed and lookup(hidden) is None
                finally:
                    CALLER.reset(token)
                assert lookup("ontoos_catalog") is None  # no caller: no answer, the SDK validates nothing


def test_a_schema_declares_headers_when_it_names_x_mcp_header_anywhere():
    from mcp.types import Tool

    from ontoos_explore.server.mcp_server import declares_headers

    plain = {"type": "object", "properties": {"region": {"type": "string"}}}
    header = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
    assert declares_headers(Tool(name="a", input_schema=plain)) is False
    assert declares_headers(Tool(name="b", input_schema=header)) is True
