"""A running server serves a change to the registry file without a restart: a query approved
with the CLI (`ontoos queries approve`, a separate process) becomes visible in `ontoos_queries`
and runs through `ontoos_run_query` within 2 s, over MCP on a real `ontoos serve --http` and on
a real `ontoos serve --stdio`. (Before, the dashboard showed it approved while agents were told
EX208 "not a named query you may run" until some dashboard action reloaded it.)

The HTTP server is started in its own directory without --queries, and the CLI approves one
query with --queries FILE and another with no flag from the same directory: the CLI and the
servers have one default registry file, queries.yaml. A change by another process (a plain
write through the store) is served too, and a broken file leaves the last good registry in
service. The assertions poll with a deadline: what is asserted is that the change becomes
visible, not how fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ontoos_explore.governance.store import RegistryStore
from tests import serving

pytestmark = pytest.mark.anyio

ONTOOS = Path(sys.executable).parent / "ontoos"
TOKEN = "reload-" + secrets.token_hex(16)
VISIBLE_WITHIN_S = 2.0


def hosts_query(ident: str, status: str = "pending") -> dict:
    return {
        "id": ident, "title": "Hosts of a provider", "status": status, "read_sets": ["engineering"],
        "parameters": [{"name": "provider", "type": "enum", "values": ["aws", "gcp", "azure", "onprem"]}],
        "sql": 'SELECT "h"."hostname" AS "hostname" FROM "lake"."hosts" AS "h" WHERE "h"."provider" = $1 '
               'ORDER BY "h"."hostname" LIMIT 51',
        "bind": ["provider"], "columns": ["hostname"], "max_rows": 50,
    }


def write_registry(path: Path, *entries: dict) -> Path:
    path.write_text(yaml.safe_dump({"queries": list(entries)}, sort_keys=False), encoding="utf-8")
    return path


def cli(*argv: str, cwd: Path, pg_dsn: str) -> dict:
    """`ontoos ...` as its own process (as a reviewer would run it); its one envelope."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
    env.update({"ONTOOS_DSN": pg_dsn, "ONTOOS_AUDIT": "off"})
    r = subprocess.run([str(ONTOOS), *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout)


async def listed(client) -> list[str]:
    r = await client.call_tool("ontoos_queries", {})
    assert r.is_error is False, r.content[0].text
    return [q["id"] for q in r.structured_content["data"]["queries"]]


async def until_listed(client, ident: str, within: float = VISIBLE_WITHIN_S) -> list[str]:
    """Poll ontoos_queries until `ident` is listed; fail if it is not within `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        ids = await listed(client)
        if ident in ids:
            return ids
        if time.monotonic() > deadline:
            pytest.fail(f"{ident} was not served within {within} s of the change: {ids}")
        await anyio.sleep(0.1)


async def run_hosts(client, ident: str):
    return await client.call_tool("ontoos_run_query", {"id": ident, "params": {"provider": "gcp"}})


# ---------------------------------------------------------------- over HTTP


@pytest.fixture
def http_server(pg_dsn, tmp_path_factory):
    """A server of the test's own: each test changes its registry (one approving, one adding), and
    neither may see the other's change, in whatever order they run."""
    workdir = tmp_path_factory.mktemp("reload-http")
    config = workdir / "server.yaml"
    config.write_text(yaml.safe_dump({"principals": {"ana": {
        "role": "analyst", "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}}}), encoding="utf-8")
    write_registry(workdir / "queries.yaml", hosts_query("hosts_by_provider"), hosts_query("hosts_default_file"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
    env.update({"ONTOOS_DSN": pg_dsn, "ONTOOS_AUDIT": "off", "ONTOOS_DATA_DIR": str(workdir / "embedded-unused"),
                "PYTHONUNBUFFERED": "1"})
    port = serving.free_port()
    stderr_path = workdir / "stderr.log"
    with open(workdir / "stdout.log", "wb") as out, open(stderr_path, "wb") as err:
        # no --queries: the server's default registry, queries.yaml in its working directory
        proc = subprocess.Popen([serving.ontoos_executable(), "serve", "--http", f"127.0.0.1:{port}",
                                 "--config", str(config)], cwd=workdir, env=env, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL)
    try:
        serving.wait_healthy(proc, port, stderr=lambda: stderr_path.read_text(errors="replace"))
        yield workdir, port, stderr_path
    finally:
        assert serving.clean_exit(serving.stop(proc))
        assert "Traceback" not in stderr_path.read_text(errors="replace")


@contextlib.asynccontextmanager
async def http_client(port: int):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
    async with http, Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http),
                            mode="legacy") as client:
        yield client


async def test_a_query_approved_with_the_cli_is_served_over_http(http_server, pg_dsn):
    workdir, port, _ = http_server
    registry = workdir / "queries.yaml"
    async with http_client(port) as client:
        assert await listed(client) == []  # both pending
        refused = await run_hosts(client, "hosts_by_provider")
        assert refused.is_error is True and json.loads(refused.content[0].text)["error"]["code"] == "EX208"

        # the CLI, with --queries FILE, in another directory
        out = cli("queries", "approve", "hosts_by_provider", "--queries", str(registry), cwd=workdir.parent,
                  pg_dsn=pg_dsn)
        assert out == {"ok": True, "data": {"approved": "hosts_by_provider", "status": "approved"}}
        assert await until_listed(client, "hosts_by_provider") == ["hosts_by_provider"]
        ran = await run_hosts(client, "hosts_by_provider")
        assert ran.is_error is False, ran.content[0].text
        assert ran.structured_content["data"]["columns"] == ["hostname"]
        assert ran.structured_content["meta"]["rows"] == 33  # the demo lakehouse's gcp hosts

        # the CLI with no flag, from the server's directory: the same default file
        cli("queries", "approve", "hosts_default_file", cwd=workdir, pg_dsn=pg_dsn)
        assert sorted(await until_listed(client, "hosts_default_file")) == ["hosts_by_provider", "hosts_default_file"]


async def test_a_change_by_another_process_is_served_and_a_broken_file_keeps_the_last_good(http_server):
    workdir, port, stderr_path = http_server
    registry = workdir / "queries.yaml"
    async with http_client(port) as client:
        RegistryStore(registry).add(hosts_query("added_elsewhere", status="approved"))
        ids = await until_listed(client, "added_elsewhere")
        good = registry.read_text(encoding="utf-8")

        registry.write_text("queries: [unclosed\n", encoding="utf-8")
        deadline = time.monotonic() + VISIBLE_WITHIN_S
        while "cannot be read" not in stderr_path.read_text(errors="replace"):  # it has seen the broken file
            await listed(client)
            if time.monotonic() > deadline:
                pytest.fail("the server did not report the broken registry file")
            await anyio.sleep(0.1)
        assert await listed(client) == ids  # the last good registry is still served
        ran = await run_hosts(client, "added_elsewhere")
        assert ran.is_error is False, ran.content[0].text
        registry.write_text(good, encoding="utf-8")


# ---------------------------------------------------------------- over stdio


async def test_a_query_approved_with_the_cli_is_served_over_stdio(pg_dsn, tmp_path):
    registry = write_registry(tmp_path / "queries.yaml", hosts_query("stdio_hosts"))
    params = StdioServerParameters(command=str(ONTOOS), args=["serve", "--stdio", "--role", "analyst",
                                                              "--queries", str(registry)],
                                   env={"ONTOOS_DSN": pg_dsn, "ONTOOS_AUDIT": "off"})
    async with Client(params, mode="legacy") as client:
        assert await listed(client) == []
        cli("queries", "approve", "stdio_hosts", "--queries", str(registry), cwd=tmp_path, pg_dsn=pg_dsn)
        assert await until_listed(client, "stdio_hosts") == ["stdio_hosts"]
        ran = await run_hosts(client, "stdio_hosts")
        assert ran.is_error is False and ran.structured_content["meta"]["rows"] == 33
