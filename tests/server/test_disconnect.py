"""A client that goes away mid-query: the query is cancelled on PostgreSQL, the connection comes
back to the pool, and the audit records the abandoned call once (CANCELLED, EX602).

The slow query is an exploration of `sleepy` (tests/server/test_hostile_support.py: a view that
sleeps 0.2 s per row, 20 s for a LIMIT 100) by `pat`, whose role may run 30 s. Without the
cancellation the query would stay active for those 20 s; the tests give it 5.
"""

from __future__ import annotations

import json
import socket
import time

import anyio
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.server.test_hostile_support import SLOW_SCHEMA, request, start_hostile_server, token

SLOW = {"dataset": "sleepy", "fields": ["id", "label"], "limit": 100}
SLOW_GET = "/api/v1/explore?dataset=sleepy&fields=id,label&limit=100"
CANCELLED_WITHIN_S = 5.0


@pytest.fixture(scope="module")
def server(pg_dsn, tmp_path_factory):
    srv = start_hostile_server("disconnect", pg_dsn, tmp_path_factory.mktemp("disconnect-server"))
    yield srv
    srv.stop()


def slow_queries(pg_dsn: str) -> list[tuple[int, str]]:
    """(pid, state) of the server's backends running the slow exploration."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        return conn.execute(
            "SELECT pid, state FROM pg_stat_activity WHERE application_name = 'ontoos-explore' "
            "AND pid <> pg_backend_pid() AND state = 'active' AND query LIKE %s",
            (f'%"{SLOW_SCHEMA}"."sleepy"%',)).fetchall()


def wait_until(predicate, timeout: float, step: float = 0.05) -> float | None:
    """Seconds until `predicate()` held, or None after `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if predicate():
            return time.monotonic() - started
        time.sleep(step)
    return None


def last_event(pg_dsn: str, principal: str):
    """The time of the principal's latest audit event (after the writer has flushed what it had)."""
    time.sleep(0.5)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        return conn.execute("SELECT coalesce(max(at), timestamptz '2000-01-01') FROM ontoos_audit.events WHERE principal = %s",
                            (principal,)).fetchone()[0]


def events_of(pg_dsn: str, principal: str, since) -> list[tuple]:
    """The principal's audit events after `since` (a `last_event`)."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        return conn.execute(
            "SELECT surface, outcome, error_type, error_subtype, error_code, reason, dataset FROM ontoos_audit.events "
            "WHERE principal = %s AND at > %s ORDER BY at", (principal, since)).fetchall()


def send_raw(srv, method: str, path: str, body: bytes = b"") -> socket.socket:
    s = socket.create_connection((srv.host, srv.port), timeout=30)
    head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nAuthorization: Bearer {token('pat')}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    s.sendall(head + body)
    return s


@pytest.mark.parametrize("how", ["POST", "GET"])
def test_a_client_that_disconnects_cancels_its_query(server, pg_dsn, how):
    assert not slow_queries(pg_dsn)
    since = last_event(pg_dsn, "pat")
    sock = send_raw(server, how, "/api/v1/explore" if how == "POST" else SLOW_GET,
                    json.dumps(SLOW).encode() if how == "POST" else b"")
    try:
        assert wait_until(lambda: slow_queries(pg_dsn), 15) is not None, "the slow query never started"
        # the server keeps serving others meanwhile
        assert request(server, "GET", "/api/v1/catalog", who="alice", timeout=5).status == 200
    finally:
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
    took = wait_until(lambda: not slow_queries(pg_dsn), CANCELLED_WITHIN_S)
    assert took is not None, "the query kept running after its client left"
    # the audit has the abandoned call, once, and nothing else for it
    found = wait_until(lambda: events_of(pg_dsn, "pat", since), 10, step=0.2)
    assert found is not None, "the abandoned call was not recorded"
    time.sleep(0.5)  # a second event (there must be none) would have been written by now
    events = events_of(pg_dsn, "pat", since)
    assert events == [("rest", "failed", "network", "CANCELLED", "EX602", "CLIENT_DISCONNECTED", "sleepy")], events
    # the pool got its connection back: the next call by the same role works
    r = request(server, "POST", "/api/v1/explore", who="pat", body=json.dumps({**SLOW, "limit": 1}), timeout=30)
    assert r.status == 200 and r.json["meta"]["rows"] == 1, r.text[:300]


def test_a_client_that_stays_gets_its_answer(server, pg_dsn):
    """The watcher must not cancel a call whose client is still there (a short slow query: 3 rows)."""
    r = request(server, "POST", "/api/v1/explore", who="pat", body=json.dumps({**SLOW, "limit": 3}), timeout=30)
    assert r.status == 200 and r.json["meta"]["rows"] == 3, r.text[:300]
    assert r.json["meta"]["elapsed_ms"] >= 3 * 200 * 0.9


def test_a_client_that_leaves_half_way_through_its_body_is_not_waited_for(server, pg_dsn):
    since = last_event(pg_dsn, "pat")
    s = socket.create_connection((server.host, server.port), timeout=30)
    s.sendall((f"POST /api/v1/explore HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token('pat')}\r\n"
               "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"dataset\": ").encode())
    time.sleep(0.3)
    s.close()
    assert wait_until(lambda: events_of(pg_dsn, "pat", since), 10, step=0.2) is not None
    events = events_of(pg_dsn, "pat", since)
    assert [e[4] for e in events] == ["EX602"], events
    assert request(server, "GET", "/healthz", who=None).status == 200


@pytest.mark.anyio
async def test_an_mcp_call_cancelled_by_its_client_cancels_its_query(server, pg_dsn):
    """MCP has its own cancellation (notifications/cancelled): the SDK client sends it when the
    caller stops waiting, and the tool call's query must stop with it."""
    since = last_event(pg_dsn, "pat")
    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {token('pat')}"})
    with anyio.fail_after(60):
        async with http_client, Client(streamable_http_client(server.base + "/mcp", http_client=http_client),
                                       mode="legacy") as c:
            async with anyio.create_task_group() as tg:
                async def call():
                    await c.call_tool("ontoos_explore", SLOW)

                tg.start_soon(call)
                started = await anyio.to_thread.run_sync(lambda: wait_until(lambda: slow_queries(pg_dsn), 15))
                assert started is not None, "the slow query never started"
                tg.cancel_scope.cancel()
            took = await anyio.to_thread.run_sync(lambda: wait_until(lambda: not slow_queries(pg_dsn), CANCELLED_WITHIN_S))
    assert took is not None, "the query kept running after the MCP call was cancelled"
    await anyio.sleep(1)
    events = events_of(pg_dsn, "pat", since)
    assert [(e[0], e[4], e[5]) for e in events] == [("mcp", "EX602", "CALL_CANCELLED")], events
