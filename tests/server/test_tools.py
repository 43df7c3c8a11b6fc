"""Server, the tools (server/tools.py): one entry point, its validation, its limits, its audit.

`Tools.call(name, arguments, principal, surface)` is the only way a tool runs: MCP (the same
`build_server` over stdio and streamable HTTP), REST POST, REST GET (whose query string becomes the
JSON form first) and the catalog all go through it. It validates the arguments with the pydantic
models tools/list publishes (the messages are the JSON-form reader's, which name the place), takes
the caller's rate limit first, and records every call once, a call cancelled half-way too.

Real PostgreSQL throughout (the demo lakehouse; a sleepy lake for the cancelled call), the real
Starlette app driven over ASGI in-process, the SDK's in-process MCP client. The audit sink is the
one interface `Tools` writes to (`record(event)`), kept in a list so what was recorded can be read.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from typing import Any

import psycopg
import pytest
from mcp import Client
from starlette.datastructures import QueryParams

from ontoos_explore.engine.executor import Executor
from ontoos_explore.engine.pool import open_pool
from ontoos_explore.engine.settings import Settings
from ontoos_explore.errors import Codes, InputError
from ontoos_explore.server.app import build_app
from ontoos_explore.server.config import Authenticator, Principal, RateLimit, RateLimiter, ServerConfig
from ontoos_explore.server.mcp_server import build_server, fixed
from ontoos_explore.server.query_string import catalog_arguments, explore_arguments
from ontoos_explore.server.tools import (
    TOOLS,
    CatalogInput,
    ExplainInput,
    ExploreInput,
    QueriesInput,
    RequestInput,
    RunQueryInput,
    StatsInput,
    Tools,
    input_schema,
    validate,
)
from ontoos_explore.service import Explorer
from tests import sleepy_lake
from tests.envelopes import comparable
from tests.recorded import Trail, answered

pytestmark = pytest.mark.anyio

ALICE = Principal("alice", "analyst")
TOKEN = "tools-test-token-" + "a" * 16
QUESTION = {"dataset": "workloads", "fields": ["name", "namespace"], "filter": "namespace = 'prod'", "limit": 2}


class Counting(Tools):
    """Tools that also note each call of the entry point: (name, surface, arguments)."""

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.calls: list[tuple[str, str, Any]] = []

    async def call(self, name, arguments, principal, surface="mcp", **kw):
        self.calls.append((name, surface, arguments))
        return await super().call(name, arguments, principal, surface, **kw)


@pytest.fixture
def tools(demo, pool):
    p, settings = pool
    return Counting(demo, Explorer(demo, Executor(p, settings)), None, Trail())


def app_for(tools: Tools, **principal: Any):
    config = ServerConfig.model_validate({"principals": {"alice": {
        "role": "analyst", "token_sha256": hashlib.sha256(TOKEN.encode()).hexdigest(), **principal}}})
    return build_app(tools, Authenticator(config, tools.contract))


async def asgi(app, method: str, path: str, *, query: str = "", body: bytes = b"",
               headers: dict[str, str] | None = None, on_send=None) -> tuple[int, dict[str, Any], int]:
    """One HTTP request through the ASGI app, in-process -> (status, JSON body, receive() calls);
    `on_send(message)`: called as each message is sent."""
    raw = [(b"host", b"testserver"), (b"authorization", f"Bearer {TOKEN}".encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    if body:
        raw += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": query.encode(), "root_path": "",
             "headers": raw, "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
    received, sent = [], []

    async def receive():
        received.append(1)
        if len(received) == 1:
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays

    async def send(message):
        if on_send is not None:
            on_send(message)
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    text = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(text), len(received)


def without_ids(env: dict[str, Any]) -> dict[str, Any]:
    return comparable(env)


# ================================================================ one entry point


async def test_every_surface_goes_through_tools_call_once(tools):
    assert not hasattr(Tools, "explore")  # no second path (the IR one): the GET form is the JSON form
    app = app_for(tools)
    posted = await asgi(app, "POST", "/api/v1/explore", body=json.dumps(QUESTION).encode())
    got = await asgi(app, "GET", "/api/v1/explore",
                     query="dataset=workloads&fields=name,namespace&filter=namespace%3Dprod&limit=2")
    catalog = await asgi(app, "GET", "/api/v1/catalog", query="dataset=workloads")
    async with Client(build_server(tools, fixed(ALICE), surface="mcp-stdio"), mode="legacy") as client:
        result = await client.call_tool("ontoos_explore", QUESTION)
    assert [(name, surface) for name, surface, _ in tools.calls] == [
        ("ontoos_explore", "rest"), ("ontoos_explore", "rest"), ("ontoos_catalog", "rest"),
        ("ontoos_explore", "mcp-stdio")]
    # the GET's query string reached the tools as the JSON form of the same question
    assert tools.calls[1][2] == {"dataset": "workloads", "fields": ["name", "namespace"],
                                 "filter": "namespace = 'prod'", "limit": 2}
    assert posted[0] == got[0] == catalog[0] == 200
    assert without_ids(got[1]) == without_ids(posted[1]) == without_ids(result.structured_content)
    assert catalog[1]["data"]["name"] == "workloads"
    # one event per call, each with its own id
    assert [e.surface for e in tools.audit.events] == ["rest", "rest", "rest", "mcp-stdio"]
    assert len({e.id for e in tools.audit.events}) == 4


async def test_a_refused_request_is_recorded_once_and_never_reaches_a_tool(tools):
    app = app_for(tools)
    status, env, _ = await asgi(app, "POST", "/api/v1/explore", body=b'{"dataset": "workloads", "dataset": "x"}')
    assert (status, env["error"]["code"]) == (400, "EX102") and "duplicate key" in env["error"]["message"]
    status, env, _ = await asgi(app, "GET", "/api/v1/explore", query="dataset=workloads&fields=name&limit=ten")
    assert (status, env["error"]["message"]) == (400, "'limit' must be an integer")
    assert tools.calls == []  # refused before the tool: the surface's own refusals
    assert tools.audit.codes() == [("rest", "EX102"), ("rest", "EX102")]


# ================================================================ validation: the published models, the pinned messages


@pytest.mark.parametrize("tool, arguments, code, message, hint", [
    ("ontoos_explore", {"dataset": "workloads", "fields": 7}, "EX102", "'fields' must be a list of strings", '"fields"'),
    ("ontoos_explore", {"dataset": "workloads", "fields": ["name", None]}, "EX102", "'fields' must be a list of strings",
     None),
    ("ontoos_explore", {"dataset": ["workloads"], "fields": ["name"]}, "EX103", "dataset must be a name", "ontoos_catalog"),
    ("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "limit": "5"}, "EX102", "'limit' must be an integer",
     None),
    ("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "dry_run": "yes"}, "EX102",
     "'dry_run' must be true or false", '"dry_run": true'),
    ("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "dry_run": 1}, "EX102",
     "'dry_run' must be true or false", None),
    ("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "filter": 5}, "EX102",
     "'filter' must be a predicate string", None),
    ("ontoos_catalog", {"dataset": 5}, "EX102", "'dataset' must be a string", '{"dataset": "workloads"}'),
    ("ontoos_catalog", {"dataset": "hosts", "sql": "select 1"}, "EX102", "ontoos_catalog has no argument 'sql'",
     "arguments: name, dataset"),
    ("ontoos_queries", {"all": True}, "EX102", "ontoos_queries has no argument 'all'", "arguments: id, domain, q"),
    ("ontoos_run_query", {"id": 5}, "EX102", "'id' must be a string", "ontoos_queries"),
    ("ontoos_run_query", {}, "EX102", "'id' must be a string", None),
    ("ontoos_run_query", {"id": "x", "params": [1]}, "EX208", "there are no named queries", None),  # params: the registry's
    ("ontoos_explore", [1, 2], "EX102", "arguments must be an object", None),
])
async def test_arguments_are_validated_with_the_messages_callers_know(tools, tool, arguments, code, message, hint):
    answer = await tools.call(tool, arguments, ALICE, "mcp")
    err = answer.envelope["error"]
    assert (err["code"], answer.status) == (code, 400), err
    assert err["message"].startswith(message), err
    if hint is not None:
        assert hint in err["hint"], err
    assert tools.audit.codes() == [("mcp", code)]


async def test_an_unknown_argument_is_named_with_did_you_mean_and_a_working_retry(tools):
    answer = await tools.call("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "limt": 2, "dry_run": True},
                              ALICE)
    err = answer.envelope["error"]
    assert err["message"] == "ontoos_explore has no argument 'limt'"
    assert err["hint"].startswith("did you mean 'limit'? arguments: dataset, fields, filter")
    assert err["retry_with"] == {"dataset": "workloads", "fields": ["name"], "limit": 2, "dry_run": True}
    again = await tools.call("ontoos_explore", err["retry_with"], ALICE)
    assert again.ok and again.envelope["data"]["plan"]["limit"] == 2  # still a dry run
    # two unknown keys: named, but no retry (which one was meant is a guess)
    two = await tools.call("ontoos_catalog", {"datset": "hosts", "x": 1}, ALICE)
    assert "did you mean 'dataset'" in two.envelope["error"]["hint"] and "retry_with" not in two.envelope["error"]


async def test_the_arguments_are_checked_whole_before_any_key_is_read(tools):
    """check_json first: a NUL in a key is refused as such, not echoed in a did-you-mean."""
    answer = await tools.call("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "\x00": 1}, ALICE)
    err = answer.envelope["error"]
    assert err["code"] == "EX101" and "\x00" not in json.dumps(answer.envelope) and "a key of the" in err["message"]


def test_validate_refuses_unknown_keys_first_then_fields_in_model_order():
    with pytest.raises(InputError) as caught:
        validate("ontoos_run_query", RunQueryInput, {"id": 5, "zzz": 1})
    assert caught.value.message == "ontoos_run_query has no argument 'zzz'"
    with pytest.raises(InputError) as caught:
        validate("ontoos_explore", ExploreInput, {"dry_run": "no", "fields": 3})
    assert caught.value.message == "'dry_run' must be true or false"  # fields is the reader's, later
    args = validate("ontoos_explore", ExploreInput, {"dataset": ["any"], "fields": 3, "dry_run": True})
    assert args.dry_run is True and args.fields == 3  # published as list[str], read by the JSON-form reader
    assert validate("ontoos_catalog", CatalogInput, {}).dataset is None


def test_the_published_schemas_are_the_models():
    """tools/list publishes each model's schema: the types of the fields the JSON-form reader reads
    (SkipValidation keeps them), strict booleans, and no extra keys."""
    explore = input_schema(ExploreInput)
    assert explore["additionalProperties"] is False
    assert explore["properties"]["fields"]["anyOf"] == [{"items": {"type": "string"}, "type": "array"}, {"type": "null"}]
    assert explore["properties"]["limit"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert explore["properties"]["dry_run"]["type"] == "boolean"
    assert {"$ref": "#/$defs/FilterObject"} == explore["properties"]["filter"]["anyOf"][1]["items"]
    queries = input_schema(QueriesInput)
    assert (set(queries["properties"]), queries.get("required", []), queries["additionalProperties"]) == \
        ({"id", "domain", "q"}, [], False)
    run_query = input_schema(RunQueryInput)  # a cursor alone asks its own question: no id needed with it
    assert (set(run_query["properties"]), run_query.get("required", [])) == ({"id", "params", "require", "cursor"}, [])
    assert [model for _, _, model in TOOLS.values()] == [CatalogInput, ExploreInput, QueriesInput, RunQueryInput,
                                                         ExplainInput, RequestInput, StatsInput]


# ================================================================ unknown tools, rate limits


async def test_an_unknown_tool_is_refused_and_recorded(tools):
    answer = await tools.call("ontoos_drop_everything", {}, ALICE, "rest")
    err = answer.envelope["error"]
    assert (err["code"], err["type"], err["subtype"]) == ("EX104", "validation", "CAPABILITY_NOT_FOUND")
    assert err["hint"].endswith("tools: " + ", ".join(TOOLS))
    near = await tools.call("ontoos_catalogue", {}, ALICE, "rest")
    assert near.envelope["error"]["hint"].startswith("did you mean 'ontoos_catalog'?")
    assert tools.audit.codes() == [("rest", "EX104"), ("rest", "EX104")]
    # with no principal, the token comes first
    anonymous = await tools.call("ontoos_drop_everything", {}, None, "mcp")
    assert (anonymous.envelope["error"]["code"], anonymous.status) == ("EX502", 401)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_the_rate_limit_comes_first_and_refills_on_its_clock(demo, pool):
    clock = Clock()
    p, settings = pool
    tools = Tools(demo, Explorer(demo, Executor(p, settings)), None, Trail(), limiter=RateLimiter(clock))
    limited = Principal("lim", "analyst", rate=RateLimit(1.0, 2))
    first = [await tools.call("ontoos_catalog", {}, limited) for _ in range(2)]
    assert all(a.ok for a in first)
    refused = await tools.call("ontoos_catalog", {"not": "even read"}, limited)  # before its arguments
    err = refused.envelope["error"]
    assert (err["code"], refused.status, refused.envelope["meta"]["retry_after_s"]) == ("EX412", 429, 1)
    assert err["message"].startswith("lim has used its rate limit of") and err["hint"].startswith("retry in 1 s")
    ticket, _ = await tools.admit(limited)  # refused: the bucket is empty, but a surface may pass its ticket on
    assert ticket.wait_s > 0
    ticket.wait_s = 0.0  # as a surface that took it while the bucket had a token would pass it
    assert (await tools.call("ontoos_catalog", {}, limited, admitted=ticket)).ok  # taken by the surface already
    clock.now += 1.0
    assert (await tools.call("ontoos_catalog", {}, limited)).ok
    assert [e.error_code for e in tools.audit.events] == [None, None, "EX412", None, None]


async def test_a_rate_limited_rest_call_is_refused_before_its_body_is_read(demo, pool):
    p, settings = pool
    tools = Counting(demo, Explorer(demo, Executor(p, settings)), None, Trail(), limiter=RateLimiter(Clock()))
    app = app_for(tools, rate_limit={"per_minute": 1})
    assert (await asgi(app, "POST", "/api/v1/explore", body=json.dumps(QUESTION).encode()))[0] == 200
    status, env, reads = await asgi(app, "POST", "/api/v1/explore", body=json.dumps(QUESTION).encode())
    assert (status, env["error"]["code"], reads) == (429, "EX412", 0)  # the body was never read
    assert [c[:2] for c in tools.calls] == [("ontoos_explore", "rest")]
    assert tools.audit.codes() == [("rest", None), ("rest", "EX412")]


# ================================================================ a call cancelled half-way


SLOW_SCHEMA, SLOW_PREFIX = "tools_slow", "ontoos_tt_"


async def test_a_cancelled_call_is_recorded_once_with_what_it_asked(pg_dsn):
    contract = sleepy_lake.install(pg_dsn, SLOW_SCHEMA, SLOW_PREFIX)
    settings = Settings(dsn=pg_dsn, pool_max=1, role_prefix=SLOW_PREFIX)
    p = await open_pool(pg_dsn, settings)
    try:
        tools = Tools(contract, Explorer(contract, Executor(p, settings)), None, Trail())
        task = asyncio.create_task(tools.call("ontoos_explore", {"dataset": "slow", "fields": ["id"], "limit": 100},
                                              Principal("pat", "patient"), "mcp"))
        deadline = time.monotonic() + 30
        while not _active(pg_dsn):
            assert time.monotonic() < deadline and not task.done(), "the slow call never started"
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task  # the cancellation goes on to the caller
        [event] = tools.audit.events
        assert (event.surface, event.error_code, event.error_subtype, event.reason) == (
            "mcp", "EX602", "CANCELLED", "CALL_CANCELLED")
        assert event.dataset == "slow" and event.exploration.startswith("explore slow fields id")
        assert (await tools.call("ontoos_explore", {"dataset": "things", "fields": ["id"], "limit": 1},
                                 Principal("pat", "patient"))).ok  # the one connection came back
    finally:
        await p.close()


def _active(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return bool(conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND query LIKE %s",
            (f'%"{SLOW_SCHEMA}"."slow_things"%',)).fetchone())


# ================================================================ the GET form is the JSON form


@pytest.mark.parametrize("query, arguments", [
    ("dataset=workloads&fields=name,namespace&filter=namespace=prod&limit=2",
     {"dataset": "workloads", "fields": ["name", "namespace"], "filter": "namespace = 'prod'", "limit": 2}),
    ("dataset=workloads&fields=name&fields=count()&relation=containers&group_by=name&order_by=-name&dry_run=true",
     {"dataset": "workloads", "fields": ["name", "count()"], "relations": ["containers"], "group_by": ["name"],
      "order_by": ["-name"], "dry_run": True}),
    ("dataset=workloads&fields=name&filter=namespace=it's&filter=replicas > 1",
     {"dataset": "workloads", "fields": ["name"], "filter": "namespace = 'it''s' and replicas > 1"}),
    ("query=explore hosts fields hostname&dry_run=no", {"query": "explore hosts fields hostname"}),
])
def test_the_get_form_becomes_the_json_form(query, arguments):
    assert explore_arguments(QueryParams(query)) == arguments


@pytest.mark.parametrize("query, message", [
    ("dataset=workloads&fields=name&bogus=1", "unknown query parameter 'bogus'"),
    ("dataset=a&dataset=b&fields=name", "'dataset' is given more than once"),
    ("dataset=workloads&fields=name&limit=1_0", "'limit' must be an integer"),
    ("dataset=workloads&fields=name&dry_run=maybe", "'dry_run' must be true or false"),
    ("query=explore hosts fields hostname&dataset=hosts", "'query' cannot be combined with 'dataset'"),
    ("fields=name", "'dataset' is required"),
])
def test_a_get_form_that_cannot_be_read_is_refused(query, message):
    with pytest.raises(InputError) as caught:
        explore_arguments(QueryParams(query))
    assert caught.value.message == message and caught.value.error_code is Codes.INVALID_REQUEST


def test_the_catalog_get_form():
    assert catalog_arguments(QueryParams("")) == {}
    assert catalog_arguments(QueryParams("dataset=hosts")) == {"dataset": "hosts"}
    assert catalog_arguments(QueryParams("name=namespace")) == {"name": "namespace"}
    with pytest.raises(InputError):
        catalog_arguments(QueryParams("datasets=hosts"))
    with pytest.raises(InputError) as e:
        catalog_arguments(QueryParams("name=a&name=b"))
    assert "'name' is given more than once" in e.value.message


def test_the_get_form_carries_a_freshness_requirement():
    got = explore_arguments(QueryParams("dataset=workloads&fields=name&max_age_s=3600&consistency=fixed_read"))
    assert got["require"] == {"max_age_s": 3600, "consistency": "fixed_read"} and got["dataset"] == "workloads"
    got = explore_arguments(QueryParams("query=explore workloads fields name&max_age_s=60"))
    assert got == {"query": "explore workloads fields name", "require": {"max_age_s": 60}}
    with pytest.raises(InputError) as e:
        explore_arguments(QueryParams("dataset=workloads&fields=name&max_age_s=an hour"))
    assert "whole number of seconds" in e.value.message


async def test_a_get_with_a_requirement_it_cannot_meet_is_refused(tools):
    form = explore_arguments(QueryParams("dataset=hosts&fields=hostname&max_age_s=3600"))
    answer = await tools.call("ontoos_explore", form, ALICE, "rest")
    assert answer.envelope["error"]["code"] == "EX701" and "no source feeds hosts" in answer.envelope["error"]["message"]


async def test_the_catalog_finds_a_name_through_tools(tools):
    found = await tools.call("ontoos_catalog", {"name": "Deployment"}, ALICE, "rest")
    assert found.ok and found.envelope["data"]["matches"][0]["kind"] == "enum_value"
    assert found.envelope["data"]["matches"][0]["column"] == "kind"


async def test_a_get_asks_exactly_what_the_same_post_asks(tools):
    form = explore_arguments(QueryParams("dataset=workloads&fields=name,namespace&filter=namespace=prod&limit=2"))
    via_get = await tools.call("ontoos_explore", form, ALICE, "rest")
    via_post = await tools.call("ontoos_explore", QUESTION, ALICE, "rest")
    assert via_get.ok and without_ids(via_get.envelope) == without_ids(via_post.envelope)
    assert via_get.compiled.fingerprint == via_post.compiled.fingerprint


async def test_a_principal_runs_at_most_its_queries_at_once_and_is_refused_at_once_past_them(pg_dsn):
    """One principal cannot hold the whole pool: past `max_in_flight`, a query is refused without
    waiting for a connection; other tools, other principals and later queries go on."""
    contract = sleepy_lake.install(pg_dsn, SLOW_SCHEMA, SLOW_PREFIX)
    settings = Settings(dsn=pg_dsn, pool_max=2, role_prefix=SLOW_PREFIX)
    p = await open_pool(pg_dsn, settings)
    pat, sam = Principal("pat", "patient", max_in_flight=1), Principal("sam", "patient", max_in_flight=1)
    try:
        tools = Tools(contract, Explorer(contract, Executor(p, settings)), None, Trail())
        slow = asyncio.create_task(tools.call("ontoos_explore", {"dataset": "slow", "fields": ["id"], "limit": 6}, pat))
        deadline = time.monotonic() + 30
        while not _active(pg_dsn):
            assert time.monotonic() < deadline and not slow.done(), "the slow call never started"
            await asyncio.sleep(0.02)
        assert tools.in_flight == {"pat": 1}
        second = await tools.call("ontoos_explore", {"dataset": "things", "fields": ["id"], "limit": 1}, pat, "rest")
        err = second.envelope["error"]
        assert (second.status, err["code"], second.error.reason) == (429, "EX412", "IN_FLIGHT")
        assert "pat is running 1 queries at once" in err["message"] and second.envelope["meta"]["retry_after_s"] == 1
        assert (await tools.call("ontoos_catalog", {}, pat)).ok  # not a query: not counted
        assert (await tools.call("ontoos_explore", {"dataset": "things", "fields": ["id"], "limit": 1}, sam)).ok
        assert (await slow).ok and tools.in_flight == {}
        assert (await tools.call("ontoos_explore", {"dataset": "things", "fields": ["id"], "limit": 1}, pat)).ok
        assert [e.error_code for e in tools.audit.events if e.principal == "pat"].count("EX412") == 1
    finally:
        await p.close()


def test_the_in_flight_cap_is_configured_per_server_and_per_principal(demo):
    config = ServerConfig.model_validate({"max_in_flight": 2, "principals": {
        "a": {"role": "analyst", "token_sha256": "a" * 64},
        "b": {"role": "analyst", "token_sha256": "b" * 64, "max_in_flight": 7}}})
    auth = Authenticator(config, demo)
    assert (auth.by_name("a").max_in_flight, auth.by_name("b").max_in_flight) == (2, 7)
    assert Authenticator(ServerConfig.model_validate({"principals": {"a": {
        "role": "analyst", "token_sha256": "a" * 64}}}), demo).by_name("a").max_in_flight == 4


# ---------------------------------------------------------------- a large request's event, built off the loop

async def test_a_large_source_asked_again_exactly_is_answered_and_recorded_without_the_worker(tools):
    """Handing work to the worker thread costs more than a large source asked again exactly (its query is
    in the cache's table of exact sources) and than the event of an answer with a query (a few fields):
    both are done inline, while a large source not seen before still compiles on the worker."""
    from ontoos_explore.offload import INLINE_SOURCE, off_loop

    asked = {**QUESTION, "filter": "name in (" + ", ".join(f"'n{i:03d}'" for i in range(150)) + ")"}
    assert len(asked["filter"]) > INLINE_SOURCE
    first = await tools.call("ontoos_explore", asked, ALICE, "rest")
    assert first.ok, first.envelope
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # keeps the one worker busy: whatever needs it waits
        held.set()
        release.wait(30)

    holding = asyncio.create_task(off_loop(hold))
    await asyncio.to_thread(held.wait, 30)
    try:
        again = await asyncio.wait_for(tools.call("ontoos_explore", dict(asked), ALICE, "rest"), 10)
        assert again.ok and again.envelope["data"]["rows"] == first.envelope["data"]["rows"]
        assert len(tools.audit.events) == 2 and tools.audit.events[1].outcome == "ok"
        other = {**asked, "filter": asked["filter"].replace("'n000'", "'n999'")}  # a new source: the worker's
        waiting = asyncio.create_task(tools.call("ontoos_explore", other, ALICE, "rest"))
        await asyncio.sleep(0.2)
        assert not waiting.done()
    finally:
        release.set()
        await holding
    assert (await waiting).ok and len(tools.audit.events) == 3


# a request refused before any query, large enough that its event (which renders it) is built off the loop
LARGE_REFUSED = {**QUESTION, "filter": " or ".join(f"name = 'n{i}'" for i in range(200)), "bogus": True}


async def test_a_large_requests_event_is_built_off_the_loop_and_queued_once_even_if_the_call_is_cancelled(tools):
    """The event of a large request (its exploration rendered) is built on the worker thread; a call
    cancelled while it is being built still gets its one event, queued on the loop when it is built,
    and its count."""
    from ontoos_explore.offload import INLINE_SOURCE, off_loop

    app_for(tools)  # its metrics
    asked = LARGE_REFUSED
    assert len(asked["filter"]) > INLINE_SOURCE
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # keeps the one worker busy, so the event waits for it
        held.set()
        release.wait(30)

    holding = asyncio.create_task(off_loop(hold))
    await asyncio.to_thread(held.wait, 30)
    call = asyncio.create_task(tools.call("ontoos_explore", asked, ALICE, "rest"))
    await asyncio.sleep(0.1)
    assert not call.done() and tools.audit.events == []  # answered, its event waiting for the worker
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    release.set()
    await holding
    for _ in range(100):
        if tools.audit.events:
            break
        await asyncio.sleep(0.02)
    [event] = tools.audit.events
    assert (event.surface, event.error_code) == ("rest", "EX102") and "bogus" in event.exploration
    assert answered(tools) == 1
    # not cancelled, the call returns once its event is queued
    answer = await tools.call("ontoos_explore", asked, ALICE, "rest")
    assert answer.error.code == "EX102" and len(tools.audit.events) == 2 and answered(tools) == 2


# ================================================================ sent first, recorded as the block ends


async def test_a_rest_answer_leaves_after_its_audit_event_and_before_its_count(tools):
    app = app_for(tools)  # its metrics too
    seen: list[tuple[int, float]] = []

    def at_body(message) -> None:  # what is recorded as the answer's last bytes leave (a kill then: still audited)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            seen.append((len(tools.audit.events), answered(tools)))

    requests = [("POST", "/api/v1/explore", "", json.dumps(QUESTION).encode(), 200),
                ("GET", "/api/v1/explore", "dataset=workloads&fields=name&limit=1", b"", 200),
                ("POST", "/api/v1/explore", "", b'{"dataset": "workloads", "dataset": "x"}', 400),  # the surface's own
                ("GET", "/api/v1/catalog", "dataset=workloads", b"", 200),
                ("GET", "/api/v1/queries", "", b"", 200),
                ("POST", "/api/v1/explore", "", json.dumps(LARGE_REFUSED).encode(), 400)]  # its event off the loop
    for i, (method, path, query, body, status) in enumerate(requests):
        got = await asgi(app, method, path, query=query, body=body, on_send=at_body)
        assert got[0] == status
        assert seen[-1] == (i + 1, i)  # sent: in the audit already, not yet counted
        assert (len(tools.audit.events), answered(tools)) == (i + 1, i + 1)  # returned: both, once
    assert tools.audit.codes() == [("rest", None), ("rest", None), ("rest", "EX102"), ("rest", None), ("rest", None),
                                   ("rest", "EX102")]
