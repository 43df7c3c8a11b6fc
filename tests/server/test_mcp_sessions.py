"""A principal holds at most `mcp_sessions` MCP sessions at once (here 2): one more initialize is
refused 429 (EX412, reason MCP_SESSIONS) with a JSON-RPC error carrying the envelope, other
principals are unaffected, and a session the client deletes frees its place. Raw JSON-RPC over
http.client, against a real `ontoos serve --http`."""

from __future__ import annotations

import json

import pytest

from ontoos_explore.server.limits import SessionCaps
from tests.server.test_hostile_support import assert_envelope, request, start_hostile_server

INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "session-test", "version": "1"}}})
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def server(pg_dsn, tmp_path_factory):
    srv = start_hostile_server("mcp-sessions", pg_dsn, tmp_path_factory.mktemp("mcp-sessions"),
                               config_extra={"mcp_sessions": 2})
    yield srv
    srv.stop_cleanly()


def _open(srv, who: str):
    return request(srv, "POST", "/mcp", body=INITIALIZE, who=who, headers=ACCEPT)


def test_a_principal_past_its_sessions_is_refused_until_one_ends(server):
    first, second = _open(server, "vera"), _open(server, "vera")
    ids = [r.headers.get("mcp-session-id") for r in (first, second)]
    assert [r.status for r in (first, second)] == [200, 200] and all(ids) and ids[0] != ids[1]
    third = _open(server, "vera")
    assert third.status == 429, (third.status, third.text[:300])
    body = third.json
    assert body["jsonrpc"] == "2.0" and body["error"]["code"] == -32000
    err = assert_envelope(body["error"]["data"], "EX412", "vera has 2 MCP sessions open")
    assert "DELETE /mcp" in err["hint"]
    assert _open(server, "rex").status == 200  # another principal: its own count
    gone = request(server, "DELETE", "/mcp", who="vera",
                   headers={**ACCEPT, "mcp-session-id": ids[0], "mcp-protocol-version": "2025-06-18"})
    assert gone.status in (200, 204), (gone.status, gone.text[:200])
    again = _open(server, "vera")
    assert again.status == 200 and again.headers.get("mcp-session-id") not in ids


def test_an_open_session_is_still_served_at_the_cap(server):
    """The cap refuses new sessions only: requests inside an open one go on."""
    opened = _open(server, "alice")
    sid = opened.headers["mcp-session-id"]
    _open(server, "alice")
    assert _open(server, "alice").status == 429
    ping = request(server, "POST", "/mcp", who="alice", body=json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
                   headers={**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"})
    assert ping.status == 200, (ping.status, ping.text[:200])


def test_session_caps_count_only_live_sessions():
    live = {"a", "b"}
    caps = SessionCaps(2, lambda sid: sid in live)
    caps.opened("p", "a")
    assert caps.full("p") == 0
    caps.opened("p", "b")
    assert caps.full("p") == 2 and caps.full("q") == 0
    live.discard("a")  # ended in the SDK (deleted, idle, or gone)
    assert caps.full("p") == 0
