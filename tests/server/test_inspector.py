"""Server, MCP: one scripted run of the official MCP Inspector CLI over stdio (a TypeScript client).

Pinned to @modelcontextprotocol/inspector@2.12.0: on Node 20 an unpinned npx resolves to 0.15.0.
The CLI JSON-parses each --tool-arg value and falls back to the raw string, so
`fields=["name"]` arrives as a list, `limit=2` as a number and `dataset=workloads` as a string.
With 2.12.0 a tool result with isError:true exits 5 and prints `tool_is_error` on stderr.
npm's cache and HOME point at temporary folders; the first run downloads the package.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ontoos_explore.engine.demo_data import SECRET_MARKER
from tests.named_queries import DEMO_QUERY_TOOLS

ONTOOS = Path(sys.executable).parent / "ontoos"
INSPECTOR = "@modelcontextprotocol/inspector@2.12.0"
TOOL_NAMES = ["ontoos_catalog", "ontoos_explore", "ontoos_queries", "ontoos_run_query", "ontoos_explain", "ontoos_request_query",
              "ontoos_stats"]


@pytest.fixture(scope="module")
def inspector(tmp_path_factory, pg_dsn):
    if not (shutil.which("node") and shutil.which("npx")):
        pytest.skip("node/npx are not installed: the MCP Inspector CLI cannot run")
    base = tmp_path_factory.mktemp("inspector")
    (base / "home").mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(base / "home"),
        "npm_config_cache": str(base / "npm-cache"),
        "npm_config_update_notifier": "false",
        "ONTOOS_DSN": pg_dsn,
    }

    def run(*method_args: str) -> subprocess.CompletedProcess:
        cmd = ["npx", "-y", INSPECTOR, "--cli", str(ONTOOS), "serve", "--stdio", "--role", "analyst", *method_args]
        return subprocess.run(cmd, capture_output=True, env=env, timeout=600, text=True)

    return run


def first_json(text: str):
    """The CLI prints one pretty-printed JSON document first (anything after it is diagnostics)."""
    return json.JSONDecoder().raw_decode(text.lstrip())[0]


def test_inspector_lists_and_calls_the_tools(inspector):
    listed = inspector("--method", "tools/list")
    assert listed.returncode == 0, listed.stderr[-3000:]
    tools = first_json(listed.stdout)["tools"]
    assert [t["name"] for t in tools] == TOOL_NAMES + DEMO_QUERY_TOOLS["analyst"]  # the demo registry's
    for t in tools:
        assert t["inputSchema"]["type"] == "object" and t["outputSchema"]["type"] == "object"
        assert t["annotations"]["readOnlyHint"] is (t["name"] != "ontoos_request_query")  # it files a request
        assert t["annotations"]["destructiveHint"] is False
    assert "Traceback" not in listed.stderr

    called = inspector("--method", "tools/call", "--tool-name", "ontoos_explore", "--tool-arg", "dataset=workloads",
                       "--tool-arg", 'fields=["name"]', "--tool-arg", "limit=2")
    assert called.returncode == 0, called.stdout[-2000:] + called.stderr[-3000:]
    result = first_json(called.stdout)
    assert result["isError"] is False
    env = result["structuredContent"]
    assert env["ok"] is True and env["data"]["columns"] == ["name"]
    assert len(env["data"]["rows"]) == 2 and env["meta"]["rows"] == 2 and env["meta"]["limit"] == 2
    assert json.loads(result["content"][0]["text"]) == env
    for bad in ("Traceback", "SELECT", SECRET_MARKER):
        assert bad not in called.stdout


def test_inspector_accepts_a_refusal_without_structured_content(inspector):
    """A refusal is isError with the envelope as text: the TypeScript client must not reject it
    (structuredContent on an error that does not match outputSchema would be -32602)."""
    refused = inspector("--method", "tools/call", "--tool-name", "ontoos_explore", "--tool-arg", "dataset=workloads",
                        "--tool-arg", 'fields=["name","namspace"]')
    assert refused.returncode == 5, refused.stdout[-2000:] + refused.stderr[-3000:]  # 2.12.0: isError exits 5
    assert "tool_is_error" in refused.stderr and "-32602" not in refused.stderr + refused.stdout
    result = first_json(refused.stdout)
    assert result["isError"] is True and "structuredContent" not in result
    err = json.loads(result["content"][0]["text"])["error"]
    assert err["code"] == "EX201" and "did you mean 'namespace'" in err["hint"]
    assert err["retry_with"] == {"dataset": "workloads", "fields": ["name", "namespace"]}
