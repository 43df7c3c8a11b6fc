"""A client that goes away mid-query: the query is cancelled on PostgreSQL, the connection comes
back to the pool, and the audit records the abandoned call once (CANCELLED, EX602).

The slow query is an exploration of `sleepy` (tests/server/test_hostile_support.py: a view that
sleeps 0.2 s per row, 20 s for a LIMIT 100) by `pat`, whose role may run 30 s. That the query
was cancelled, rather than left to end, is read from PostgreSQL's log ("canceling statement due
to user request"), not from how soon it stopped. The events of a test are the ones between two
barriers: a refused request of its own whose event, once written, means every event recorded
before it is written too (the writer keeps their order), so nothing waits a fixed time.
"""

from __future__ import annotations

import json
import socket
import time
import uuid

import anyio
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.server.test_hostile_support import SLOW_SCHEMA, request, start_hostile_server, token

SLOW = {"dataset": "sleepy", "fields": ["id", "label"], "limit": 100}
SLOW_GET = "/api/v1/explore?dataset=sleepy&fields=id,label&limit=100"
CANCEL = "canceling statement due to user request"
WAIT_S = 60.0  # for what must happen; only a failure waits this long


@pytest.fixture(scope="module")
def server(pg_dsn, tmp_path_factory):
    srv = start_hostile_server("disconnect", pg_dsn, tmp_path_factory.mktemp("disconnect-server"))
    yield srv
    srv.stop_cleanly()


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


def barrier(srv, principal: str = "pat"):
    """A refused request of `principal` with a marker of its own; once its event is in the audit, so
    is every event recorded before it. Returns its time (the events of a test come after it)."""
    marker = f"barrier_{uuid.uuid4().hex[:10]}"
    r = request(srv, "POST", "/api/v1/explore", who=principal, body=json.dumps({"dataset": marker, "fields": ["x"]}))
    assert r.status == 400, r.text[:300]
    ident = r.json["meta"]["exploration_id"]
    with psycopg.connect(srv.audit_dsn, autocommit=True) as conn:
        deadline = time.monotonic() + WAIT_S
        while True:
            row = conn.execute("SELECT at FROM ontoos_audit.events WHERE id = %s", (ident,)).fetchone()
            if row is not None:
                return row[0]
            assert time.monotonic() < deadline, "the audit writer did not write the barrier's event"
            time.sleep(0.05)


def events_of(srv, principal: str, since, until=None) -> list[tuple]:
    """The principal's audit events after `since` (a barrier), and before `until` (another) if given."""
    with psycopg.connect(srv.audit_dsn, autocommit=True) as conn:
        return conn.execute(
            "SELECT surface, outcome, error_type, error_subtype, error_code, reason, dataset FROM ontoos_audit.events "
            "WHERE principal = %s AND at > %s AND at < coalesce(%s::timestamptz, 'infinity') AND coalesce(dataset, '') NOT LIKE 'barrier\\_%%' "
            "ORDER BY at", (principal, since, until)).fetchall()


def recorded_once(srv, principal: str, since) -> list[tuple]:
    """The principal's events since `since`, once there is one, up to a barrier sent after it: every
    event recorded until then (a second one for the same call, were there one) is in."""
    assert wait_until(lambda: events_of(srv, principal, since), WAIT_S, step=0.1) is not None, "nothing was recorded"
    return events_of(srv, principal, since, barrier(srv, principal))


def assert_cancelled_in_postgres(pg_log, mark) -> None:
    """PostgreSQL logged a cancel of the slow statement since `mark` (waited for: the log is written
    as the statement ends). Skipped on a server not ours (ONTOOS_TEST_DSN), whose log is not here."""
    if mark is None:
        return
    assert wait_until(lambda: CANCEL in pg_log(mark), WAIT_S) is not None, "PostgreSQL never cancelled the statement"
    logged = pg_log(mark)
    assert f'"{SLOW_SCHEMA}"."sleepy"' in logged.split(CANCEL, 1)[1][:2000], logged[-2000:]


def send_raw(srv, method: str, path: str, body: bytes = b"") -> socket.socket:
    s = socket.create_connection((srv.host, srv.port), timeout=30)
    head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nAuthorization: Bearer {token('pat')}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    s.sendall(head + body)
    return s


@pytest.mark.parametrize("how", ["POST", "GET"])
def test_a_client_that_disconnects_cancels_its_query(server, pg_dsn, pg_log, how):
    assert wait_until(lambda: not slow_queries(pg_dsn), WAIT_S) is not None
    since = barrier(server)
    mark = pg_log()
    sock = send_raw(server, how, "/api/v1/explore" if how == "POST" else SLOW_GET,
                    json.dumps(SLOW).encode() if how == "POST" else b"")
    try:
        assert wait_until(lambda: slow_queries(pg_dsn), WAIT_S) is not None, "the slow query never started"
        # the server keeps serving others meanwhile: answered while the slow query still runs
        assert request(server, "GET", "/api/v1/catalog", who="alice", timeout=WAIT_S).status == 200
        assert slow_queries(pg_dsn), "the slow query ended before the other call was answered"
    finally:
        sock.shutdown(socket.SHUT_RDWR)
        sock.close()
    assert_cancelled_in_postgres(pg_log, mark)  # the query did not run on after its client left
    assert wait_until(lambda: not slow_queries(pg_dsn), WAIT_S) is not None
    # the audit has the abandoned call, once, and nothing else for it
    events = recorded_once(server, "pat", since)
    assert events == [("rest", "failed", "network", "CANCELLED", "EX602", "CLIENT_DISCONNECTED", "sleepy")], events
    # the pool got its connection back: the next call by the same role works
    r = request(server, "POST", "/api/v1/explore", who="pat", body=json.dumps({**SLOW, "limit": 1}), timeout=30)
    assert r.status == 200 and r.json["meta"]["rows"] == 1, r.text[:300]


def test_a_client_that_stays_gets_its_answer(server, pg_dsn):
    """The watcher must not cancel a call whose client is still there (a short slow query: 3 rows)."""
    r = request(server, "POST", "/api/v1/explore", who="pat", body=json.dumps({**SLOW, "limit": 3}), timeout=30)
    assert r.status == 200 and r.json["meta"]["rows"] == 3, r.text[:300]


def test_a_client_that_leaves_half_way_through_its_body_is_not_waited_for(server):
    since = barrier(server)
    s = socket.create_connection((server.host, server.port), timeout=30)
    s.sendall((f"POST /api/v1/explore HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token('pat')}\r\n"
               "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"dataset\": ").encode())
    s.close()
    events = recorded_once(server, "pat", since)
    assert [e[4] for e in events] == ["EX602"], events
    assert request(server, "GET", "/healthz", who=None).status == 200


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_mcp_call_cancelled_by_its_client_cancels_its_query(server, pg_dsn, pg_log, mode):
    """A caller that stops waiting cancels the tool call's query. A handshake-era client says so
    (notifications/cancelled, legacy); a 2026-07-28 one (auto) closes the request's connection, and
    the server, answering that era in JSON mode without a watcher task, hears it from the protocol."""
    assert await anyio.to_thread.run_sync(lambda: wait_until(lambda: not slow_queries(pg_dsn), WAIT_S)) is not None
    since = await anyio.to_thread.run_sync(barrier, server)
    mark = pg_log()
    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {token('pat')}"})
    with anyio.fail_after(60):
        async with http_client, Client(streamable_http_client(server.base + "/mcp", http_client=http_client),
                                       mode=mode) as c:
            async with anyio.create_task_group() as tg:
                async def call():
                    await c.call_tool("ontoos_explore", SLOW)

                tg.start_soon(call)
                started = await anyio.to_thread.run_sync(lambda: wait_until(lambda: slow_queries(pg_dsn), WAIT_S))
                assert started is not None, "the slow query never started"
                tg.cancel_scope.cancel()
    await anyio.to_thread.run_sync(assert_cancelled_in_postgres, pg_log, mark)
    events = await anyio.to_thread.run_sync(recorded_once, server, "pat", since)
    assert [(e[0], e[4], e[5]) for e in events] == [("mcp", "EX602", "CALL_CANCELLED")], events
