"""Paging through the official MCP client over both real transports: `ontoos serve --stdio` and
`ontoos serve --http` (streamable HTTP). An exploration's cursor and a named query's (its own tool and
ontoos_run_query) each bring the next page of the same rows; the pages do not overlap."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import pytest
import yaml
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.server.test_hostile_support import start_hostile_server, token
from tests.test_pages_named import ENTRIES

pytestmark = pytest.mark.anyio
ONTOOS = Path(sys.executable).parent / "ontoos"
SECRET = "a-deployment-secret-for-paging"


@pytest.fixture
def registry(tmp_path) -> Path:
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "queries": ENTRIES}))
    return path


@pytest.fixture(params=["stdio", "http"])
def connect(request, pg_dsn, registry, tmp_path):
    servers = []

    @contextlib.asynccontextmanager
    async def go():
        if request.param == "stdio":
            params = StdioServerParameters(command=str(ONTOOS), args=["serve", "--stdio", "--role", "analyst",
                                                                      "--queries", str(registry)],
                                           env={"ONTOOS_DSN": pg_dsn, "ONTOOS_SECRET": SECRET, "ONTOOS_AUDIT": "off"})
            async with Client(params, mode="auto") as client:
                yield client
            return
        srv = start_hostile_server("pages-mcp", pg_dsn, tmp_path / "http", args=("--queries", str(registry)),
                                   ONTOOS_SECRET=SECRET)
        servers.append(srv)
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token('alice')}"})
        async with http, Client(streamable_http_client(srv.base + "/mcp", http_client=http), mode="auto") as client:
            yield client

    yield go
    for srv in servers:
        srv.stop_cleanly()


async def two_pages(client, tool: str, first: dict, again: dict | None = None) -> tuple[dict, dict]:
    one = (await client.call_tool(tool, first)).structured_content
    assert one["ok"] and one["meta"]["truncated"] and one["meta"]["page"] == 1, one
    result = await client.call_tool(tool, {**(again or {}), "cursor": one["meta"]["next_cursor"]})
    two = result.structured_content
    assert two is not None, [c.text for c in result.content]
    assert two["ok"] and two["meta"]["page"] == 2, two
    return one, two


async def test_cursors_page_explorations_and_named_queries(connect):
    async with connect() as client:
        pairs = [
            await two_pages(client, "ontoos_explore", {"dataset": "workloads", "fields": ["name"],
                                                       "order_by": ["name"], "limit": 3}),
            await two_pages(client, "ontoos_q_prod_workloads", {"namespace": "prod"}),
            await two_pages(client, "ontoos_run_query", {"id": "prod_workloads", "params": {"namespace": "prod"}},
                            {"id": "prod_workloads"}),
        ]
    for one, two in pairs:
        rows_one, rows_two = (set(map(tuple, p["data"]["rows"])) for p in (one, two))
        assert rows_one and rows_two and not rows_one & rows_two
    assert pairs[1][1]["data"]["rows"] == pairs[2][1]["data"]["rows"]  # the same query's page 2, either way
