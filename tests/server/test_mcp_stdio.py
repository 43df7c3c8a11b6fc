"""Server, MCP over stdio: `ontoos serve --stdio` as a real subprocess, driven by the SDK client.

Both client modes ("auto": server/discover at 2026-07-28, "legacy": the initialize handshake),
a --principal from a --config file, and stdout carrying nothing but JSON-RPC.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from ontoos_explore.engine.demo_data import SECRET_MARKER
from tests.named_queries import DEMO_QUERY_TOOLS

pytestmark = pytest.mark.anyio

ONTOOS = Path(sys.executable).parent / "ontoos"
TOOL_NAMES = ["ontoos_catalog", "ontoos_explore", "ontoos_queries", "ontoos_run_query", "ontoos_explain", "ontoos_request_query",
              "ontoos_stats"]
FORBIDDEN = ("Traceback", "SELECT", SECRET_MARKER)
TOKEN = "stdio-test-token-0123456789"


@pytest.fixture(params=["auto", "legacy"])
def mode(request) -> str:
    return request.param


def params(pg_dsn: str, *args: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(command=str(ONTOOS), args=["serve", "--stdio", *args],
                                 env={"ONTOOS_DSN": pg_dsn, **env})


def texts(result) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text") + json.dumps(result.structured_content)


def clean(result) -> None:
    blob = texts(result)
    for bad in FORBIDDEN:
        assert bad not in blob, blob[:2000]


@pytest.fixture
def config_file(tmp_path) -> Path:
    path = tmp_path / "server.yaml"
    path.write_text(yaml.safe_dump({"principals": {
        "bob": {"role": "reader", "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest()},
        "carol": {"role": "analyst", "token_sha256": hashlib.sha256(b"another-token").hexdigest()},
    }}), encoding="utf-8")
    return path


def no_parse_failures(caplog) -> None:
    """The SDK's stdio client logs every stdout line that is not JSON-RPC."""
    bad = [r.getMessage() for r in caplog.records if r.name.startswith("mcp.client") and r.levelno >= logging.WARNING]
    assert not bad, bad


async def test_stdio_session_as_analyst(pg_dsn, mode, capfd, caplog):
    caplog.set_level(logging.WARNING, logger="mcp")
    async with Client(params(pg_dsn, "--role", "analyst"), mode=mode) as client:
        if mode == "legacy":
            assert client.protocol_version == "2025-11-25"
        assert client.server_info.name == "ontoos-explore"
        assert "ontoos_catalog" in (client.instructions or "")

        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == TOOL_NAMES + DEMO_QUERY_TOOLS["analyst"]  # the demo registry's
        assert all(t.annotations.read_only_hint is (t.name != "ontoos_request_query")  # it files a request
                   and t.annotations.open_world_hint is False for t in listed.tools)

        catalog = await client.call_tool("ontoos_catalog", {})
        clean(catalog)
        assert catalog.is_error is False
        assert catalog.structured_content["data"]["role"] == "analyst"
        assert "hosts" in [d["name"] for d in catalog.structured_content["data"]["datasets"]]

        rows = await client.call_tool("ontoos_explore", {"dataset": "workloads", "fields": ["name", "namespace"],
                                                         "filter": "namespace = 'prod'", "limit": 3})
        clean(rows)
        assert rows.is_error is False
        env = rows.structured_content
        assert env["ok"] is True and json.loads(rows.content[0].text) == env
        assert env["data"]["columns"] == ["name", "namespace"]
        assert len(env["data"]["rows"]) == 3 and all(ns == "prod" for _, ns in env["data"]["rows"])
        assert (env["meta"]["rows"], env["meta"]["truncated"], env["meta"]["limit"]) == (3, True, 3)

        refused = await client.call_tool("ontoos_explore", {"dataset": "workloads", "fields": ["name", "namspace"]})
        clean(refused)
        assert refused.is_error is True and refused.structured_content is None
        err = json.loads(refused.content[0].text)["error"]
        assert (err["code"], err["subtype"]) == ("EX201", "UNKNOWN_FIELD")
        assert "did you mean 'namespace'" in err["hint"]
        retried = await client.call_tool("ontoos_explore", {**err["retry_with"], "limit": 2})
        assert retried.is_error is False and retried.structured_content["meta"]["rows"] == 2

        secret = await client.call_tool("ontoos_explore", {"dataset": "workloads", "fields": ["env_dump"]})
        clean(secret)
        assert secret.is_error is True

    no_parse_failures(caplog)
    err_text = capfd.readouterr().err
    assert "Traceback" not in err_text and SECRET_MARKER not in err_text


async def test_stdio_principal_from_config_gets_its_role(pg_dsn, mode, config_file, capfd, caplog):
    caplog.set_level(logging.WARNING, logger="mcp")
    async with Client(params(pg_dsn, "--config", str(config_file), "--principal", "bob"), mode=mode) as client:
        catalog = await client.call_tool("ontoos_catalog", {})
        clean(catalog)
        data = catalog.structured_content["data"]
        assert data["role"] == "reader"
        names = [d["name"] for d in data["datasets"]]
        assert "hosts" not in names and "workloads" in names

        hosts = await client.call_tool("ontoos_explore", {"dataset": "hosts", "fields": ["hostname"]})
        clean(hosts)
        assert hosts.is_error is True
        err = json.loads(hosts.content[0].text)["error"]
        assert err["code"] == "EX202" and "hosts" not in err["hint"]

        described = await client.call_tool("ontoos_catalog", {"dataset": "hosts"})
        assert described.is_error is True

        ok = await client.call_tool("ontoos_explore", {"dataset": "projects", "fields": ["name"], "limit": 2})
        assert ok.is_error is False and ok.structured_content["meta"]["rows"] == 2
    no_parse_failures(caplog)
    assert "Traceback" not in capfd.readouterr().err


async def test_stdio_principal_name_is_case_insensitive_and_role_follows_it(pg_dsn, config_file):
    async with Client(params(pg_dsn, "--config", str(config_file), "--principal", "CAROL"), mode="legacy") as client:
        catalog = await client.call_tool("ontoos_catalog", {})
        assert catalog.structured_content["data"]["role"] == "analyst"


def raw_session(pg_dsn: str, *args: str, requests: list[dict], timeout: float = 60) -> tuple[int, str, str]:
    """Drive the server with hand-written JSON-RPC lines; close stdin once every request with an id
    is answered (or at once if there are none), then the server must exit. -> (returncode, stdout, stderr)"""
    env = {"PATH": "/usr/bin:/bin", "ONTOOS_DSN": pg_dsn}  # nothing else from the test's environment
    proc = subprocess.Popen([str(ONTOOS), "serve", "--stdio", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    try:
        pending = {r["id"] for r in requests if "id" in r}
        out_lines: list[str] = []
        if requests:
            proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
            proc.stdin.flush()
        while pending:
            line = proc.stdout.readline()
            if not line:
                break
            out_lines.append(line.decode("utf-8"))
            with contextlib.suppress(ValueError):
                pending.discard(json.loads(line).get("id"))
        rest, err = proc.communicate(timeout=timeout)  # closes stdin: the server must then exit
        out_lines.extend(rest.decode("utf-8").splitlines(keepends=True))
        return proc.returncode, "".join(out_lines), err.decode("utf-8", "replace")
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_stdout_carries_only_json_rpc(pg_dsn, tmp_path):
    """Everything on stdout is a JSON-RPC message, even with warnings to report (a broken named
    query) and refusals; diagnostics go to stderr."""
    registry = tmp_path / "queries.yaml"
    registry.write_text(yaml.safe_dump({"queries": [{
        "id": "leaky", "title": "Reads a secret", "status": "approved", "read_sets": ["published"],
        "sql": 'SELECT "w"."env_dump" AS "env_dump" FROM "lake"."k8s_workloads" AS "w" LIMIT 11',
        "columns": ["env_dump"], "max_rows": 10}]}), encoding="utf-8")
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "ontoos_explore", "arguments": {"dataset": "workloads", "fields": ["name"], "limit": 2}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "ontoos_explore", "arguments": {"dataset": "workloads", "fields": ["env_dump"]}}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "ontoos_queries", "arguments": {}}},
    ]
    returncode, out, err = raw_session(pg_dsn, "--role", "analyst", "--queries", str(registry), requests=requests)
    assert returncode == 0, err
    messages = []
    for line in out.splitlines():
        msg = json.loads(line)  # every line parses
        assert msg.get("jsonrpc") == "2.0", line
        messages.append(msg)
    by_id = {m["id"]: m for m in messages if "id" in m}
    assert set(by_id) == {1, 2, 3, 4, 5, 6}
    assert by_id[1]["result"]["serverInfo"]["name"] == "ontoos-explore"
    assert [t["name"] for t in by_id[2]["result"]["tools"]] == TOOL_NAMES
    assert by_id[3]["result"]["isError"] is False and by_id[3]["result"]["structuredContent"]["meta"]["rows"] == 2
    assert by_id[4]["result"]["isError"] is True and "structuredContent" not in by_id[4]["result"]
    assert by_id[5]["error"]["code"] == -32602  # unknown tool: a protocol error
    assert by_id[6]["result"]["structuredContent"]["data"]["queries"] == []
    assert "leaky skipped" in err  # the warning went to stderr
    for bad in FORBIDDEN:
        assert bad not in out
    assert "Traceback" not in err


def test_unknown_principal_fails_without_writing_to_stdout(pg_dsn, config_file):
    """A start-up failure of `serve --stdio` must not put a non-protocol line on stdout."""
    returncode, out, err = raw_session(pg_dsn, "--config", str(config_file), "--principal", "mallory", requests=[])
    assert returncode == 2
    assert "Traceback" not in err
    for line in out.splitlines():
        assert json.loads(line).get("jsonrpc") == "2.0", f"non-protocol line on stdout: {line}"
    assert "mallory" in err, err
