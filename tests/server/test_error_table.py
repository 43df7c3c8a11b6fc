"""The error table on every surface: each row of `errors.all_rows()` driven by a real request.

For every row, `TABLE` gives per surface the request that produces it, or the reason no request
can (`Unreachable`); a row added to errors.py fails the test until it is given one or the other.
What each surface must answer is read off the row, never written twice:

- REST (a real `ontoos serve --http`): the envelope's (type, subtype, code), and `row.status`;
- MCP over streamable HTTP (raw JSON-RPC to the same server): a tool error (`isError`, the
  envelope as its text) for a tool's refusal; for the transport's own refusal a JSON-RPC error
  whose code is `row.rpc`, with the envelope in `error.data` and the row's status (the SDK's own
  status for TRANSPORT_REFUSED); the HTTP layer's answers in front of /mcp (no token, a flood,
  a method /mcp does not take) are the envelope with the row's status;
- MCP over stdio (`ontoos serve --stdio`): a tool error, or a JSON-RPC error with `row.rpc`;
- the CLI (`ontoos.cli.main`, in-process): the envelope on stdout and `row.exit`.

CANCELLED is never received (the caller is gone): there the audit's event is what is pinned.

The server runs the demo contract plus what the table needs (tests/server/test_hostile_support.py
makes the base): `sleepy` (0.2 s a row) readable by the analyst, whose time budget here is 1.5 s;
`broken`, a view PostgreSQL fails to read (a scalar subquery of many rows: SQLSTATE 21000);
`gone`, a dataset whose table the database does not have (drift: DEGRADED); /metrics for a
principal marked `metrics` only (loopback not trusted: METRICS_DENIED);
workloads.env_dump readable in the contract but not granted to the database roles (the third wall:
DATABASE_DENIED); the analyst's limits refused rather than clamped and with no cost ceiling of its
own, so the contract's heavy_max_cost of 1 refuses any heavy read on cost; one connection in the
pool (a slow query holds it: UPSTREAM_UNAVAILABLE for the next); one MCP session per principal;
3 requests without a valid token per address before the flood limit; a header timeout of 2 s; and
8 connections per client address (filled from addresses of their own, 127.0.0.3 and 127.0.0.4).
"""

from __future__ import annotations

import copy
import json
import queue
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
import yaml

import ontoos_explore
from ontoos_explore import errors
from ontoos_explore.cli import main as cli_main
from ontoos_explore.contract import load_contract
from ontoos_explore.engine import grants
from ontoos_explore.errors import Codes, ErrorCode
from tests import serving
from tests.databases import new_database
from tests.server.test_hostile_support import (
    SLOW_SCHEMA,
    hostile_contract,
    prepare_database,
    raw_exchange,
    request,
    start_hostile_server,
    token,
    write_config,
)

PREFIX = "ontoos_et_"  # the database roles of this module's contract
SCHEMA = "error_table"
ACCEPT = "application/json, text/event-stream"
PROTOCOL = "2025-11-25"
SLOW = {"dataset": "sleepy", "fields": ["id", "label"], "limit": 20}  # 4.2 s: past the analyst's 1.5 s
QUESTION = {"dataset": "workloads", "fields": ["name"], "limit": 1}
SURFACES = ("rest", "mcp", "stdio", "cli")
HEADER_TIMEOUT_S = 2  # ONTOOS_HEADER_TIMEOUT of the table's server
CONNECTIONS_PER_CLIENT = 8  # ONTOOS_CONNECTIONS_PER_CLIENT of the table's server


# ================================================================ the requests


@dataclass(frozen=True)
class Explore:
    """ontoos_explore's arguments: the REST body, the MCP and stdio tools/call, `ontoos explore --json`."""

    args: dict[str, Any]


@dataclass(frozen=True)
class Tool:
    """Another tool's call (MCP and stdio)."""

    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Http:
    """One HTTP request to the server; `who`: whose token (None: none)."""

    method: str
    path: str
    body: str | bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    who: str | None = "alice"


@dataclass(frozen=True)
class Line:
    """One line to `ontoos serve --stdio`, which the SDK cannot read."""

    text: str


@dataclass(frozen=True)
class Cli:
    """`ontoos ARGV` in-process; `env`: variables set (None: removed) for the run."""

    argv: tuple[str, ...]
    env: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Flow:
    """A request that needs more than one exchange (a flood, a slow body, a cancellation):
    `run(world)` -> what the surface answered (`Seen`)."""

    run: Callable[[World], Seen]
    what: str


@dataclass(frozen=True)
class Unreachable:
    reason: str


@dataclass
class Seen:
    """What a surface answered: the envelope, and how it came (`kind`: http, tool, rpc, cli, audit)."""

    kind: str
    envelope: dict[str, Any]
    status: int | None = None  # HTTP
    rpc: int | None = None  # a JSON-RPC error's code
    exit: int | None = None  # the CLI


def many(n: int, item: str, sep: str = ", ") -> str:
    return sep.join([item] * n)


def explore_all(args: dict[str, Any]) -> dict[str, Any]:
    return {s: Explore(args) for s in SURFACES}


def tool_only(name: str, args: dict[str, Any], rest: str, cli: Any) -> dict[str, Any]:
    return {"rest": Unreachable(rest), "mcp": Tool(name, args), "stdio": Tool(name, args), "cli": cli}


NO_HTTP_ON_STDIO = Unreachable("stdio has no HTTP: no bodies, routes, tokens or sessions")
NO_HTTP_ON_CLI = Unreachable("the CLI has no HTTP: no bodies, routes, tokens or sessions")
START_UP = "refused when the server starts (it does not start), before any request"


def http_only(rest: Any, mcp: Any) -> dict[str, Any]:
    return {"rest": rest, "mcp": mcp, "stdio": NO_HTTP_ON_STDIO, "cli": NO_HTTP_ON_CLI}


def cli_only(cli: Cli, why: str) -> dict[str, Any]:
    return {"rest": Unreachable(why), "mcp": Unreachable(why), "stdio": Unreachable(why), "cli": cli}


# ================================================================ the flows


def flood(world: World, path: str) -> Seen:
    """Requests without a token from this address past `auth_failures` (burst 3, spent by the
    NO_TOKEN and BAD_COOKIE rows before; it refills once in 100 minutes): 429."""
    for _ in range(4):
        r = request(world.server, "POST", path, body=json.dumps(QUESTION), who=None, headers={"Accept": ACCEPT})
        if r.status == 429:
            assert int(r.headers["retry-after"]) >= 1 and r.json["meta"]["retry_after_s"] >= 1
            return Seen("http", r.json, status=r.status)
    pytest.fail(f"no 429 after 4 requests without a token: {r.status} {r.text[:300]}")


def slow_body(world: World, path: str) -> Seen:
    """Content-Length 100, 2 bytes sent, the connection left open: refused after the body timeout (2 s)."""
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{world.server.port}\r\nAuthorization: Bearer {token('alice')}\r\n"
            f"Content-Type: application/json\r\nAccept: {ACCEPT}\r\nContent-Length: 100\r\n\r\n{{}}").encode()
    reply = raw_exchange(world.server, head, timeout=15)
    status_line, _, rest = reply.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert b"connection: close" in headers.lower(), headers
    status = int(status_line.split()[1])
    message = json.loads(body)
    if path == "/mcp":
        return Seen("rpc", message["error"]["data"], status=status, rpc=message["error"]["code"])
    return Seen("http", message, status=status)


def raw_answer(reply: bytes) -> tuple[int, bytes, dict[str, Any]]:
    """(status, headers, the JSON body) of an answer read off a socket."""
    status_line, _, rest = reply.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), headers.lower(), json.loads(body)


def slow_headers(world: World, path: str) -> Seen:
    """A request line and one header, then nothing: 408 once the header timeout (2 s) has passed."""
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{world.server.port}\r\nAuthorization: Bearer {token('alice')}\r\n"
    status, headers, message = raw_answer(raw_exchange(world.server, head.encode(), timeout=15))
    assert b"connection: close" in headers, headers
    return Seen("http", message, status=status)


def big_head(world: World, path: str) -> Seen:
    """A request whose headers pass 64 KB: 431 before any of it reaches the app, the connection closed."""
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{world.server.port}\r\nAuthorization: Bearer {token('alice')}\r\n"
            f"X-Padding: {'p' * 70_000}\r\n\r\n")
    status, headers, message = raw_answer(raw_exchange(world.server, head.encode(), timeout=15))
    assert b"connection: close" in headers, headers
    return Seen("http", message, status=status)


def crowded(world: World, source: str, path: str) -> Seen:
    """From `source`, the connections one address may hold (8), each answered once and kept open
    (keep-alive); one more is answered 429 as it opens, before its request is read."""
    def connect() -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(10)
        s.bind((source, 0))
        s.connect((world.server.host, world.server.port))
        return s

    held = []
    try:
        for _ in range(CONNECTIONS_PER_CLIENT):
            held.append(s := connect())
            s.sendall(f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{world.server.port}\r\n\r\n".encode())
            assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
        with connect() as s:
            s.sendall((f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{world.server.port}\r\nAuthorization: Bearer "
                       f"{token('alice')}\r\nContent-Type: application/json\r\nAccept: {ACCEPT}\r\n"
                       f"Content-Length: {len(TOOLS_LIST)}\r\n\r\n{TOOLS_LIST}").encode())
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
    finally:
        for s in held:
            s.close()
    status, headers, message = raw_answer(reply)
    assert b"retry-after: 1" in headers and b"connection: close" in headers, headers
    return Seen("http", message, status=status)


def dashboard_session(world: World, who: str = "rex") -> tuple[dict[str, str], str]:
    """`who` signs in at /governance/login as a browser does: (the session's Cookie header, its CSRF token)."""
    r = request(world.server, "POST", "/governance/login", who=None, body=f"token={token(who)}", headers=FORM)
    assert r.status == 303, r.text[:300]
    cookie = {"Cookie": r.headers["set-cookie"].split(";")[0]}
    page = request(world.server, "GET", "/governance", who=None, headers=cookie)
    assert page.status == 200, page.text[:300]
    return cookie, re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)


def self_approval(world: World) -> Seen:
    """rex approves, from the dashboard's own form, a query the registry says rex promoted."""
    registry = world.server.workdir / "queries.yaml"  # the server's registry (queries.yaml in its directory)
    data = yaml.safe_load(registry.read_text(encoding="utf-8")) if registry.exists() else None
    queries = [q for q in ((data or {}).get("queries") or []) if q.get("id") != "promoted_by_rex"]
    queries.append({"id": "promoted_by_rex", "title": "t", "status": "pending", "read_sets": ["published"],
                    "sql": "SELECT 1", "columns": ["x"], "promoted_by": "rex"})
    registry.write_text(yaml.safe_dump({"queries": queries}, sort_keys=False), encoding="utf-8")
    cookie, csrf = dashboard_session(world)
    r = request(world.server, "POST", "/governance/approve", who=None, body=f"id=promoted_by_rex&csrf={csrf}",
                headers={**FORM, **cookie, "Accept": "application/json"})
    return Seen("http", r.json, status=r.status)


def foreign_session(world: World) -> Seen:
    """vera sends alice's mcp-session-id: answered as an id of no session."""
    r = request(world.server, "POST", "/mcp", body=TOOLS_LIST, who="vera", headers=world.mcp_session("alice"))
    return Seen("rpc", r.json["error"]["data"], status=r.status, rpc=r.json["error"]["code"])


def rate_limited_rest(world: World) -> Seen:
    """tina: 3 calls a minute. The fourth within the minute is refused."""
    for _ in range(4):
        r = request(world.server, "POST", "/api/v1/explore", body=json.dumps(QUESTION), who="tina")
        if r.status == 429:
            assert int(r.headers["retry-after"]) == r.json["meta"]["retry_after_s"] >= 1
            return Seen("http", r.json, status=r.status)
    pytest.fail("tina was never rate limited")


def rate_limited_mcp(world: World) -> Seen:
    """mia: 2 calls a minute, over an MCP session of her own."""
    for _ in range(3):
        seen = world.mcp_call("ontoos_catalog", {}, who="mia")
        if seen.kind == "tool" and not seen.envelope["ok"]:
            assert seen.envelope["meta"]["retry_after_s"] >= 1
            return seen
    pytest.fail("mia was never rate limited over MCP")


def rate_limited_stdio(world: World) -> Seen:
    """`ontoos serve --stdio --principal mia` (2 calls a minute): the third is refused."""
    stdio = world.stdio_as_mia()
    for _ in range(3):
        seen = stdio.call("ontoos_catalog", {})
        if not seen.envelope["ok"]:
            assert seen.envelope["meta"]["retry_after_s"] >= 1
            return seen
    pytest.fail("mia was never rate limited over stdio")


def too_many_sessions(world: World) -> Seen:
    """alice holds one session (the cap here): one more initialize is refused."""
    world.mcp_session("alice")
    r = request(world.server, "POST", "/mcp", body=json.dumps(INITIALIZE), headers={"Accept": ACCEPT})
    return Seen("rpc", r.json["error"]["data"], status=r.status, rpc=r.json["error"]["code"])


def slow_query_active(pg_dsn: str) -> bool:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        return bool(conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE application_name = 'ontoos-explore' AND pid <> pg_backend_pid() "
            "AND state = 'active' AND query LIKE %s", (f'%"{SLOW_SCHEMA}"."sleepy"%',)).fetchone())


def wait_for(predicate: Callable[[], Any], timeout: float = 20, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return found


def pool_held(world: World, ask: Callable[[], Seen]) -> Seen:
    """pat's slow exploration holds the server's one connection; `ask` waits its pool timeout (1 s)."""
    done: list[Any] = []
    slow = threading.Thread(target=lambda: done.append(request(
        world.server, "POST", "/api/v1/explore", who="pat", body=json.dumps({**SLOW, "limit": 15}))))
    slow.start()
    try:
        wait_for(lambda: slow_query_active(world.pg_dsn), what="pat's slow query")
        start = time.monotonic()
        seen = ask()
        # refused once the pool's wait is over, not left waiting for the query holding it, with a retry hint
        assert time.monotonic() - start < 1 + 2.5, "the refusal waited past the pool timeout"
        assert seen.envelope["meta"]["retry_after_s"] == 2 and "retry in 2 s" in seen.envelope["error"]["hint"], seen
        return seen
    finally:
        slow.join(30)
        assert done and done[0].status == 200, "the query holding the pool did not finish well"


def in_flight(world: World, ask: Callable[[], Seen]) -> Seen:
    """pat (at most one query at once here) has a slow exploration running; pat's next is refused at once."""
    done: list[Any] = []
    slow = threading.Thread(target=lambda: done.append(request(
        world.server, "POST", "/api/v1/explore", who="pat", body=json.dumps({**SLOW, "limit": 15}))))
    slow.start()
    try:
        wait_for(lambda: slow_query_active(world.pg_dsn), what="pat's slow query")
        seen = ask()
        assert seen.envelope["meta"]["retry_after_s"] >= 1, seen
        return seen
    finally:
        slow.join(30)
        assert done and done[0].status == 200, "pat's running query did not finish well"


def pool_held_stdio(world: World) -> Seen:
    """stdio's one connection held by a slow call (1.2 s, inside the analyst's 1.5 s); the next call
    waits its pool timeout (0.3 s)."""
    stdio = world.stdio
    held = stdio.send_call("ontoos_explore", {**SLOW, "limit": 4})
    wait_for(lambda: slow_query_active(world.pg_dsn), what="the stdio slow query")
    seen = stdio.call("ontoos_explore", QUESTION)
    assert stdio.answer(held)["result"]["isError"] is False
    return seen


def audit_event(dsn: str, surface: str, code: str, before: int) -> Seen:
    """The audit's newest event of `surface` with `code`, once there are more than `before`."""
    def found():
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = conn.execute("SELECT error_type, error_subtype, error_code, reason, message, hint "
                                "FROM ontoos_audit.events "
                                "WHERE surface = %s AND error_code = %s ORDER BY at", (surface, code)).fetchall()
        return rows if len(rows) > before else None

    rows = wait_for(found, what=f"the {surface} audit event {code}")
    assert len(rows) == before + 1, rows  # recorded once
    kind, subtype, code_, reason, message, hint = rows[-1]
    return Seen("audit", {"ok": False, "error": {"type": kind, "subtype": subtype, "code": code_, "message": message,
                                                 "hint": hint}, "reason": reason})


def count_events(dsn: str, surface: str, code: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS ontoos_audit")
        exists = conn.execute("SELECT to_regclass('ontoos_audit.events')").fetchone()[0]
        if exists is None:
            return 0
        return conn.execute("SELECT count(*) FROM ontoos_audit.events WHERE surface = %s AND error_code = %s",
                            (surface, code)).fetchone()[0]


def cancelled_rest(world: World) -> Seen:
    """The client leaves half-way through its body."""
    before = count_events(world.server.audit_dsn, "rest", "EX602")
    s = socket.create_connection((world.server.host, world.server.port), timeout=10)
    s.sendall((f"POST /api/v1/explore HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token('alice')}\r\n"
               "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"dataset\": ").encode())
    time.sleep(0.3)
    s.close()
    seen = audit_event(world.server.audit_dsn, "rest", "EX602", before)
    assert seen.envelope["reason"] == "CLIENT_DISCONNECTED"
    return seen


def cancelled_mcp(world: World) -> Seen:
    """pat's slow tools/call, then notifications/cancelled for it in the same session."""
    before = count_events(world.server.audit_dsn, "mcp", "EX602")
    session = world.mcp_session("pat")
    call = json.dumps({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
                       "params": {"name": "ontoos_explore", "arguments": {**SLOW, "limit": 100}}})
    head = "".join(f"{k}: {v}\r\n" for k, v in {**session, "Authorization": f"Bearer {token('pat')}",
                                                 "Content-Type": "application/json"}.items())
    s = socket.create_connection((world.server.host, world.server.port), timeout=30)
    try:
        s.sendall((f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{world.server.port}\r\n{head}"
                   f"Content-Length: {len(call)}\r\n\r\n{call}").encode())
        wait_for(lambda: slow_query_active(world.pg_dsn), what="pat's slow call")
        note = request(world.server, "POST", "/mcp", who="pat", headers=session, body=json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 77, "reason": "table"}}))
        assert note.status == 202, note.text[:300]
        seen = audit_event(world.server.audit_dsn, "mcp", "EX602", before)
        wait_for(lambda: not slow_query_active(world.pg_dsn), what="the cancelled query to stop")
    finally:
        s.close()
    assert seen.envelope["reason"] == "CALL_CANCELLED"
    return seen


def cancelled_stdio(world: World) -> Seen:
    stdio = world.stdio
    before = count_events(stdio.audit_dsn, "mcp-stdio", "EX602")
    ident = stdio.send_call("ontoos_explore", SLOW)
    wait_for(lambda: slow_query_active(world.pg_dsn), what="the stdio slow query")
    stdio.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": ident}})
    seen = audit_event(stdio.audit_dsn, "mcp-stdio", "EX602", before)
    assert seen.envelope["reason"] == "CALL_CANCELLED"
    wait_for(lambda: not slow_query_active(world.pg_dsn), what="the cancelled query to stop")
    return seen


# ================================================================ the table

INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "table", "version": "0"}}}
TOOLS_LIST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
NOT_JSON = {"Content-Type": "text/plain", "Accept": ACCEPT}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
BUG = "a bug: no request produces it (the tests of its stage raise it in-process)"
NO_TOKENS = "stdio and the CLI have no tokens: the caller is whoever started the process"

TABLE: dict[str, dict[str, Any]] = {
    # ---------------------------------------------------------------- EX1xx
    "SYNTAX_ERROR": explore_all({"query": "explore workloads fields"}),
    "INVALID_REQUEST": explore_all({"dataset": "workloads"}),
    "INVALID_NAME": explore_all({"dataset": "work loads", "fields": ["name"]}),
    "UNKNOWN_TOOL": {s: Unreachable("MCP answers an unknown tool as a protocol error (-32602) before any tool runs; "
                                    "REST and the CLI name no tools") for s in SURFACES},
    # ---------------------------------------------------------------- EX2xx
    "UNKNOWN_FIELD": explore_all({"dataset": "workloads", "fields": ["name", "nosuch"]}),
    "UNKNOWN_DATASET": explore_all({"dataset": "nosuch", "fields": ["name"]}),
    "UNKNOWN_RELATION": explore_all({"dataset": "workloads", "relations": ["nosuch"], "fields": ["name"]}),
    "RELATION_NOT_FOLLOWED": explore_all({"dataset": "workloads", "fields": ["name", "containers.name"]}),
    "DUPLICATE_RELATION": explore_all({"dataset": "workloads", "relations": ["containers", "containers"],
                                       "fields": ["name"]}),
    "UNKNOWN_QUERY": tool_only("ontoos_run_query", {"id": "no_such_query"}, "the REST API runs no named queries",
                               Cli(("queries", "run", "no_such_query"))),
    "UNKNOWN_NAME": {"rest": Http("GET", "/api/v1/catalog?name=zzzz"), "mcp": Tool("ontoos_catalog", {"name": "zzzz"}),
                     "stdio": Tool("ontoos_catalog", {"name": "zzzz"}), "cli": Cli(("describe", "zzzz"))},
    "UNKNOWN_READ_SET": cli_only(Cli(("check-sql", "--read-set", "nosuch", "/dev/null")),
                                 "only `ontoos check-sql` names read sets"),
    # ---------------------------------------------------------------- EX3xx
    "TYPE_MISMATCH": explore_all({"dataset": "workloads", "fields": ["name"], "filter": "replicas > 'many'"}),
    "OPERATOR_TYPE": explore_all({"dataset": "workloads", "fields": ["name"], "filter": "replicas like 'x%'"}),
    "AGGREGATE_TYPE": explore_all({"dataset": "workloads", "fields": ["sum(name)"]}),
    "UNGROUPED_FIELD": explore_all({"dataset": "workloads", "fields": ["namespace", "count()"]}),
    "DUPLICATE_OUTPUT": explore_all({"dataset": "workloads", "fields": ["name", "namespace as name"]}),
    "INVALID_LIMIT": explore_all({**QUESTION, "limit": 0}),
    "ORDER_NOT_GROUPED": explore_all({"dataset": "workloads", "fields": ["namespace", "count()"],
                                      "group_by": ["namespace"], "order_by": ["name"]}),
    "NO_FIELDS": explore_all({"dataset": "workloads", "fields": []}),
    "VALUE_REJECTED": explore_all({**QUESTION, "filter": [{"field": "name", "op": "like", "value": "a\\"}]}),
    # ---------------------------------------------------------------- EX4xx (the analyst's budgets)
    "TOO_MANY_FIELDS": explore_all({"dataset": "workloads", "fields": [f"name as n{i}" for i in range(31)]}),
    "TOO_MANY_PREDICATES": explore_all({**QUESTION, "filter": many(51, "replicas = 1", " or ")}),
    "IN_LIST_TOO_LONG": explore_all({**QUESTION, "filter": f"replicas in ({many(201, '1')})"}),
    "TOO_MANY_RELATIONS": explore_all({"dataset": "projects", "relations": ["workloads", "stats", "archives"],
                                       "fields": ["name"]}),
    "LITERAL_TOO_LONG": explore_all({**QUESTION, "filter": f"name = '{'x' * 1001}'"}),
    "HEAVY_WITHOUT_FILTER": explore_all({"dataset": "table_refs", "fields": ["file_path"]}),
    "LIMIT_OVER_BUDGET": explore_all({**QUESTION, "limit": 501}),
    "INPUT_TOO_LARGE": explore_all({**QUESTION, "filter": f"name = '{'x' * 70000}'"}),
    "TOO_DEEP": explore_all({**QUESTION, "filter": "not " * 40 + "replicas > 1"}),
    "TIME_BUDGET": explore_all(SLOW),
    "COST_BUDGET": explore_all({"dataset": "table_refs", "fields": ["file_path"], "filter": "access = 'read'",
                                "order_by": ["file_path"], "limit": 2}),  # sorted: the whole scan is costed
    "CONSISTENCY_UNVERIFIED": explore_all({"dataset": "hosts", "fields": ["hostname"], "limit": 1,
                                           "require": {"max_age_s": 3600}}),  # hosts has no source: age unknown
    "DEGRADED": explore_all({"dataset": "gone", "fields": ["id"], "limit": 1}),
    "RESULT_EXPIRED": {**explore_all({"cursor": "not.a-cursor"}),
                       "cli": Cli(("explore", "--role", "analyst", "--cursor", "not.a-cursor"))},
    # ---------------------------------------------------------------- EX5xx
    "UNKNOWN_ROLE": {"rest": Unreachable(f"principals' roles are checked against the contract: {START_UP}"),
                     "mcp": Unreachable(f"principals' roles are checked against the contract: {START_UP}"),
                     "stdio": Unreachable(f"serve --stdio --role is checked: {START_UP}"),
                     "cli": Cli(("explore", "--role", "nosuch", "--json", json.dumps(QUESTION)))},
    "NO_TOKEN": {"rest": Http("POST", "/api/v1/explore", json.dumps(QUESTION), who=None),
                 "mcp": Http("POST", "/mcp", TOOLS_LIST, {"Accept": ACCEPT}, who=None),
                 "stdio": Unreachable(NO_TOKENS), "cli": Unreachable(NO_TOKENS)},
    "NOT_REVIEWER": {"rest": Http("GET", "/api/v1/governance/report"),
                     "mcp": Unreachable("the dashboard's JSON API is not MCP"),
                     "stdio": Unreachable("the dashboard is served over HTTP only"),
                     "cli": Unreachable("the CLI's governance commands are for whoever runs them")},
    "METRICS_DENIED": {"rest": Http("GET", "/metrics"),  # alice is not marked metrics; loopback is not trusted here
                       "mcp": Unreachable("/metrics is not MCP"),
                       "stdio": Unreachable("/metrics is served over HTTP only"),
                       "cli": Unreachable("the CLI serves no metrics")},
    "SELF_APPROVAL": {"rest": Flow(self_approval, "rex approves what rex promoted"),
                      "mcp": Unreachable("approving is the dashboard's form, not MCP"),
                      "stdio": Unreachable("the dashboard is served over HTTP only"),
                      "cli": Unreachable("`ontoos queries approve` has no principal to compare with the promoter: "
                                         "the CLI's governance commands are for whoever runs them")},
    "CSRF_REFUSED": {"rest": Http("POST", "/governance/approve", "id=x", {**FORM, "Origin": "http://127.0.0.1:9999",
                                                                        "Accept": "application/json"}, who="rex"),
                     "mcp": Unreachable("/mcp takes a bearer token, never the dashboard's cookie: nothing to forge"),
                     "stdio": Unreachable("the dashboard is served over HTTP only"),
                     "cli": Unreachable("the CLI has no forms")},
    # ---------------------------------------------------------------- EX6xx
    "UPSTREAM_UNAVAILABLE": {
        "rest": Flow(lambda w: pool_held(w, lambda: w.rest(Explore(QUESTION))), "the one connection held"),
        "mcp": Flow(lambda w: pool_held(w, lambda: w.mcp_call("ontoos_explore", QUESTION)), "the one connection held"),
        "stdio": Flow(pool_held_stdio, "the one connection held"),
        "cli": Cli(("explore", "--json", json.dumps(QUESTION)), {"ONTOOS_DSN": "DEAD"})},
    "RATE_LIMITED": {"rest": Flow(rate_limited_rest, "tina's fourth call"),
                     "mcp": Flow(rate_limited_mcp, "mia's third call"),
                     "stdio": Flow(rate_limited_stdio, "mia's third call"),
                     "cli": Unreachable("the CLI has no principals, so no rate limits")},
    "TOO_MANY_IN_FLIGHT": {
        "rest": Flow(lambda w: in_flight(w, lambda: w.rest(Http("POST", "/api/v1/explore", json.dumps(QUESTION),
                                                                 who="pat"))), "pat's second query at once"),
        "mcp": Flow(lambda w: in_flight(w, lambda: w.mcp_call("ontoos_explore", QUESTION, who="pat")),
                    "pat's second query at once, over MCP"),
        "stdio": Unreachable("serve --stdio here serves one caller on one pooled connection: a second call at once "
                             "waits for that connection (UPSTREAM_UNAVAILABLE) under the default cap of 4"),
        "cli": Unreachable("a CLI run is one query")},
    "CANCELLED": {"rest": Flow(cancelled_rest, "a client gone half-way through its body"),
                  "mcp": Flow(cancelled_mcp, "notifications/cancelled"),
                  "stdio": Flow(cancelled_stdio, "notifications/cancelled"),
                  "cli": Unreachable("a CLI run is not cancelled by a request")},
    "SHUTTING_DOWN": http_only(
        Unreachable("only a server draining after SIGTERM answers it: tests/server/test_lifecycle.py drives one"),
        Unreachable("the same 503 in front of /mcp while the server drains: tests/server/test_lifecycle.py")),
    # ---------------------------------------------------------------- the surfaces' own
    "BODY_NOT_JSON": http_only(Http("POST", "/api/v1/explore", json.dumps(QUESTION), NOT_JSON),
                               Http("POST", "/mcp", TOOLS_LIST, NOT_JSON)),
    "BODY_TOO_SLOW": http_only(Flow(lambda w: slow_body(w, "/api/v1/explore"), "2 of 100 bytes"),
                               Flow(lambda w: slow_body(w, "/mcp"), "2 of 100 bytes")),
    "BODY_TOO_LARGE": http_only(Http("POST", "/api/v1/explore", json.dumps({**QUESTION, "query": "x" * 300_000})),
                                Http("POST", "/mcp", json.dumps({**INITIALIZE, "x": "x" * 300_000}), {"Accept": ACCEPT})),
    "JSON_TOO_LARGE": {"rest": Unreachable("a body is at most 256 KiB, so never more characters than the JSON reader "
                                           "takes: BODY_TOO_LARGE comes first"),
                       "mcp": Unreachable("as REST: BODY_TOO_LARGE comes first"),
                       "stdio": Unreachable("the SDK reads the line itself; the arguments past 262,144 characters "
                                            "are INPUT_TOO_LARGE (check_json)"),
                       "cli": Cli(("explore", "--json", json.dumps({**QUESTION, "filter": "x" * 270_000})))},
    "NOT_JSON_RPC": {"rest": Unreachable("REST takes no JSON-RPC"),
                     "mcp": Http("POST", "/mcp", f"[{TOOLS_LIST}]", {"Accept": ACCEPT}),
                     "stdio": Line('{"jsonrpc": "2.0", "id": 7, "method": 7}'),
                     "cli": Unreachable("the CLI takes no JSON-RPC")},
    "JSON_UNREADABLE": {"rest": Http("POST", "/api/v1/explore", '{"dataset": '),
                        "mcp": Http("POST", "/mcp", "hello", {"Accept": ACCEPT}),
                        "stdio": Line("hello"),
                        "cli": Cli(("explore", "--json", '{"dataset": '))},
    "NO_ROUTE": http_only(Http("GET", "/api/v1/nope"),
                          Unreachable("/mcp is one path; any other is the REST app's (NO_ROUTE there)")),
    "NOT_ACCEPTABLE": http_only(Http("POST", "/api/v1/explore", json.dumps(QUESTION), {"Accept": "application/xml"}),
                                Unreachable("/mcp's media types are the transport's own: an Accept it cannot "
                                            "answer is its TRANSPORT_REFUSED")),
    "NOT_FOUND": http_only(Http("GET", "/governance/events/0000000000000000", "", {"Accept": "application/json"},
                                who="rex"),
                           Unreachable("/mcp names no events: the dashboard's pages are HTTP GETs of their own")),
    "WRONG_METHOD": http_only(Http("POST", "/api/v1/catalog", "{}"), Http("PATCH", "/mcp", "{}", {"Accept": ACCEPT})),
    "TRANSPORT_REFUSED": http_only(Unreachable("the REST API has no transport of its own to refuse (Host and Origin "
                                               "are the MCP SDK's DNS-rebinding checks)"),
                                   Http("POST", "/mcp", json.dumps(INITIALIZE), {"Accept": ACCEPT,
                                                                                "Host": "evil.example:80"},
                                        who="vera")),  # vera holds no session: alice is at her cap
    "FLOODED": http_only(Flow(lambda w: flood(w, "/api/v1/explore"), "the 4th request without a token"),
                         Flow(lambda w: flood(w, "/mcp"), "past the flood limit")),
    "TOO_MANY_SESSIONS": http_only(Unreachable("REST has no sessions"), Flow(too_many_sessions, "a second initialize")),
    "BAD_COOKIE": http_only(Http("POST", "/governance/approve", "id=x", {**FORM, "Cookie": "ontoos_session=stale"},
                                 who=None),
                            Unreachable("/mcp takes a bearer token, never the dashboard's cookie")),
    "UNKNOWN_SESSION": http_only(Unreachable("REST has no sessions"),
                                 Flow(foreign_session, "alice's session, vera's token")),
    "HEADERS_TOO_SLOW": http_only(Flow(lambda w: slow_headers(w, "/api/v1/explore"), "headers never finished"),
                                  Flow(lambda w: slow_headers(w, "/mcp"), "headers never finished")),
    "HEAD_TOO_LARGE": http_only(Flow(lambda w: big_head(w, "/api/v1/explore"), "a 70 KB header"),
                                Flow(lambda w: big_head(w, "/mcp"), "a 70 KB header")),
    "TOO_MANY_CONNECTIONS": http_only(Flow(lambda w: crowded(w, "127.0.0.3", "/api/v1/explore"), "a 9th connection"),
                                      Flow(lambda w: crowded(w, "127.0.0.4", "/mcp"), "a 9th connection")),
    # ---------------------------------------------------------------- EX9xx
    "INTERNAL_ERROR": {s: Unreachable(BUG) for s in SURFACES},
    "CONTRACT_INVALID": cli_only(Cli(("explore", "--json", json.dumps(QUESTION)), {"ONTOOS_CONTRACT": "BAD"}),
                                 START_UP),
    "GUARD_VIOLATION": {s: Unreachable(BUG + ": the policy let through what the guard refused") for s in SURFACES},
    "DATABASE_DENIED": explore_all({"dataset": "workloads", "fields": ["name", "env_dump"], "limit": 1}),
    "DATABASE_ERROR": explore_all({"dataset": "broken", "fields": ["id", "label"], "limit": 1}),
    "DATABASE_SETUP": cli_only(Cli(("explore", "--json", json.dumps(QUESTION)), {"ONTOOS_ROLE_PREFIX": "ontoos_none_"}),
                               START_UP),
    "SETTING_INVALID": cli_only(Cli(("explore", "--json", json.dumps(QUESTION)), {"ONTOOS_POOL_MAX": "zero"}),
                                START_UP),
}
# run last: FLOODED spends what is left of the address's allowance, which NO_TOKEN and BAD_COOKIE need
ORDER_LAST = ("FLOODED",)


# ================================================================ the world: one server, two stdio processes, the CLI


class Stdio:
    """`ontoos serve --stdio` driven line by line; a reader thread queues what it writes."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path, audit_dsn: str) -> None:
        self.audit_dsn = audit_dsn
        self.proc = subprocess.Popen([serving.ontoos_executable(), "serve", "--stdio", *args], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue = queue.Queue()
        self.kept: dict[Any, dict[str, Any]] = {}
        self.next_id = 100
        threading.Thread(target=self._read, daemon=True).start()
        self.err = b""
        threading.Thread(target=self._read_err, daemon=True).start()
        self.send(INITIALIZE)
        assert self.answer(0)["result"]["serverInfo"]["name"] == "ontoos-explore"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _read(self) -> None:
        for line in self.proc.stdout:
            message = json.loads(line.decode("utf-8"))
            if "result" in message or "error" in message:  # answers; the server's own notifications are not
                self.lines.put(message)
        self.lines.put(None)

    def _read_err(self) -> None:
        self.err = self.proc.stderr.read()

    def send(self, message: dict[str, Any] | str) -> None:
        text = message if isinstance(message, str) else json.dumps(message)
        self.proc.stdin.write(text.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def send_call(self, name: str, args: dict[str, Any]) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                   "params": {"name": name, "arguments": args}})
        return self.next_id

    def answer(self, ident, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while ident not in self.kept:
            message = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            assert message is not None, f"the stdio server exited: {self.err.decode('utf-8', 'replace')[-2000:]}"
            self.kept[message.get("id")] = message
        return self.kept.pop(ident)

    def call(self, name: str, args: dict[str, Any]) -> Seen:
        return tool_seen(self.answer(self.send_call(name, args)))

    def line(self, text: str) -> Seen:
        self.send(text)
        ident = re.search(r'"id":\s*(\d+)', text)
        message = self.answer(int(ident.group(1)) if ident else None)
        return Seen("rpc", message["error"]["data"], rpc=message["error"]["code"])

    def close(self) -> str:
        self.proc.stdin.close()
        try:
            assert self.proc.wait(timeout=20) == 0
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        return self.err.decode("utf-8", "replace")


def tool_seen(message: dict[str, Any]) -> Seen:
    if "error" in message:
        return Seen("rpc", message["error"].get("data") or {}, rpc=message["error"]["code"])
    result = message["result"]
    if result["isError"]:
        assert "structuredContent" not in result, result
        return Seen("tool", json.loads(result["content"][0]["text"]))
    return Seen("tool", result["structuredContent"])


def sse_or_json(reply) -> dict[str, Any]:
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in re.split(r"\r\n|\r|\n", reply.text) if line.startswith("data:")]
        return json.loads(data[-1])
    return reply.json


class World:
    def __init__(self, pg_dsn: str, server, workdir: Path, contract: Path, config: Path, capsys, monkeypatch) -> None:
        self.pg_dsn, self.server, self.workdir = pg_dsn, server, workdir
        self.contract, self.config = contract, config
        self.capsys, self.monkeypatch = capsys, monkeypatch
        self.sessions: dict[str, dict[str, str]] = {}
        self.ids = 1000
        self.stdio = self._stdio(["--role", "analyst"], pool_timeout="0.3")
        self.mia: Stdio | None = None

    def _stdio(self, args: list[str], **settings: str) -> Stdio:
        audit_dsn = new_database(self.pg_dsn, "audit")
        env = {"PATH": "/usr/bin:/bin", "ONTOOS_DSN": self.pg_dsn, "ONTOOS_CONTRACT": str(self.contract),
               "ONTOOS_ROLE_PREFIX": PREFIX, "ONTOOS_AUDIT_DSN": audit_dsn, "ONTOOS_POOL_MAX": "1",
               "ONTOOS_POOL_TIMEOUT": settings.get("pool_timeout", "5"), "ONTOOS_CONFIG": str(self.config)}
        return Stdio(args, env, self.workdir, audit_dsn)

    def stdio_as_mia(self) -> Stdio:
        if self.mia is None:
            self.mia = self._stdio(["--principal", "mia"])
        return self.mia

    def close(self) -> None:
        for stdio in (self.stdio, self.mia):
            if stdio is not None:
                err = stdio.close()
                assert "Traceback" not in err, err[-3000:]

    # ------------------------------------------------------------ MCP over HTTP

    def mcp_session(self, who: str = "alice") -> dict[str, str]:
        if who not in self.sessions:
            r = request(self.server, "POST", "/mcp", body=json.dumps(INITIALIZE), who=who, headers={"Accept": ACCEPT})
            assert r.status == 200, r.text[:300]
            headers = {"Accept": ACCEPT, "mcp-protocol-version": PROTOCOL, "mcp-session-id": r.headers["mcp-session-id"]}
            note = request(self.server, "POST", "/mcp", who=who, headers=headers,
                           body='{"jsonrpc": "2.0", "method": "notifications/initialized"}')
            assert note.status == 202, note.text[:300]
            self.sessions[who] = headers
        return self.sessions[who]

    def mcp_call(self, name: str, args: dict[str, Any], who: str = "alice") -> Seen:
        self.ids += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": "tools/call",
                           "params": {"name": name, "arguments": args}})
        r = request(self.server, "POST", "/mcp", body=body, who=who, headers=self.mcp_session(who))
        assert r.status == 200, r.text[:300]
        message = sse_or_json(r)
        assert message["id"] == self.ids, message
        return tool_seen(message)

    # ------------------------------------------------------------ the surfaces

    def rest(self, req: Explore | Http) -> Seen:
        if isinstance(req, Explore):
            req = Http("POST", "/api/v1/explore", json.dumps(req.args))
        headers = dict(req.headers)
        r = request(self.server, req.method, req.path, body=req.body, who=req.who, headers=headers)
        assert r.headers["content-type"].startswith("application/json"), r.headers
        if r.status == 401:
            assert r.headers["www-authenticate"].startswith("Bearer")
        return Seen("http", r.json, status=r.status)

    def mcp(self, req: Explore | Tool | Http) -> Seen:
        if isinstance(req, Explore):
            return self.mcp_call("ontoos_explore", req.args)
        if isinstance(req, Tool):
            return self.mcp_call(req.name, req.args)
        r = request(self.server, req.method, req.path, body=req.body, who=req.who, headers=dict(req.headers))
        body = r.json
        if "jsonrpc" in body:
            return Seen("rpc", body["error"]["data"], status=r.status, rpc=body["error"]["code"])
        return Seen("http", body, status=r.status)

    def stdio_(self, req: Explore | Tool | Line) -> Seen:
        if isinstance(req, Line):
            return self.stdio.line(req.text)
        name, args = ("ontoos_explore", req.args) if isinstance(req, Explore) else (req.name, req.args)
        return self.stdio.call(name, args)

    def cli(self, req: Explore | Cli) -> Seen:
        argv = ("explore", "--json", json.dumps(req.args)) if isinstance(req, Explore) else req.argv
        if argv[0] in ("explore", "queries"):
            argv = (*argv[:1], "--format", "json", *argv[1:])
        env = {} if isinstance(req, Explore) else req.env
        with self.monkeypatch.context() as m:
            m.setenv("ONTOOS_CONTRACT", str(self.contract))
            m.setenv("ONTOOS_ROLE_PREFIX", PREFIX)
            m.setenv("ONTOOS_DSN", self.pg_dsn)
            m.setenv("ONTOOS_ROLE", "analyst")
            m.setenv("ONTOOS_QUERIES", str(self.workdir / "no-queries.yaml"))
            m.setenv("ONTOOS_AUDIT", "off")
            m.delenv("ONTOOS_CONFIG", raising=False)
            for key, value in env.items():
                if value == "DEAD":  # a socket directory where no PostgreSQL listens
                    value = f"host={self.workdir / 'no-postgres'} dbname=x connect_timeout=1"
                elif value == "BAD":
                    value = str(self.workdir / "broken-contract.yaml")
                m.setenv(key, value)
            self.capsys.readouterr()
            code = cli_main(list(argv))
            out, err = self.capsys.readouterr()
        assert "Traceback" not in out + err, err[-2000:]
        return Seen("cli", json.loads(out), exit=code)

    def ask(self, surface: str, req: Any) -> Seen:
        if isinstance(req, Flow):
            return req.run(self)
        return {"rest": self.rest, "mcp": self.mcp, "stdio": self.stdio_, "cli": self.cli}[surface](req)


# ================================================================ the set-up


def table_contracts(workdir: Path) -> tuple[Path, dict[str, Any]]:
    """(the served contract, the contract the database roles are granted from): see the module docstring."""
    data = yaml.safe_load(hostile_contract(workdir / "hostile.yaml").read_text(encoding="utf-8"))
    data["datasets"]["broken"] = {"relation": f"{SCHEMA}.broken", "description": "A view PostgreSQL cannot read.",
                                  "columns": {"id": {"type": "integer"}, "label": {"type": "text"}}}
    data["read_sets"]["slow"].append("broken")
    analyst = data["roles"]["analyst"]
    analyst["read_sets"].append("slow")
    analyst.update(timeout_ms=1500, clamp_limit=False)
    analyst.pop("max_cost", None)
    data["heavy_max_cost"] = 1
    granted = copy.deepcopy(data)
    assert data["datasets"]["workloads"]["columns"]["env_dump"].pop("secret") is True
    data["datasets"]["gone"] = {"relation": f"{SCHEMA}.gone", "description": "A table the database does not have.",
                                "columns": {"id": {"type": "integer"}}}  # served only: drift degrades it
    data["read_sets"]["slow"].append("gone")
    served = workdir / "contract.yaml"
    served.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return served, granted


def prepare(pg_dsn: str, workdir: Path) -> Path:
    served, granted = table_contracts(workdir)
    prepare_database(pg_dsn, workdir / "hostile.yaml")  # the sleepy view the broken one reads
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        conn.execute(f"CREATE SCHEMA {SCHEMA}")
        conn.execute(f"CREATE VIEW {SCHEMA}.broken AS SELECT id, (SELECT label FROM {SLOW_SCHEMA}.things) AS label "
                     f"FROM {SLOW_SCHEMA}.things")
    path = workdir / "granted.yaml"
    path.write_text(yaml.safe_dump(granted, sort_keys=False), encoding="utf-8")
    with psycopg.connect(pg_dsn) as conn:
        grants.apply(conn, load_contract(path), PREFIX)
    (workdir / "no-postgres").mkdir()
    (workdir / "broken-contract.yaml").write_text("version: 1\ndatasets: {}\n", encoding="utf-8")
    return served


@pytest.fixture(scope="module")
def server(pg_dsn, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("error-table")
    contract = prepare(pg_dsn, workdir)
    srv = start_hostile_server("error-table", pg_dsn, workdir / "server",
                               config_extra={"mcp_sessions": 1, "max_in_flight": 1, "metrics_loopback": False,
                                             "auth_failures": {"per_minute": 0.01, "burst": 3}},
                               ONTOOS_CONTRACT=str(contract), ONTOOS_ROLE_PREFIX=PREFIX, ONTOOS_POOL_MAX="1",
                               ONTOOS_POOL_TIMEOUT="1", ONTOOS_HEADER_TIMEOUT=str(HEADER_TIMEOUT_S),
                               ONTOOS_CONNECTIONS_PER_CLIENT=str(CONNECTIONS_PER_CLIENT))
    yield srv, workdir, contract
    srv.stop_cleanly()


# ================================================================ the test


def expected_form(row: ErrorCode, surface: str, seen: Seen, req: Any) -> None:
    """How `surface` must carry `row`: the status, JSON-RPC code or exit code read off the row."""
    where = f"{row.subtype}/{row.code} ({row.title}) on {surface}"
    if seen.kind == "audit":  # the caller is gone: nobody receives the answer, the audit has it
        assert isinstance(req, Flow) and row is Codes.CANCELLED, (where, seen)
    elif surface == "rest":
        assert seen.kind == "http" and seen.status == row.status, (where, seen)
    elif surface == "cli":
        assert seen.kind == "cli" and seen.exit == row.exit, (where, seen)
    elif seen.kind == "rpc":  # the transport refused the message itself
        assert seen.rpc == row.rpc, (where, seen)
        if surface == "mcp":
            own = {Codes.TRANSPORT_REFUSED: 421}.get(row, row.status)  # the SDK's own status: a bad Host
            assert seen.status == own, (where, seen)
    elif seen.kind == "http":  # the HTTP layer in front of /mcp: the envelope, the row's status
        assert surface == "mcp" and isinstance(req, (Http, Flow)) and seen.status == row.status, (where, seen)
    else:
        assert seen.kind == "tool", (where, seen)


def test_every_row_of_the_error_table_on_every_surface(pg_dsn, server, capsys, monkeypatch):
    srv, workdir, contract = server
    config = write_config(workdir / "stdio-config.yaml")
    rows = {name: row for name, row in vars(Codes).items() if isinstance(row, ErrorCode)}
    assert list(rows.values()) == errors.all_rows()
    assert set(TABLE) == set(rows), f"rows without a request or a reason: {set(rows) ^ set(TABLE)}"
    world = World(pg_dsn, srv, workdir, contract, config, capsys, monkeypatch)
    # the served contract has drifted from the database: `gone` has no table, env_dump no grant
    notice = {"min_cli_version": ontoos_explore.__version__, "schema_drift": None,
              "contract_hash": load_contract(contract).hash}
    drifts: dict[tuple[str, str], bool] = {}  # (row, surface) -> the schema_drift its envelope said
    order = [n for n in rows if n not in ORDER_LAST] + list(ORDER_LAST)
    pinned, unreachable = [], []
    try:
        for name in order:
            row = rows[name]
            assert set(TABLE[name]) == set(SURFACES), name
            for surface in SURFACES:
                req = TABLE[name][surface]
                if isinstance(req, Unreachable):
                    assert req.reason, (name, surface)
                    unreachable.append((name, surface))
                    continue
                seen = world.ask(surface, req)
                env = seen.envelope
                assert env["ok"] is False and "data" not in env, (name, surface, env)
                err = env["error"]
                assert (err["type"], err["subtype"], err["code"]) == (row.type, row.subtype, row.code), \
                    (name, surface, err)
                assert err.get("message"), (name, surface, err)
                if surface != "cli":  # a server's refusal says what to do
                    assert err.get("hint"), (name, surface, err)
                expected_form(row, surface, seen, req)
                if surface != "cli" and seen.kind != "audit":  # a server's every envelope: its notice
                    assert {**env["_notice"], "schema_drift": None} == notice, (name, surface, env)
                    assert isinstance(env["_notice"]["schema_drift"], bool), (name, surface, env)
                    drifts[(name, surface)] = env["_notice"]["schema_drift"]
                pinned.append((name, surface))
    finally:
        world.close()
    # schema_drift is the caller's: what its role may read drifted (the analyst reads `gone`; tina, a
    # viewer, does not); before a caller is known, whether anything drifted (it did)
    assert drifts[("DEGRADED", "rest")] and drifts[("NO_TOKEN", "rest")] and not drifts[("RATE_LIMITED", "rest")]
    # every surface pins most of the table; the rest is listed above with its reason
    by_surface = {s: sum(1 for _, x in pinned if x == s) for s in SURFACES}
    assert min(by_surface.values()) >= 25, by_surface
    assert len(pinned) + len(unreachable) == len(rows) * len(SURFACES)
