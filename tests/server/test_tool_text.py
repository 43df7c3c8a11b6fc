"""The text of a tool result: the whole envelope while it fits, else its first rows, said as such.

Units on `tool_text.text_of`, then a real `ontoos serve --http` asked a 3,000-row question by the
official MCP client in both eras (the text is bounded, the structured content whole), and by a
2025-03-26 client over raw JSON-RPC (it knows no structured content: its text is whole).
"""

from __future__ import annotations

import json

import anyio
import httpx2
import pytest

from ontoos_explore.server.tool_text import TEXT_BYTES, knows_structured, text_of
from tests.server.test_http import MODES, REX, mcp_client, record_tool_result, server  # noqa: F401 (fixture)

BIG = {"dataset": "containers", "fields": ["container_id", "workload_id", "name", "image_id"], "limit": 3000}


def envelope(rows: int, width: int = 20) -> dict:
    return {"ok": True, "data": {"columns": ["a", "b"], "rows": [[i, "x" * (width + i % 7)] for i in range(rows)]},
            "meta": {"rows": rows, "truncated": False}, "_notice": {"schema_drift": False}}


def test_an_answer_that_fits_is_its_whole_envelope():
    env = envelope(50)
    assert json.loads(text_of(env)) == env and len(text_of(env)) < TEXT_BYTES


@pytest.mark.parametrize("rows", [2, 10, 64, 65, 300])
def test_a_whole_that_fits_to_the_character_is_sent_whole_whatever_the_rows(rows):
    env = envelope(rows, width=2)
    whole = json.dumps(env, separators=(",", ":"), ensure_ascii=False)
    assert text_of(env, len(whole)) == whole
    cut = json.loads(text_of(env, len(whole) - 1))  # one character short: the first rows, said so
    assert cut["text"]["rows"] == rows and cut["text"]["rows_shown"] == len(cut["data"]["rows"]) < rows


@pytest.mark.parametrize("rows", [400, 2000, 20_000])
def test_a_larger_answer_shows_the_longest_prefix_that_fits_and_says_so(rows):
    env = envelope(rows)
    text = text_of(env, 6_000)
    shown = json.loads(text)
    k = shown["text"]["rows_shown"]
    assert len(text) <= 6_000 and 0 < k < rows
    assert shown["data"]["rows"] == env["data"]["rows"][:k] and shown["text"]["rows"] == rows
    assert shown["meta"] == env["meta"] and shown["_notice"] == env["_notice"]  # all but the rows, whole
    assert f"first {k} of the answer's {rows} rows" in shown["text"]["note"]
    # the longest: one row more would not have fitted (the estimate was not merely safe)
    more = dict(shown, data={**shown["data"], "rows": env["data"]["rows"][:k + 1]},
                text={**shown["text"], "rows_shown": k + 1,
                      "note": shown["text"]["note"].replace(f"first {k} ", f"first {k + 1} ")})
    assert len(json.dumps(more, ensure_ascii=False, separators=(",", ":"))) > 6_000 or k + 1 == rows
    assert env["data"]["rows"][k:]  # the envelope given is left whole


def test_rows_that_grow_further_on_still_fit():
    env = envelope(3000)
    env["data"]["rows"][100:] = [[i, "y" * 400] for i in range(100, 3000)]  # the sample's rows are the short ones
    text = text_of(env, 8_000)
    shown = json.loads(text)
    k = shown["text"]["rows_shown"]
    assert len(text) <= 8_000 and 100 <= k < 3000  # past the sample's short rows, backed off to fit
    assert shown["data"]["rows"] == env["data"]["rows"][:k]


def test_no_bound_or_no_rows_is_the_whole_envelope():
    env = envelope(5000)
    assert json.loads(text_of(env, None)) == env
    refusal = {"ok": False, "error": {"message": "m" * 20_000}}
    assert json.loads(text_of(refusal)) == refusal


def test_only_clients_before_structured_content_get_whole_texts():
    assert [knows_structured(v) for v in ("2024-11-05", "2025-03-26", "2025-06-18", "2026-07-28", None)] == \
        [False, False, True, True, True]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_a_large_mcp_answer_has_a_bounded_text_and_every_row_structured(server, mode):  # noqa: F811
    with anyio.fail_after(60):
        async with mcp_client(server, mode, token=REX) as c:
            result = await c.call_tool("ontoos_explore", BIG)
    record_tool_result(server, result, f"mcp {mode} large")
    env = result.structured_content
    rows = len(env["data"]["rows"])
    assert result.is_error is False and env["meta"]["rows"] == rows > 1000  # the test lake's containers
    text = result.content[0].text
    shown = json.loads(text)
    k = shown["text"]["rows_shown"]
    assert len(text) <= TEXT_BYTES and 0 < k < rows and shown["text"]["rows"] == rows
    assert shown["data"]["rows"] == env["data"]["rows"][:k] and shown["meta"] == env["meta"]


def _rpc(base: str, body: dict, headers: dict) -> httpx2.Response:
    r = httpx2.post(base + "/mcp", json=body, headers=headers, timeout=60)
    assert r.status_code in (200, 202), r.text[:300]
    return r


def test_a_client_before_structured_content_gets_the_whole_text(server):  # noqa: F811
    headers = {"Authorization": f"Bearer {REX}", "Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}}
    r = _rpc(server.base, init, headers)
    headers |= {"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-03-26"}
    _rpc(server.base, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
    r = _rpc(server.base, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                           "params": {"name": "ontoos_explore", "arguments": BIG}}, headers)
    body = r.text
    if r.headers["content-type"].startswith("text/event-stream"):
        body = next(line[len("data:"):] for line in body.splitlines() if line.startswith("data:"))
    result = json.loads(body)["result"]
    env = json.loads(result["content"][0]["text"])
    assert "text" not in env and env["meta"]["rows"] == len(env["data"]["rows"]) > 1000
    assert len(result["content"][0]["text"]) > TEXT_BYTES
    httpx2.delete(server.base + "/mcp", headers=headers, timeout=10)
