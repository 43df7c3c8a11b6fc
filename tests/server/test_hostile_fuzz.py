"""Fuzzing the HTTP layer with a fixed budget: arbitrary methods, paths, query strings, headers
and bodies against the real app (uvicorn on loopback, the hardening server of
test_hostile_support), then arbitrary JSON-RPC messages to /mcp inside a real session.

Derandomized (the same requests in every run). Every answer must come within the timeout,
with a status below 500 (or the documented 503 and 504), as JSON (an envelope with a hint,
or a JSON-RPC message), except the documented non-JSON answers: the dashboard's HTML and
redirects under /governance, 204 for /favicon.ico, HEAD without a body, and /mcp's event
streams. No answer may carry a traceback, SQL, a server path, the DSN or a secret value, and
the server must log no traceback (checked when the fixture stops it).

Each fuzz test is a plain test around a hypothesis run: it counts what its own requests
got back and checks, at its end, that the fuzz reached past the walls it aims at (answers,
refusals of each kind), so none depends on another having run.
"""

from __future__ import annotations

import http.client
import json
import re
from collections import Counter
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import example, HealthCheck, given, settings
from hypothesis import strategies as st

from ontoos_explore import load_contract
from ontoos_explore.grammar.render import to_json_form
from tests.conftest import ROOT
from tests.grammar.test_fuzz_parser import WORDS, any_text, json_values, mutated_json, mutated_text, token_soup
from tests.properties.strategies import contract_explorations
from tests.server.test_hostile_support import start_hostile_server, token
from tests.server.test_http import assert_clean

DEMO = load_contract(ROOT / "contracts" / "demo.yaml")
demo_json = mutated_json(contract_explorations(DEMO), most=1)  # mostly sensible for the demo contract
demo_valid = contract_explorations(DEMO).map(to_json_form)  # sensible, unbroken (they still fail now and then)

FUZZ = dict(derandomize=True, deadline=None, database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large,
                                   HealthCheck.function_scoped_fixture])
DOCUMENTED_5XX = {503, 504}
TOOLS = ["ontoos_explore", "ontoos_catalog", "ontoos_queries", "ontoos_run_query", "ontoos_explain", "ontoos_request_query",
         "ontoos_stats"]
ROUTES = ["/api/v1/explore", "/api/v1/catalog", "/mcp", "/healthz", "/favicon.ico", "/governance",
          "/governance/login", "/governance/promote", "/api/v1/governance/report", "/api/v1/governance/recent",
          "/api/v1/", "/", "/api/v1/explore/", "/MCP", "/api/v2/explore"]
QUERY_KEYS = ["dataset", "fields", "filter", "relation", "group_by", "order_by", "limit", "dry_run", "query", "days"]


@pytest.fixture(scope="module")
def server(pg_dsn, tmp_path_factory):
    srv = start_hostile_server("fuzz", pg_dsn, tmp_path_factory.mktemp("fuzz-server"))
    yield srv
    srv.stop_cleanly()


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


header_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f"), max_size=40)
segment = st.one_of(st.sampled_from(["api", "v1", "explore", "catalog", "mcp", "..", ".", "", "%00", "governance"]),
                    any_text.map(lambda t: quote(encode(t), safe="")))
paths = st.one_of(st.sampled_from(ROUTES), st.sampled_from(ROUTES), st.lists(segment, max_size=5).map(lambda s: "/" + "/".join(s)))
query_values = st.one_of(st.sampled_from(WORDS + ["workloads", "name,namespace", "namespace=prod", "true", "5"]),
                         token_soup, mutated_text(), any_text)
queries = st.lists(st.tuples(st.one_of(st.sampled_from(QUERY_KEYS), any_text), query_values), max_size=6).map(
    lambda pairs: "&".join(quote(encode(k), safe="") + "=" + quote(encode(v), safe="") for k, v in pairs))
content_types = st.sampled_from([None, "application/json", "application/json; charset=utf-8", "text/plain",
                                 "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                                 "application/json; charset=latin-1", "application/vnd.x+json", "*/*", "", "json"])
authorizations = st.sampled_from(["fuzz", "fuzz", "fuzz", "vera", "dora", None, "junk", "basic", "two-spaces"])
bodies = st.one_of(
    st.none(),
    mutated_json().map(lambda b: encode(json.dumps(b, default=str))),
    json_values.map(lambda v: encode(json.dumps(v, default=str))),
    st.binary(max_size=300),
    st.one_of(token_soup, any_text).map(encode),
)


def auth_header(who: str | None) -> dict[str, str]:
    if who is None:
        return {}
    value = {"junk": "Bearer not-a-token", "basic": "Basic Zm9vOmJhcg==",
             "two-spaces": f"Bearer  {token('fuzz')}"}.get(who) or f"Bearer {token(who)}"
    return {"Authorization": value}


def send(srv, method: str, target: str, headers: dict[str, str], body: bytes | None):
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=20)
    try:
        try:
            conn.request(method, target, body=body, headers=headers)
        except (BrokenPipeError, ConnectionResetError):
            pass
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def check_json_answer(status: int, data: Any) -> None:
    if isinstance(data, dict) and data.get("jsonrpc") == "2.0":
        assert ("result" in data) != ("error" in data), data
        if "error" in data:
            assert isinstance(data["error"]["code"], int) and data["error"]["message"], data
            if isinstance(data["error"].get("data"), dict):
                check_json_answer(status, data["error"]["data"])
        elif isinstance(data["result"], dict) and data["result"].get("isError"):
            check_json_answer(400, json.loads(data["result"]["content"][0]["text"]))
        return
    assert isinstance(data, dict) and isinstance(data.get("ok"), bool), data
    if data["ok"] is False:
        err = data["error"]
        assert {"type", "subtype", "code", "message"} <= set(err), err
        assert err.get("hint"), err
        assert err["type"] in ("validation", "policy", "auth", "network", "internal"), err
        assert err["type"] != "internal" or status in DOCUMENTED_5XX, data  # never an internal error
    else:
        assert status == 200, (status, data)


def check_answer(srv, method: str, path: str, status: int, headers: dict[str, str], raw: bytes, request_text: str) -> None:
    assert status < 500 or status in DOCUMENTED_5XX, (method, path, status, raw[:300])
    text = raw.decode("utf-8")  # every answer is UTF-8
    assert_clean(srv, text, request_text, f"{method} {path[:60]}")
    ctype = headers.get("content-type", "")
    if method == "HEAD" or status in (202, 204, 304) and not raw or (300 <= status < 400 and not raw):
        return  # no body: HEAD, a notification accepted (202), no content, a redirect
    if path.startswith("/governance") and ctype.startswith("text/html"):
        return  # the dashboard: HTML pages (login, 403, refusals)
    if ctype.startswith("text/event-stream"):
        for line in re.split(r"\r\n|\r|\n", text):  # SSE's line ends only: not str.splitlines (U+0085, U+2028)
            if line.startswith("data:") and line[5:].strip():
                check_json_answer(status, json.loads(line[5:]))
        return
    assert ctype.startswith("application/json"), (method, path, status, headers, raw[:300])
    check_json_answer(status, json.loads(text))


ANY_REQUEST = dict(
    method=st.sampled_from(["GET", "GET", "POST", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "BREW"]),
    path=paths, query=queries, content_type=content_types, who=authorizations, body=bodies,
    extra=st.dictionaries(st.sampled_from(["X-Fuzz", "Accept", "Origin", "Cookie", "X-Forwarded-For", "Range",
                                           "If-None-Match", "Expect", "mcp-session-id", "mcp-protocol-version"]),
                          header_text, max_size=3))


def test_fuzz_any_request(server):
    """Anything at all: every route, method, header and body."""
    seen: Counter = Counter()

    @settings(max_examples=150, **FUZZ)
    @given(**ANY_REQUEST)
    # the wall of the role: a principal that is no reviewer asks for the reviewers' API (the floor below
    # must not hang on whether the generated examples happen to reach it)
    @example(method="GET", path="/api/v1/governance/report", query="", content_type=None, who="fuzz", body=None,
             extra={})
    def one(method, path, query, content_type, who, body, extra):
        if extra.get("Expect") is not None:
            extra["Expect"] = "100-continue" if "1" in extra["Expect"] else extra["Expect"]
        headers = {**extra, **auth_header(who)}
        if content_type is not None:
            headers["Content-Type"] = content_type
        target = path + ("?" + query if query else "")
        if method in ("GET", "HEAD") and body is not None and len(body) % 3:
            body = None  # mostly no body on GET, now and then one
        status, h, raw = send(server, method, target, headers, body)
        seen[status] += 1
        check_answer(server, method, path, status, h, raw, (body or b"").decode("utf-8", "replace") + " " + target)

    one()
    # past the router and the auth wall: refusals of the request, the token, the route, the method (which
    # other statuses the dashboard's routes answer with follows their design, not this test's draws)
    assert {400, 401, 404, 405} <= set(seen), seen


flag_queries = st.lists(st.tuples(st.sampled_from(QUERY_KEYS[:9]), query_values), min_size=1, max_size=6).map(
    lambda pairs: [("dataset", "workloads"), ("fields", "name")] + pairs if len(pairs) % 2 else pairs)


API_REQUEST = dict(how=st.sampled_from(["POST", "POST", "GET", "GET", "catalog"]),
                   body=st.one_of(demo_valid, demo_json, demo_json, mutated_json()),
                   pairs=flag_queries, content_type=st.sampled_from(["application/json"] * 5 + [None, "text/plain"]),
                   who=st.sampled_from(["fuzz"] * 6 + ["vera", "dora", None]))


def test_fuzz_the_api(server):
    """The API itself, with mostly valid credentials and content types: explorations almost right."""
    seen: Counter = Counter()

    @settings(max_examples=300, **FUZZ)
    @given(**API_REQUEST)
    # one of each kind the floor below asks for, whatever the draws (they vary with the hash seed of the
    # worker: sets of names are drawn from in their iteration order)
    @example(how="POST", body={"dataset": "workloads", "fields": ["name"]}, pairs=[("dataset", "workloads")],
             content_type="text/plain", who="fuzz")  # 415
    @example(how="POST", body={"dataset": "table_refs", "fields": ["file_path"]}, pairs=[("dataset", "workloads")],
             content_type="application/json", who="fuzz")  # 403: a heavy dataset without a filter
    @example(how="POST", body={"dataset": "workloads", "fields": ["name"]}, pairs=[("dataset", "workloads")],
             content_type="application/json", who=None)  # 401
    def one(how, body, pairs, content_type, who):
        headers = auth_header(who)
        if content_type is not None:
            headers["Content-Type"] = content_type
        if how == "POST":
            method, target, data = "POST", "/api/v1/explore", encode(json.dumps(body, default=str))
        else:
            query = "&".join(quote(encode(k), safe="") + "=" + quote(encode(v), safe="") for k, v in pairs)
            path = "/api/v1/explore" if how == "GET" else "/api/v1/catalog"
            if how == "catalog":
                query = "dataset=" + quote(encode(pairs[0][1]), safe="") if len(pairs) % 2 else ""
            method, target, data = "GET", path + ("?" + query if query else ""), None
        status, h, raw = send(server, method, target, headers, data)
        seen[status] += 1
        check_answer(server, method, target.split("?")[0], status, h, raw,
                     (data or b"").decode("utf-8", "replace") + " " + target)

    one()
    # explorations that ran, and refusals of every kind: validation, policy, auth, content type
    assert {200, 400, 401, 403, 415} <= set(seen) and seen[200] >= 20, seen


# ================================================================ JSON-RPC inside a real MCP session

ACCEPT = "application/json, text/event-stream"
PROTOCOL = "2025-11-25"


@pytest.fixture(scope="module")
def session(server) -> dict[str, str]:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}}
    headers = {"Accept": ACCEPT, "Content-Type": "application/json", **auth_header("fuzz")}
    status, h, raw = send(server, "POST", "/mcp", headers, json.dumps(init).encode())
    assert status == 200, raw[:300]
    headers["mcp-protocol-version"] = PROTOCOL
    if sid := h.get("mcp-session-id"):
        headers["mcp-session-id"] = sid
    status, _, raw = send(server, "POST", "/mcp", headers, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    assert status == 202, raw[:300]
    return headers


methods = st.sampled_from(["tools/list", "ping", "initialize", "resources/list", "prompts/list",
                           "completion/complete", "logging/setLevel", "notifications/cancelled", "server/discover",
                           "tools/Call", ""])
tool_arguments = st.one_of(demo_valid, demo_valid, demo_valid, demo_json, demo_json, mutated_json(), json_values,
                           st.fixed_dictionaries({}, optional={
    "dataset": st.one_of(st.sampled_from(["workloads", "hosts", "sleepy"]), any_text), "params": json_values,
    "id": st.one_of(st.sampled_from(["x", "workloads_in_namespace"]), any_text)}))
tool_calls = st.builds(
    lambda ident, name, args: {"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                               "params": {"name": name, "arguments": args}},
    st.integers(1, 10**6), st.sampled_from(TOOLS * 4 + ["ontoos_delete", ""]), tool_arguments)
messages = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0", 2])},
    optional={"id": st.one_of(st.integers(1, 10**6), any_text, st.none(), st.booleans()),
              "method": st.one_of(methods, any_text),
              "params": st.one_of(st.fixed_dictionaries({"name": st.one_of(st.sampled_from(TOOLS), any_text)},
                                                        optional={"arguments": tool_arguments}), json_values)})


def post_message(server, session, message, seen: Counter) -> None:
    body = encode(json.dumps(message, default=str))
    status, h, raw = send(server, "POST", "/mcp", session, body)
    seen[status] += 1
    if b'"isError":true' in raw:
        seen["tool refusal"] += 1
    elif b'"isError":false' in raw:
        seen["tool answer"] += 1
    check_answer(server, "POST", "/mcp", status, h, raw, body.decode("utf-8", "replace"))


def test_fuzz_mcp_tool_calls(server, session):
    seen: Counter = Counter()

    @settings(max_examples=200, **FUZZ)
    @given(message=tool_calls)
    def one(message):
        post_message(server, session, message, seen)

    one()
    # tool calls that ran, and tool calls refused as tool errors (how many of each follows the policy:
    # the draws are fixed, what the server answers to them is not this test's to pin)
    assert seen["tool answer"] >= 1 and seen["tool refusal"] >= 10, seen


def test_fuzz_mcp_messages(server, session):
    seen: Counter = Counter()

    @settings(max_examples=100, **FUZZ)
    @given(message=messages)
    def one(message):
        post_message(server, session, message, seen)

    one()
    assert 200 in seen and 400 in seen, seen  # answered messages, and refused ones


def test_after_a_fuzz_the_server_is_well(server, session):
    """A short fuzz of each kind, then the server must still answer: health, and a plain exploration."""
    seen: Counter = Counter()

    @settings(max_examples=20, **FUZZ)
    @given(message=messages)
    def one(message):
        post_message(server, session, message, seen)

    one()
    status, _, raw = send(server, "GET", "/healthz", {}, None)
    assert status == 200 and json.loads(raw)["ok"] is True
    status, _, raw = send(server, "POST", "/api/v1/explore", {"Content-Type": "application/json", **auth_header("fuzz")},
                          b'{"dataset": "workloads", "fields": ["name"], "limit": 2}')
    assert status == 200 and json.loads(raw)["meta"]["rows"] == 2
