"""A principal holds at most `mcp_sessions` MCP sessions at once (here 2): one more initialize is
refused 429 (EX412, reason MCP_SESSIONS) with a JSON-RPC error carrying the envelope, other
principals are unaffected, and a session the client deletes frees its place.

A session answers only the principal that opened it: another principal's token with a leaked
mcp-session-id (POST, the GET stream, DELETE) gets exactly the answer of an id that names no
session (404 UNKNOWN_SESSION), the session goes on for its owner, and the audit records each
attempt (reason FOREIGN_SESSION; UNKNOWN_SESSION for an id of no session). Raw JSON-RPC over
http.client, and the SDK client, against a real `ontoos serve --http`."""

from __future__ import annotations

import json
import re
import threading
import time

import anyio
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ontoos_explore.server.limits import SessionCaps
from tests.server.test_hostile_support import assert_envelope, request, start_hostile_server, token

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


# ================================================================ a session answers only its principal

PROTOCOL = "2025-06-18"
PING = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
CATALOG = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ontoos_catalog",
                                                                                    "arguments": {}}})
NO_SUCH_SESSION = "0123456789abcdef" * 2  # the SDK's ids are uuid4 hex: this one is never handed out


def _in(sid: str, **extra: str) -> dict[str, str]:
    return {**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": PROTOCOL, **extra}


def _session(srv, who: str) -> str:
    opened = _open(srv, who)
    assert opened.status == 200, (opened.status, opened.text[:300])
    sid = opened.headers["mcp-session-id"]
    note = request(srv, "POST", "/mcp", who=who, headers=_in(sid),
                   body='{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    assert note.status == 202, note.text[:300]
    return sid


def _answer(reply) -> tuple:
    """What a caller can tell an answer by: status, headers (but the date), body (but the id of its audit
    event, new for every request, of the same length)."""
    body = re.sub(rb'"exploration_id":"[0-9a-f]{16}"', b'"exploration_id":"?"', reply.raw)
    return reply.status, {k: v for k, v in reply.headers.items() if k != "date"}, body


def _events(srv, principal: str) -> list[tuple[str, str, str]]:
    with psycopg.connect(srv.audit_dsn, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('ontoos_audit.events') IS NULL").fetchone()[0]:
            return []
        return conn.execute("SELECT surface, error_code, reason FROM ontoos_audit.events WHERE principal = %s "
                            "AND reason IN ('FOREIGN_SESSION', 'UNKNOWN_SESSION') ORDER BY at",
                            (principal,)).fetchall()


def _wait_events(srv, principal: str, n: int, timeout: float = 30) -> list[tuple[str, str, str]]:
    deadline = time.monotonic() + timeout
    while len(got := _events(srv, principal)) < n and time.monotonic() < deadline:
        time.sleep(0.1)
    return got


def test_another_principal_with_a_leaked_session_id_gets_the_answer_of_no_session(server):
    sid = _session(server, "fuzz")
    unknown = request(server, "POST", "/mcp", who="pat", body=PING, headers=_in(NO_SUCH_SESSION))
    assert unknown.status == 404, (unknown.status, unknown.text[:300])
    body = unknown.json
    assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["code"] == -32600, body
    err = assert_envelope(body["error"]["data"], "EX102", "Session not found")
    assert "initialize" in err["hint"] and NO_SUCH_SESSION not in unknown.text
    # pat holds fuzz's id: a tool call, the GET stream and DELETE each answer exactly as no session does
    tried = {
        "POST tools/call": request(server, "POST", "/mcp", who="pat", body=CATALOG, headers=_in(sid)),
        "GET stream": request(server, "GET", "/mcp", who="pat", headers=_in(sid, Accept="text/event-stream")),
        "DELETE": request(server, "DELETE", "/mcp", who="pat", headers=_in(sid)),
    }
    for what, reply in tried.items():
        assert _answer(reply) == _answer(unknown), (what, reply.status, reply.text[:300])
    # ... and alike for an id of no session on the same methods
    for method, body_, extra in (("GET", None, {"Accept": "text/event-stream"}), ("DELETE", None, {})):
        other = request(server, method, "/mcp", who="pat", body=body_, headers=_in(NO_SUCH_SESSION, **extra))
        assert _answer(other) == _answer(unknown), (method, other.status, other.text[:300])
    # the session was neither used nor ended: its owner goes on
    call = request(server, "POST", "/mcp", who="fuzz", body=CATALOG, headers=_in(sid))
    assert call.status == 200 and '"isError":false' in call.text.replace(" ", ""), call.text[:300]
    gone = request(server, "DELETE", "/mcp", who="fuzz", headers=_in(sid))
    assert gone.status in (200, 204), (gone.status, gone.text[:200])
    # once ended, the id is no session, for its owner too
    after = request(server, "POST", "/mcp", who="fuzz", body=PING, headers=_in(sid))
    assert _answer(after) == _answer(unknown), (after.status, after.text[:300])
    # every attempt is in the audit, with its true reason (never shown to the caller)
    events = _wait_events(server, "pat", 6)
    assert sorted(events) == sorted([("mcp", "EX102", "UNKNOWN_SESSION")] * 3
                                    + [("mcp", "EX102", "FOREIGN_SESSION")] * 3), events
    assert _wait_events(server, "fuzz", 1) == [("mcp", "EX102", "UNKNOWN_SESSION")]


@pytest.mark.anyio
async def test_an_sdk_clients_session_cannot_be_used_or_ended_by_another_token(server):
    """The SDK client's session (its id read off the requests it sends): another token with that id
    can neither call a tool in it nor delete it; the client's next call is answered in its session."""
    seen: list[str] = []

    async def note(req) -> None:
        if sid := req.headers.get("mcp-session-id"):
            seen.append(sid)

    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {token('fuzz')}"})
    http_client.event_hooks = {"request": [note], "response": []}
    with anyio.fail_after(60):
        async with http_client, Client(streamable_http_client(server.base + "/mcp", http_client=http_client),
                                       mode="legacy") as client:
            first = await client.call_tool("ontoos_catalog", {})
            assert first.is_error is False and seen, seen
            sid = seen[-1]
            replies = {}

            def intrude() -> None:
                replies["call"] = request(server, "POST", "/mcp", who="rex", body=CATALOG, headers=_in(sid))
                replies["delete"] = request(server, "DELETE", "/mcp", who="rex", headers=_in(sid))

            thread = threading.Thread(target=intrude)
            thread.start()
            await anyio.to_thread.run_sync(thread.join)
            assert {k: r.status for k, r in replies.items()} == {"call": 404, "delete": 404}, \
                {k: r.text[:200] for k, r in replies.items()}
            again = await client.call_tool("ontoos_catalog", {})
            assert again.is_error is False and seen[-1] == sid  # the same session, still open
    assert _wait_events(server, "rex", 2) == [("mcp", "EX102", "FOREIGN_SESSION")] * 2


def test_session_caps_know_whose_each_live_session_is():
    live = {"a", "b"}
    caps = SessionCaps(5, lambda sid: sid in live)
    caps.opened("p", "a")
    caps.opened("q", "b")
    assert (caps.owner("a"), caps.owner("b"), caps.owner("c")) == ("p", "q", None)
    live.discard("a")
    assert caps.owner("a") is None and caps.full("p") == 0  # ended: forgotten
    live.add("a")  # the same id again (it is never handed out twice) would not be p's any more
    assert caps.owner("a") is None
