"""The HTTP surface end to end: a real `ontoos serve --http` (uvicorn) in a subprocess.

The REST API is driven with the standard library (http.client) so every byte
on the wire is visible: status, headers and body. MCP is driven with the
official SDK client over streamable HTTP, in both protocol eras (`auto`
negotiates 2026-07-28, `legacy` forces the initialize handshake), with the
bearer token in a custom header.

A second server whose DSN points at a socket directory with no PostgreSQL
checks that a database outage is a 503 envelope that names neither the DSN
nor a path. Every response body is checked as it arrives for tracebacks, SQL,
server paths and the demo's secret marker (`serving.assert_clean`), and each
server's shutdown is checked in its fixture's teardown: a clean exit and no
traceback on stderr. No test depends on another having run.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import json
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import anyio
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests import serving
from tests.databases import database_of, new_database
from tests.named_queries import DEMO_QUERY_TOOLS
from tests.serving import SECRET_MARKER, Server, assert_clean, pg_socket_dir
from tests.envelopes import comparable

ROOT = Path(__file__).resolve().parents[2]
MODES = ("auto", "legacy")
TOOL_NAMES = ["ontoos_catalog", "ontoos_explore", "ontoos_queries", "ontoos_run_query", "ontoos_explain", "ontoos_request_query",
              "ontoos_stats"]

# principal -> (contract role, bearer token); the server config stores only sha256(token)
PRINCIPALS: dict[str, tuple[str, str]] = {
    "alice": ("analyst", "alice-" + secrets.token_hex(16)),
    "vera": ("reader", "vera-" + secrets.token_hex(16)),
    "rex": ("admin", "rex-" + secrets.token_hex(16)),
}
ALICE, VERA, REX = (PRINCIPALS[p][1] for p in ("alice", "vera", "rex"))

# The README's example question, in the JSON form ...
QUESTION = {
    "dataset": "workloads",
    "relations": ["containers"],
    "fields": ["name", "count()"],
    "filter": "namespace = 'prod-fp'",
    "group_by": ["name"],
    "order_by": ["-name"],
    "limit": 20,
}
# ... and the same question as GET query strings
QUESTION_GET = {
    "fields comma-separated, filter k=v": [
        ("dataset", "workloads"), ("relation", "containers"), ("fields", "name,count()"),
        ("filter", "namespace=prod-fp"), ("group_by", "name"), ("order_by", "-name"), ("limit", "20")],
    "fields repeated": [
        ("dataset", "workloads"), ("relation", "containers"), ("fields", "name"), ("fields", "count()"),
        ("filter", "namespace=prod-fp"), ("group_by", "name"), ("order_by", "-name"), ("limit", "20")],
    "filter as a predicate": [
        ("dataset", "workloads"), ("relation", "containers"), ("fields", "name, count()"),
        ("filter", "namespace = 'prod-fp'"), ("group_by", "name"), ("order_by", "-name"), ("limit", "20")],
    "text form": [
        ("query", "explore workloads via containers fields name, count() where namespace = 'prod-fp' "
                  "group by name order by name desc limit 20")],
}


# ---------------------------------------------------------------- the servers


def write_config(path: Path) -> Path:
    lines = ["principals:"]
    for name, (role, token) in PRINCIPALS.items():
        digest = hashlib.sha256(token.encode("utf-8")).hexdigest()
        extra = ", reviewer: true" if name == "rex" else ""
        lines.append(f'  {name}: {{role: {role}, token_sha256: "{digest}"{extra}}}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def start_server(name: str, workdir: Path, env_extra: dict[str, str], forbidden: list[str]) -> Server:
    workdir.mkdir(parents=True, exist_ok=True)
    config = write_config(workdir / "server.yaml")
    port = serving.free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in ("ONTOOS_CONFIG", "ONTOOS_CONTRACT", "ONTOOS_QUERIES", "ONTOOS_ROLE", "ONTOOS_DSN")}
    env.update({"ONTOOS_DATA_DIR": str(workdir / "embedded-unused"), "PYTHONUNBUFFERED": "1"}, **env_extra)
    stderr_path = workdir / "stderr.log"
    with open(workdir / "stdout.log", "wb") as out, open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            [serving.ontoos_executable(), "serve", "--http", f"127.0.0.1:{port}", "--config", str(config)],
            cwd=workdir, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    srv = Server(name, "127.0.0.1", port, proc, workdir, stderr_path,
                 forbidden=[str(workdir), str(ROOT), str(Path(sys.prefix)), "site-packages", *forbidden])
    return srv.wait_healthy()


@pytest.fixture(scope="module")
def server(pg_dsn, tmp_path_factory):
    audit_dsn = new_database(pg_dsn, "http_audit")  # its own: no other module's events, none left for them
    forbidden = [pg_dsn, audit_dsn, database_of(audit_dsn)]
    if sock := pg_socket_dir(pg_dsn):
        forbidden.append(sock)
    srv = start_server("main", tmp_path_factory.mktemp("http-server"),
                       {"ONTOOS_DSN": pg_dsn, "ONTOOS_AUDIT_DSN": audit_dsn}, forbidden)
    yield srv
    srv.stop_cleanly()


@pytest.fixture(scope="module")
def down_server(pg_dsn, tmp_path_factory):
    """A server whose database does not exist: a socket directory with no PostgreSQL in it. Its audit
    has a store of its own (else the shutdown waits out the flush of events it can never write)."""
    empty = tmp_path_factory.mktemp("no-postgres")
    dsn = f"postgresql://postgres@/postgres?host={empty}&connect_timeout=1"
    audit_dsn = new_database(pg_dsn, "http_down_audit")
    srv = start_server("down", tmp_path_factory.mktemp("http-down"), {
        "ONTOOS_DSN": dsn,
        "ONTOOS_AUDIT_DSN": audit_dsn,
        "ONTOOS_QUERY_ROLES": "off",  # start-up must not need the database
        "ONTOOS_POOL_TIMEOUT": "2",   # answer 503 after 2 s instead of the default 5 s
    }, [dsn, str(empty), "connect_timeout", pg_dsn, audit_dsn, database_of(audit_dsn)])
    yield srv
    srv.stop_cleanly()


# ---------------------------------------------------------------- REST client


@dataclass
class Resp:
    status: int
    headers: dict[str, str]
    text: str

    @property
    def json(self) -> Any:
        return json.loads(self.text)


def call(srv: Server, method: str, path: str, *, token: str | None = None, authorization: str | None = None,
         body: Any = None, headers: dict[str, str] | None = None, chunked: bool = False, timeout: float = 60) -> Resp:
    """One request; every answer is checked by `assert_clean`. Past `timeout` seconds without an
    answer the test fails (a hang is the one outcome no test here may wait out)."""
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    if authorization is not None:
        h["Authorization"] = authorization
    if isinstance(body, (dict, list)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode("utf-8")
    if body is not None:
        h.setdefault("Content-Type", "application/json")
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=timeout)
    try:
        try:
            if chunked:
                pieces = [body[i:i + 16384] for i in range(0, len(body), 16384)]
                conn.request(method, path, body=iter(pieces), headers=h, encode_chunked=True)
            else:
                conn.request(method, path, body=body, headers=h)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer (and close) before it has read a body it refuses
        r = conn.getresponse()
        text = r.read().decode("utf-8")
        resp = Resp(r.status, {k.lower(): v for k, v in r.getheaders()}, text)
    finally:
        conn.close()
    request_text = (body or b"").decode("utf-8", "replace") + " " + path
    assert_clean(srv, text, request_text, f"{method} {path[:100]}")
    return resp


def qs(params: list[tuple[str, str]]) -> str:
    return urlencode(params, quote_via=quote)


def post_explore(srv: Server, token: str, body: Any) -> Resp:
    return call(srv, "POST", "/api/v1/explore", token=token, body=body)


def get_explore(srv: Server, token: str, params: list[tuple[str, str]]) -> Resp:
    return call(srv, "GET", "/api/v1/explore?" + qs(params), token=token)


def assert_error(r: Resp, status: int, type_: str, subtype: str, code: str | None = None) -> dict[str, Any]:
    assert r.status == status, (r.status, r.text)
    assert r.headers.get("content-type", "").startswith("application/json"), r.headers
    env = r.json
    assert env["ok"] is False, env
    assert "data" not in env
    err = env["error"]
    assert (err["type"], err["subtype"]) == (type_, subtype), err
    if code is not None:
        assert err["code"] == code, err
    assert err["message"] and err.get("hint"), err
    return err


def assert_rows(r: Resp) -> dict[str, Any]:
    assert r.status == 200, r.text
    env = r.json
    assert env["ok"] is True, env
    assert env["data"]["rows"], env
    assert len(env["data"]["rows"][0]) == len(env["data"]["columns"])
    return env


def without_ids(env: dict[str, Any]) -> dict[str, Any]:
    return comparable(env)


# ---------------------------------------------------------------- MCP client


@contextlib.asynccontextmanager
async def mcp_client(srv: Server, mode: str, *, token: str | None = None, authorization: str | None = None):
    headers = {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if authorization is not None:
        headers["Authorization"] = authorization
    http_client = create_mcp_http_client(headers=headers)
    async with http_client, Client(streamable_http_client(srv.base + "/mcp", http_client=http_client), mode=mode) as c:
        yield c


def record_tool_result(srv: Server, result, label: str, request_text: str = "") -> None:
    text = " ".join(getattr(c, "text", "") for c in result.content)
    if result.structured_content is not None:
        text += " " + json.dumps(result.structured_content)
    assert_clean(srv, text, request_text, label)


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in leaves(e)]
    return [exc]


# ================================================================ health and auth


def test_healthz_answers_without_a_token(server, demo):
    r = call(server, "GET", "/healthz")
    assert r.status == 200
    assert r.headers["content-type"].startswith("application/json")
    notice = {"min_cli_version": "0.1.0", "schema_drift": False, "contract_hash": demo.hash}
    body = r.json
    process = body.pop("process")  # a random tag of the answering process: 8 hex digits, naming nothing
    assert len(process) == 8 and int(process, 16) >= 0
    assert body == {"ok": True, "alive": True, "contract_hash": demo.hash, "schema_drift": False, "_notice": notice}
    assert call(server, "GET", "/healthz").json["process"] == process  # the one process here


def test_readyz_says_the_database_answers_and_what_drifted_without_a_token(server, demo):
    r = call(server, "GET", "/readyz")
    assert r.status == 200, r.text
    body = r.json
    assert body["ready"] is True and body["database"]["reachable"] is True and body["database"]["standby"] is False
    assert body["contract"] == {"loaded": True, "hash": demo.hash}
    assert body["drift"]["drifted"] is False and body["drift"]["checked_at"]
    assert body["_notice"]["schema_drift"] is False
    # anyone may ask: nothing of what drifted (counts, names) and no server version
    assert set(body["drift"]) == {"checked_at", "drifted"} and set(body["database"]) == {"reachable", "standby"}


NO_TOKEN_REQUESTS = {
    "GET explore": ("GET", "/api/v1/explore?dataset=workloads&fields=name", None, {}),
    "POST explore": ("POST", "/api/v1/explore", {"dataset": "workloads", "fields": ["name"]}, {}),
    "GET catalog": ("GET", "/api/v1/catalog", None, {}),
    "GET catalog dataset": ("GET", "/api/v1/catalog?dataset=workloads", None, {}),
    "POST mcp initialize": ("POST", "/mcp", {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "0"}}},
        {"Accept": "application/json, text/event-stream"}),
    "POST mcp tools/call": ("POST", "/mcp", {
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "ontoos_explore", "arguments": {"dataset": "hosts", "fields": ["hostname"]}}},
        {"Accept": "application/json, text/event-stream"}),
    "GET mcp": ("GET", "/mcp", None, {"Accept": "text/event-stream"}),
}


@pytest.mark.parametrize("what", NO_TOKEN_REQUESTS)
def test_no_token_is_401_with_a_bearer_challenge(server, what):
    method, path, body, headers = NO_TOKEN_REQUESTS[what]
    r = call(server, method, path, body=body, headers=headers)
    err = assert_error(r, 401, "auth", "AUTH_REQUIRED", "EX502")
    assert r.headers["www-authenticate"].split()[0] == "Bearer", r.headers
    assert "Authorization: Bearer" in err["hint"]


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


BAD_AUTHORIZATION = {
    "wrong token": lambda: "Bearer not-a-configured-token",
    "empty bearer": lambda: "Bearer ",
    "bearer only": lambda: "Bearer",
    "token with a suffix": lambda: f"Bearer {ALICE}x",
    "token prefix only": lambda: f"Bearer {ALICE[:-1]}",
    "the sha256 instead of the token": lambda: "Bearer " + hashlib.sha256(ALICE.encode()).hexdigest(),
    "Basic with the token as password": lambda: _basic("alice", ALICE),
    "Basic scheme, bearer token": lambda: f"Basic {ALICE}",
    "no scheme": lambda: ALICE,
    "Token scheme": lambda: f"Token {ALICE}",
}


@pytest.mark.parametrize("what", BAD_AUTHORIZATION)
@pytest.mark.parametrize("route", ["POST explore", "GET explore", "GET catalog", "POST mcp initialize"])
def test_bad_credentials_are_401(server, what, route):
    method, path, body, headers = NO_TOKEN_REQUESTS[route]
    r = call(server, method, path, body=body, headers=headers, authorization=BAD_AUTHORIZATION[what]())
    assert_error(r, 401, "auth", "AUTH_REQUIRED", "EX502")
    assert r.headers["www-authenticate"].split()[0] == "Bearer", r.headers


def test_the_bearer_scheme_is_case_insensitive(server):
    # RFC 9110 11.1: the authentication scheme is case-insensitive
    r = call(server, "POST", "/api/v1/explore", authorization=f"bearer {ALICE}",
             body={"dataset": "workloads", "fields": ["name"], "limit": 1})
    assert_rows(r)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("authorization", [None, "Bearer not-a-configured-token", "basic-alice"],
                         ids=["no token", "wrong token", "basic scheme"])
async def test_mcp_client_without_a_valid_token_fails_and_gets_nothing(server, mode, authorization):
    if authorization == "basic-alice":
        authorization = _basic("alice", ALICE)
    got = []
    with anyio.fail_after(30):
        try:
            async with mcp_client(server, mode, authorization=authorization) as c:
                got.append(await c.list_tools())
                got.append(await c.call_tool("ontoos_explore", {"dataset": "hosts", "fields": ["hostname"]}))
        except Exception as e:  # the SDK raises an ExceptionGroup around MCPError
            errors = leaves(e)
        else:
            pytest.fail("the MCP client connected without a valid token")
    assert got == []
    assert any(isinstance(x, MCPError) for x in errors), errors
    assert not any(SECRET_MARKER in str(x) or "ip-10-" in str(x) for x in errors)


# ================================================================ explore: the JSON form and the query string


def test_post_json_form_answers_rows(server):
    r = post_explore(server, ALICE, QUESTION)
    env = assert_rows(r)
    assert r.headers["content-type"].startswith("application/json")
    assert env["data"]["columns"] == ["name", "count()"]
    names = [row[0] for row in env["data"]["rows"]]
    assert names == sorted(names, reverse=True)
    assert all(isinstance(row[1], int) and row[1] >= 1 for row in env["data"]["rows"])
    meta = env["meta"]
    assert meta["limit"] == 20 and meta["rows"] == len(env["data"]["rows"]) <= 20
    assert isinstance(meta["truncated"], bool)
    assert len(meta["fingerprint"]) == 16 and meta["exploration_id"]
    assert any(n.startswith("containers:") for n in meta["notes"])


@pytest.mark.parametrize("variant", QUESTION_GET)
def test_get_query_string_is_the_same_question(server, variant):
    posted = assert_rows(post_explore(server, ALICE, QUESTION))
    got = assert_rows(get_explore(server, ALICE, QUESTION_GET[variant]))
    assert got["data"] == posted["data"]
    for key in ("fingerprint", "limit", "truncated", "rows", "notes", "masked_columns", "contract_hash"):
        assert got["meta"][key] == posted["meta"][key], key
    assert got["meta"]["exploration_id"] != posted["meta"]["exploration_id"]


def test_get_repeated_filters_are_anded_like_the_json_form(server):
    posted = assert_rows(post_explore(server, ALICE, {**QUESTION, "filter": "namespace = 'prod-fp' and replicas > 1"}))
    params = [("dataset", "workloads"), ("relation", "containers"), ("fields", "name,count()"),
              ("filter", "namespace=prod-fp"), ("filter", "replicas > 1"),
              ("group_by", "name"), ("order_by", "-name"), ("limit", "20")]
    got = assert_rows(get_explore(server, ALICE, params))
    assert got["data"] == posted["data"]
    assert got["meta"]["fingerprint"] == posted["meta"]["fingerprint"]
    # and the second filter really applies
    one = assert_rows(get_explore(server, ALICE, params[:4] + params[5:]))
    assert one["meta"]["fingerprint"] != got["meta"]["fingerprint"]


def test_post_text_form_under_query(server):
    posted = assert_rows(post_explore(server, ALICE, QUESTION))
    text = assert_rows(post_explore(server, ALICE, {"query": QUESTION_GET["text form"][0][1]}))
    assert text["data"] == posted["data"]
    assert text["meta"]["fingerprint"] == posted["meta"]["fingerprint"]


def _assert_plan(env: dict[str, Any]) -> dict[str, Any]:
    assert env["ok"] is True, env
    assert "rows" not in env["data"]
    plan = env["data"]["plan"]
    assert plan["datasets"][0] == "workloads" and "containers" in plan["datasets"]
    assert plan["columns"] == ["name", "count()"] and plan["limit"] == 20
    assert plan["within_budget"] is True and plan["cost_class"] in ("low", "moderate", "high") and "estimated_cost" not in plan
    assert plan["timeout_ms"] == 5000  # analyst's budget
    assert env["meta"]["dry_run"] is True
    return plan


def test_dry_run_post_and_get_return_the_plan(server):
    real = assert_rows(post_explore(server, ALICE, QUESTION))
    r_post = post_explore(server, ALICE, {**QUESTION, "dry_run": True})
    r_get = get_explore(server, ALICE, QUESTION_GET["fields comma-separated, filter k=v"] + [("dry_run", "true")])
    assert r_post.status == r_get.status == 200, (r_post.text, r_get.text)
    plan_post, plan_get = _assert_plan(r_post.json), _assert_plan(r_get.json)
    assert plan_post == plan_get
    assert r_post.json["meta"]["fingerprint"] == r_get.json["meta"]["fingerprint"] == real["meta"]["fingerprint"]
    # dry_run=false is a real run
    r = get_explore(server, ALICE, QUESTION_GET["fields repeated"] + [("dry_run", "false")])
    assert assert_rows(r)["data"] == real["data"]


# ================================================================ status codes


@pytest.mark.parametrize("body, subtype, code", [
    ({"query": "explore workloads fields name limit"}, "SYNTAX_ERROR", "EX101"),
    ({"query": "explore workloads fields name,, namespace"}, "SYNTAX_ERROR", "EX101"),
    ({"dataset": "workloads", "fields": ["name", "namspace"]}, "UNKNOWN_FIELD", "EX201"),
    ({"dataset": "workloadz", "fields": ["name"]}, "UNKNOWN_DATASET", "EX202"),
    ({"dataset": "workloads", "fields": ["name"], "filter": "replicas > 'many'"}, "TYPE_MISMATCH", None),
    ({"dataset": "workloads", "fields": ["name"], "bogus": 1}, "INVALID_REQUEST", "EX102"),
    ({"dataset": "workloads", "fields": ["name"], "dry_run": "yes"}, "INVALID_REQUEST", "EX102"),
    ({"dataset": "workloads", "fields": ["name"], "limit": 0}, "UNSUPPORTED_QUERY", "EX306"),
], ids=["syntax: ends early", "syntax: double comma", "unknown field", "unknown dataset", "type mismatch",
        "unknown key", "dry_run not a bool", "limit 0"])
def test_validation_errors_are_400(server, body, subtype, code):
    err = assert_error(post_explore(server, ALICE, body), 400, "validation", subtype, code)
    if subtype == "SYNTAX_ERROR":
        assert set(err["position"]) == {"line", "column"}


def test_validation_error_over_get_is_400_with_retry_with(server):
    r = get_explore(server, ALICE, [("dataset", "workloads"), ("fields", "name,namspace")])
    err = assert_error(r, 400, "validation", "UNKNOWN_FIELD", "EX201")
    assert "namespace" in err["hint"]
    assert err["retry_with"] == {"dataset": "workloads", "fields": ["name", "namespace"]}
    # retry_with is a working exploration
    assert_rows(post_explore(server, ALICE, {**err["retry_with"], "limit": 2}))


def _same_but_name(a: dict[str, Any], b: dict[str, Any], name_a: str, name_b: str) -> None:
    assert json.dumps(without_ids(a), sort_keys=True) == \
        json.dumps(without_ids(b), sort_keys=True).replace(name_b, name_a)


@pytest.mark.parametrize("how", ["POST", "GET"])
def test_out_of_scope_dataset_reads_exactly_like_a_missing_one(server, how):
    def ask(dataset):
        if how == "POST":
            return post_explore(server, VERA, {"dataset": dataset, "fields": ["hostname"]})
        return get_explore(server, VERA, [("dataset", dataset), ("fields", "hostname")])

    hidden, missing = ask("hosts"), ask("hostz")
    err = assert_error(hidden, 400, "validation", "UNKNOWN_DATASET", "EX202")
    assert_error(missing, 400, "validation", "UNKNOWN_DATASET", "EX202")
    _same_but_name(hidden.json, missing.json, "hosts", "hostz")
    assert "hosts" not in err["hint"]  # vera's readable datasets only
    # alice, an analyst, may read hosts
    r = post_explore(server, ALICE, {"dataset": "hosts", "fields": ["hostname"], "limit": 3})
    assert assert_rows(r)["data"]["columns"] == ["hostname"]


def test_secret_column_reads_exactly_like_a_missing_one(server):
    secret = post_explore(server, ALICE, {"dataset": "hosts", "fields": ["hostname", "ssh_private_key"]})
    missing = post_explore(server, ALICE, {"dataset": "hosts", "fields": ["hostname", "ssh_private_kez"]})
    err = assert_error(secret, 400, "validation", "UNKNOWN_FIELD", "EX201")
    assert_error(missing, 400, "validation", "UNKNOWN_FIELD", "EX201")
    _same_but_name(secret.json, missing.json, "ssh_private_key", "ssh_private_kez")
    assert "ssh_private_key" not in err["hint"]


def test_viewer_over_the_field_budget_is_403(server):
    fields = ["name", "namespace", "cluster", "kind", "replicas", "created_at", "project_id", "workload_id",
              "name as a", "name as b", "name as c"]
    err = assert_error(post_explore(server, VERA, {"dataset": "workloads", "fields": fields}),
                       403, "policy", "QUERY_BUDGET_EXCEEDED", "EX401")
    assert "10" in err["hint"]
    # the same question is fine for an analyst
    assert post_explore(server, ALICE, {"dataset": "workloads", "fields": fields, "limit": 1}).status == 200


@pytest.mark.parametrize("how", ["POST", "GET"])
def test_heavy_dataset_without_a_filter_is_403(server, how):
    if how == "POST":
        r = post_explore(server, ALICE, {"dataset": "table_refs", "fields": ["file_path", "line"]})
    else:
        r = get_explore(server, ALICE, [("dataset", "table_refs"), ("fields", "file_path,line")])
    assert_error(r, 403, "policy", "QUERY_BUDGET_EXCEEDED", "EX406")
    # with a filter it runs
    ok = post_explore(server, ALICE, {"dataset": "table_refs", "fields": ["file_path", "line"],
                                      "filter": "access = 'write'", "limit": 2})
    assert ok.status == 200, ok.text


def test_time_budget_is_504(server, pg_dsn, demo):
    """Provoked without pg_sleep: a lock held elsewhere makes the exploration wait past its
    lock_timeout (part of the role's time budget), which the executor answers as the time budget."""
    import psycopg

    ds = demo.dataset("databases")
    body = {"dataset": "databases", "fields": ["name", "engine"], "limit": 2}
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f'LOCK TABLE "{ds.schema_name}"."{ds.table_name}" IN ACCESS EXCLUSIVE MODE')
        try:  # were the budget not enforced, the call would wait on the lock until the client gives up
            r = call(server, "POST", "/api/v1/explore", token=ALICE, body=body, timeout=30)
        finally:
            conn.rollback()
    err = assert_error(r, 504, "policy", "QUERY_BUDGET_EXCEEDED", "EX410")
    assert "5000 ms" in err["message"]
    # the lock is gone and the server (and its pool) still works
    assert_rows(post_explore(server, ALICE, body))


def test_database_down_is_503_without_the_dsn(down_server, demo):
    r = call(down_server, "GET", "/healthz")
    assert r.status == 200 and r.json["ok"] is True
    # answered within the pool's wait (2 s here), never held until the client gives up
    r = call(down_server, "POST", "/api/v1/explore", token=ALICE, timeout=30,
             body={"dataset": "workloads", "fields": ["name"], "limit": 1})
    err = assert_error(r, 503, "network", "UPSTREAM_UNAVAILABLE", "EX601")
    low = r.text.lower()
    for s in ("postgres", "host=", "socket", "/tmp", "connection refused", "no such file"):
        assert s not in low, (s, r.text)
    assert "retry" in err["hint"]
    # the GET form and a dry run need the database too
    assert_error(get_explore(down_server, ALICE, [("dataset", "workloads"), ("fields", "name")]),
                 503, "network", "UPSTREAM_UNAVAILABLE", "EX601")
    assert_error(post_explore(down_server, VERA, {"dataset": "workloads", "fields": ["name"], "dry_run": True}),
                 503, "network", "UPSTREAM_UNAVAILABLE", "EX601")
    # the catalog is the contract: it does not need the database
    r = call(down_server, "GET", "/api/v1/catalog", token=ALICE)
    assert r.status == 200 and r.json["data"]["role"] == "analyst"
    # auth still comes first
    assert_error(post_explore(down_server, "nope", {"dataset": "workloads", "fields": ["name"]}),
                 401, "auth", "AUTH_REQUIRED")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_database_down_over_mcp_is_a_tool_error(down_server, mode):
    with anyio.fail_after(60):
        async with mcp_client(down_server, mode, token=ALICE) as c:
            result = await c.call_tool("ontoos_explore", {"dataset": "workloads", "fields": ["name"]})
    record_tool_result(down_server, result, f"mcp {mode} down")
    assert result.is_error is True and result.structured_content is None
    env = json.loads(result.content[0].text)
    assert (env["error"]["type"], env["error"]["subtype"]) == ("network", "UPSTREAM_UNAVAILABLE")


@pytest.mark.parametrize("method, path, status", [
    ("GET", "/nope", 404),
    ("GET", "/api/v1/nope", 404),
    ("GET", "/api/v2/explore", 404),
    ("PUT", "/api/v1/explore", 405),
    ("DELETE", "/api/v1/explore", 405),
    ("POST", "/api/v1/catalog", 405),
    ("PATCH", "/mcp", 405),
    ("POST", "/healthz", 405),
])
def test_unknown_routes_and_methods_are_json_envelopes(server, method, path, status):
    r = call(server, method, path, token=ALICE, body={} if method in ("POST", "PUT", "PATCH") else None)
    err = assert_error(r, status, "validation", "INVALID_REQUEST", "EX102")
    assert r.headers["content-type"].startswith("application/json")
    assert "<html" not in r.text.lower()
    assert path in err["message"] and method in err["message"]
    assert "/api/v1/explore" in err["hint"]


@pytest.mark.parametrize("method, path, allowed", [
    ("PUT", "/api/v1/explore", {"GET", "POST"}),
    ("POST", "/api/v1/catalog", {"GET"}),
    ("POST", "/healthz", {"GET"}),
])
def test_405_names_the_allowed_methods(server, method, path, allowed):
    # RFC 9110 15.5.6: the origin server MUST generate an Allow header field in a 405 response
    r = call(server, method, path, token=ALICE, body={} if method != "GET" else None)
    assert r.status == 405
    assert "allow" in r.headers, f"no Allow header on a 405: {r.headers}"
    assert allowed <= {m.strip().upper() for m in r.headers["allow"].split(",")}


def _big_body(size: int) -> bytes:
    pad = "x" * size
    return json.dumps({"dataset": "workloads", "fields": ["name"], "filter": f"name = '{pad}'"}).encode()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_body_over_256_kib_is_refused_clearly(server, chunked):
    body = _big_body(300 * 1024)
    assert len(body) > 256 * 1024
    r = call(server, "POST", "/api/v1/explore", token=ALICE, body=body, chunked=chunked)
    assert r.status in (400, 413), (r.status, r.text)
    env = r.json
    assert env["ok"] is False and "data" not in env
    err = env["error"]
    text = (err["message"] + " " + err.get("hint", "")).lower()
    assert "large" in text or "bytes" in text, err
    assert "262144" in text or "256" in text, err


def test_a_chunked_body_under_the_limit_is_read(server):
    r = call(server, "POST", "/api/v1/explore", token=ALICE, chunked=True,
             body=json.dumps({**QUESTION, "fields": ["name", "count()"]}).encode())
    assert_rows(r)


@pytest.mark.parametrize("body", [
    b'{"dataset": "workloads", "fields": ["name"]',
    b'{"dataset": "workloads", "fields": ["name"], "limit": NaN}',
    b'{"dataset": "workloads", "fields": ["name"], "limit": Infinity}',
    b'{"dataset": "workloads", "dataset": "hosts", "fields": ["name"]}',
    b'[{"dataset": "workloads", "fields": ["name"]}]',
    b'"explore workloads fields name"',
    b"null",
    b"",
    b"\xff\xfe{}",
], ids=["truncated", "NaN", "Infinity", "duplicate keys", "array", "string", "null", "empty", "not utf-8"])
def test_malformed_json_is_400(server, body):
    r = call(server, "POST", "/api/v1/explore", token=ALICE, body=body)
    assert_error(r, 400, "validation", "INVALID_REQUEST", "EX102")


@pytest.mark.parametrize("params, needle", [
    ([("dataset", "workloads"), ("dataset", "hosts"), ("fields", "name")], "dataset"),
    ([("dataset", "workloads"), ("fields", "name"), ("limit", "2"), ("limit", "3")], "limit"),
    ([("dataset", "workloads"), ("fields", "name"), ("dry_run", "true"), ("dry_run", "false")], "dry_run"),
    ([("dataset", "workloads"), ("fields", "name"), ("bogus", "1")], "bogus"),
    ([("dataset", "workloads"), ("fields", "name"), ("relations", "containers")], "relations"),
    ([("dataset", "workloads"), ("fields", "name"), ("limit", "abc")], "limit"),
    ([("dataset", "workloads"), ("fields", "name"), ("limit", "1.5")], "limit"),
    ([("fields", "name")], "dataset"),
], ids=["dataset twice", "limit twice", "dry_run twice", "unknown parameter", "relations (plural)",
        "limit not an integer", "limit a decimal", "no dataset"])
def test_bad_query_strings_are_400(server, params, needle):
    err = assert_error(get_explore(server, ALICE, params), 400, "validation", "INVALID_REQUEST", "EX102")
    assert needle in err["message"]


# ================================================================ the caller's role comes from the token


def test_rest_role_comes_from_the_token(server):
    body = {"dataset": "workloads", "fields": ["name"], "limit": 1000}
    vera = assert_rows(post_explore(server, VERA, body))
    alice = assert_rows(post_explore(server, ALICE, body))
    rex = assert_rows(post_explore(server, REX, body))
    # each is clamped to its own role's budget (viewer 100, analyst 500, workloads' max_rows 1000)
    assert (vera["meta"]["limit"], alice["meta"]["limit"], rex["meta"]["limit"]) == (100, 500, 1000)
    assert len(vera["data"]["rows"]) == 100
    # the viewer cannot follow two relations; the analyst can
    two = {"dataset": "projects", "relations": ["workloads", "stats"], "fields": ["name"], "limit": 1}
    assert_error(post_explore(server, VERA, two), 403, "policy", "QUERY_BUDGET_EXCEEDED", "EX404")
    assert post_explore(server, ALICE, two).status == 200


# ================================================================ the catalog


@pytest.mark.parametrize("principal", list(PRINCIPALS))
def test_catalog_lists_only_the_callers_datasets_and_no_secret_columns(server, demo, principal):
    role, token = PRINCIPALS[principal]
    r = call(server, "GET", "/api/v1/catalog", token=token)
    assert r.status == 200, r.text
    data = r.json["data"]
    assert data["role"] == role
    readable = sorted(d.name for d in demo.readable_datasets(demo.role(role)))
    assert [d["name"] for d in data["datasets"]] == readable
    unreadable = sorted(set(demo.datasets) - set(readable))
    for name in unreadable:
        assert f'"{name}"' not in r.text
    never = {c for ds in demo.datasets.values() for c, col in ds.columns.items() if col.secret or col.hidden}
    for ds_name in readable:
        d = call(server, "GET", f"/api/v1/catalog?dataset={ds_name}", token=token)
        assert d.status == 200, d.text
        cols = [c["name"] for c in d.json["data"]["columns"]]
        assert cols == [c.name for c in demo.dataset(ds_name).readable_columns()]
        assert not set(cols) & never
        for name in never:
            assert f'"{name}"' not in d.text, (ds_name, name)
        for rel in d.json["data"]["relations"]:
            assert rel["to"] in readable
        assert "always_filter" not in d.text and '"is_deleted"' not in d.text


def test_catalog_out_of_scope_dataset_reads_like_a_missing_one(server):
    hidden = call(server, "GET", "/api/v1/catalog?dataset=hosts", token=VERA)
    missing = call(server, "GET", "/api/v1/catalog?dataset=hostz", token=VERA)
    assert_error(hidden, 400, "validation", "UNKNOWN_DATASET", "EX202")
    assert_error(missing, 400, "validation", "UNKNOWN_DATASET", "EX202")
    _same_but_name(hidden.json, missing.json, "hosts", "hostz")
    assert call(server, "GET", "/api/v1/catalog?dataset=hosts", token=ALICE).status == 200


# ================================================================ MCP over HTTP with the SDK client


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_mcp_tools_list(server, mode):
    with anyio.fail_after(30):
        async with mcp_client(server, mode, token=ALICE) as c:
            listed = await c.list_tools()
    assert [t.name for t in listed.tools] == TOOL_NAMES + DEMO_QUERY_TOOLS["analyst"]  # then the demo registry's
    for t in listed.tools:  # every tool reads only, but the one that files a request, and none destroys
        assert t.annotations.read_only_hint is (t.name != "ontoos_request_query")
        assert t.annotations.destructive_hint is False
        assert t.input_schema["type"] == "object" and t.output_schema is not None
        assert t.description


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_mcp_explore_success_matches_rest(server, mode):
    with anyio.fail_after(30):
        async with mcp_client(server, mode, token=ALICE) as c:
            result = await c.call_tool("ontoos_explore", QUESTION)
    record_tool_result(server, result, f"mcp {mode} explore")
    assert result.is_error is False
    env = result.structured_content
    assert env["ok"] is True and env["data"]["columns"] == ["name", "count()"] and env["data"]["rows"]
    assert json.loads(result.content[0].text) == env
    rest = assert_rows(post_explore(server, ALICE, QUESTION))
    assert env["data"] == rest["data"]
    assert env["meta"]["fingerprint"] == rest["meta"]["fingerprint"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_mcp_refusal_is_a_tool_error_with_the_envelope(server, mode):
    with anyio.fail_after(30):
        async with mcp_client(server, mode, token=ALICE) as c:
            result = await c.call_tool("ontoos_explore", {"dataset": "workloads", "fields": ["name", "namspace"]})
    record_tool_result(server, result, f"mcp {mode} refusal")
    assert result.is_error is True and result.structured_content is None
    env = json.loads(result.content[0].text)
    assert env["ok"] is False
    assert (env["error"]["subtype"], env["error"]["code"]) == ("UNKNOWN_FIELD", "EX201")
    assert env["error"]["retry_with"] == {"dataset": "workloads", "fields": ["name", "namespace"]}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_mcp_role_comes_from_the_token(server, mode):
    ask = {"dataset": "hosts", "fields": ["hostname", "provider"], "limit": 3}
    with anyio.fail_after(60):
        async with mcp_client(server, mode, token=VERA) as c:
            vera = await c.call_tool("ontoos_explore", ask)
            vera_catalog = await c.call_tool("ontoos_catalog", {})
        async with mcp_client(server, mode, token=ALICE) as c:
            alice = await c.call_tool("ontoos_explore", ask)
            alice_catalog = await c.call_tool("ontoos_catalog", {})
        async with mcp_client(server, mode, token=REX) as c:
            rex_catalog = await c.call_tool("ontoos_catalog", {})
    for label, res in (("vera", vera), ("alice", alice), ("vera catalog", vera_catalog),
                       ("alice catalog", alice_catalog), ("rex catalog", rex_catalog)):
        record_tool_result(server, res, f"mcp {mode} {label}")
    assert vera.is_error is True
    assert json.loads(vera.content[0].text)["error"]["subtype"] == "UNKNOWN_DATASET"
    assert alice.is_error is False and len(alice.structured_content["data"]["rows"]) == 3
    assert vera_catalog.structured_content["data"]["role"] == "reader"
    assert alice_catalog.structured_content["data"]["role"] == "analyst"
    assert rex_catalog.structured_content["data"]["role"] == "admin"
    assert "hosts" not in [d["name"] for d in vera_catalog.structured_content["data"]["datasets"]]
    assert "hosts" in [d["name"] for d in alice_catalog.structured_content["data"]["datasets"]]


def test_a_503_says_when_to_retry_as_a_429_does():
    from ontoos_explore.envelope import Answer
    from ontoos_explore.errors import UpstreamError
    from ontoos_explore.server.rest import answer_response

    r = answer_response(Answer.refusal(UpstreamError("no database connection is available", reason="POOL_TIMEOUT")))
    body = json.loads(r.body)
    assert r.status_code == 503 and r.headers["retry-after"] == "2" and body["meta"]["retry_after_s"] == 2
    assert body["error"]["hint"].startswith("this is temporary: retry in 2 s")


def test_readyz_is_503_when_the_database_cannot_be_reached_and_healthz_stays_alive(down_server, demo):
    r = call(down_server, "GET", "/readyz", timeout=30)
    assert r.status == 503 and r.json["ready"] is False and r.json["database"] == {"reachable": False}
    assert r.json["drift"]["checked_at"] is None and "could not be reached" in r.json["drift"]["error"]
    assert r.json["contract"] == {"loaded": True, "hash": demo.hash}
    assert call(down_server, "GET", "/healthz").status == 200


def test_doctor_checks_a_running_server_and_its_token(server, down_server, pg_dsn, tmp_path, capsys, monkeypatch):
    from ontoos_explore.cli import main

    monkeypatch.setenv("ONTOOS_DSN", pg_dsn)
    monkeypatch.setenv("ONTOOS_QUERIES", str(tmp_path / "none.yaml"))
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_text(ALICE + "\n")
    bad.write_text("not-a-token\n")

    def doctor(srv, token_file):
        code = main(["doctor", "--json", "--server", f"http://{srv.host}:{srv.port}", "--token-file", str(token_file)])
        report = json.loads(capsys.readouterr().out)
        return code, next(c for c in report["checks"] if c["name"] == "server")

    code, check = doctor(server, good)
    assert code == 0 and check["status"] == "ok" and check["details"][0]["token_accepted"] is True
    assert check["details"][0]["notice"]["contract_hash"] == check["summary"].split("contract ")[1].rstrip(")")
    code, check = doctor(server, bad)
    assert code == 2 and check["status"] == "fail" and "the token is refused (401)" in check["summary"]
    code, check = doctor(down_server, good)
    assert code == 2 and "not ready (503)" in check["summary"]
