"""Server, /mcp: the 2026-07-28 tools/call answered in place (`mcp_direct.Direct`) is the SDK's answer.

The endpoint is built as `ontoos serve --http` builds it (Tools + Explorer + Executor on a real pool
over the demo lakehouse, DNS-rebinding protection for a loopback address), and driven with the ASGI
messages uvicorn would send. Each request is answered twice: through the endpoint (which answers it
directly) and through the SDK's own stateless JSON entry (`MCPEndpoint.modern`); the two answers must
be the same but for what differs between any two calls (an exploration's id and time). A request the
direct path must not take is left alone (nothing sent) and the endpoint gives the SDK's answer.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY, SERVER_INFO_META_KEY
from mcp_types.jsonrpc import HEADER_MISMATCH, INVALID_PARAMS
from mcp_types.version import LATEST_MODERN_VERSION

from ontoos_explore.engine.executor import Executor
from ontoos_explore.governance.registry import Registry
from ontoos_explore.server.config import Principal
from ontoos_explore.server.mcp_http import MCPEndpoint, loopback_security
from ontoos_explore.server.mcp_server import CALLER, PRINCIPAL_KEY
from ontoos_explore.server.tools import Tools
from ontoos_explore.service import Explorer
from tests.envelopes import comparable
from tests.recorded import Trail

pytestmark = pytest.mark.anyio

PORT = 8765
HOST = f"127.0.0.1:{PORT}".encode()
ANALYST = Principal("alice", "analyst")
QUERY = {  # the contract's always-filters bound as a constant, as a registry entry must keep them
    "id": "workloads_in_namespace", "title": "Workloads of a namespace", "status": "approved",
    "description": "Names of the workloads in one namespace.", "read_sets": ["published"],
    "parameters": [{"name": "namespace", "type": "text", "description": "Kubernetes namespace",
                    "examples": ["prod"]}],
    "sql": 'SELECT "w"."name" AS "name" FROM "lake"."k8s_workloads" AS "w" INNER JOIN "lake"."gitlab_projects" '
           'AS "p" ON "p"."project_id" = "w"."project_id" WHERE "w"."namespace" = $1 AND "w"."is_deleted" = $2 '
           'AND "p"."is_deleted" = $2 ORDER BY "w"."name" LIMIT 101',
    "bind": ["namespace", {"value": False, "type": "boolean"}],
    "columns": ["name"],
    "max_rows": 100,
}


@pytest.fixture
async def endpoint(demo, pool, tmp_path):
    p, settings = pool
    (tmp_path / "queries.yaml").write_text(json.dumps({"queries": [QUERY]}), encoding="utf-8")
    registry = Registry.load(tmp_path / "queries.yaml", demo)
    tools = Tools(demo, Explorer(demo, Executor(p, settings)), registry, Trail())
    mcp = MCPEndpoint(tools, loopback_security("127.0.0.1", PORT))
    async with mcp.run():
        yield mcp


def message(name: Any, arguments: Any = None, *, ident: Any = 7, version: str = LATEST_MODERN_VERSION,
            method: str = "tools/call", meta: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "_meta": meta if meta is not None else {
        PROTOCOL_VERSION_META_KEY: version, CLIENT_CAPABILITIES_META_KEY: {}}}
    if arguments is not None:
        params["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}


def headers_for(msg: dict[str, Any], **change: str | None) -> list[tuple[bytes, bytes]]:
    """What the SDK's client sends with `msg`; `change`: a header replaced (None: left out)."""
    name = (msg.get("params") or {}).get("name")
    headers = {"host": HOST.decode(), "content-type": "application/json",
               "accept": "application/json, text/event-stream", "mcp-protocol-version": LATEST_MODERN_VERSION,
               "mcp-method": msg.get("method"), "mcp-name": name if isinstance(name, str) else None}
    headers.update({k.replace("_", "-"): v for k, v in change.items()})
    return [(k.encode(), v.encode()) for k, v in headers.items() if v is not None]


def scope_for(headers: list[tuple[bytes, bytes]], principal: Principal | None = ANALYST) -> dict[str, Any]:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/mcp", "raw_path": b"/mcp", "root_path": "", "query_string": b"", "headers": headers,
            "server": ("127.0.0.1", PORT), "client": ("127.0.0.1", 50000), PRINCIPAL_KEY: principal}


class Exchange:
    """One request's ASGI channel: the body given once, what was sent kept."""

    def __init__(self, body: bytes) -> None:
        self.body, self.read, self.sent = body, False, []

    async def receive(self) -> dict[str, Any]:
        if self.read:
            return {"type": "http.disconnect"}
        self.read = True
        return {"type": "http.request", "body": self.body, "more_body": False}

    async def send(self, msg: dict[str, Any]) -> None:
        self.sent.append(msg)

    @property
    def status(self) -> int:
        return next(m["status"] for m in self.sent if m["type"] == "http.response.start")

    @property
    def payload(self) -> dict[str, Any]:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body"))


async def through_endpoint(mcp: MCPEndpoint, msg: dict[str, Any], headers=None, principal=ANALYST) -> Exchange:
    ex = Exchange(json.dumps(msg).encode())
    await mcp(scope_for(headers or headers_for(msg), principal), ex.receive, ex.send)
    return ex


async def through_direct(mcp: MCPEndpoint, msg: dict[str, Any], principal=ANALYST) -> Exchange:
    ex = Exchange(b"")
    assert await mcp.direct.answer(scope_for(headers_for(msg), principal), ex.send, msg, principal) is True
    return ex


async def through_sdk(mcp: MCPEndpoint, msg: dict[str, Any], headers=None, principal=ANALYST) -> Exchange:
    ex = Exchange(json.dumps(msg).encode())
    token = CALLER.set(principal)  # as MCPEndpoint sets it for the SDK's schema lookup
    try:
        await mcp.modern.handle_request(scope_for(headers or headers_for(msg), principal), ex.receive, ex.send)
    finally:
        CALLER.reset(token)
    return ex


def same_result(result: dict[str, Any]) -> dict[str, Any]:
    """A tool result without what differs between two calls (the envelope's id and time, in both places)."""
    out = dict(result)
    out["content"] = [{**c, "text": comparable(json.loads(c["text"]))} for c in result["content"]]
    if "structuredContent" in out:
        out["structuredContent"] = comparable(result["structuredContent"])
    return out


CALLS = {
    "the JSON form": ("ontoos_explore", {"dataset": "workloads", "fields": ["name", "namespace"],
                                         "filter": "namespace = 'prod-fp'", "limit": 5}),
    "the text form": ("ontoos_explore", {"query": "explore workloads fields name where namespace = 'prod-fp' limit 3"}),
    "a refusal (a dataset out of reach)": ("ontoos_explore", {"dataset": "secrets", "fields": ["name"]}),
    "arguments that are not the tool's": ("ontoos_explore", {"datasett": "workloads"}),
    "no arguments at all": ("ontoos_catalog", None),
    "a named query's own tool": ("ontoos_q_workloads_in_namespace", {"namespace": "prod-fp"}),
    "a named query run by id": ("ontoos_run_query", {"id": "workloads_in_namespace",
                                                     "params": {"namespace": "prod-fp"}}),
}


@pytest.mark.parametrize("case", CALLS)
async def test_a_direct_answer_is_the_sdks_answer(endpoint, case):
    name, arguments = CALLS[case]
    msg = message(name, arguments)
    direct, sdk = await through_direct(endpoint, msg), await through_sdk(endpoint, msg)
    assert direct.status == sdk.status == 200
    assert dict(direct.sent[0]["headers"])[b"content-type"] == b"application/json"
    ours, theirs = direct.payload, sdk.payload
    assert ours["id"] == theirs["id"] == 7 and ours["jsonrpc"] == theirs["jsonrpc"] == "2.0"
    assert ours["result"]["_meta"][SERVER_INFO_META_KEY] == theirs["result"]["_meta"][SERVER_INFO_META_KEY]
    assert same_result(ours["result"]) == same_result(theirs["result"])
    assert ours["result"]["isError"] is (case.startswith(("a refusal", "arguments")))


async def test_a_string_id_and_non_ascii_text_come_back_as_sent(endpoint):
    msg = message("ontoos_explore", {"dataset": "workloads", "fields": ["name"], "filter": "name = 'zürich-ü'"},
                  ident="call-ü-1")
    direct, sdk = await through_direct(endpoint, msg), await through_sdk(endpoint, msg)
    assert direct.payload["id"] == sdk.payload["id"] == "call-ü-1"
    assert same_result(direct.payload["result"]) == same_result(sdk.payload["result"])


# Requests the direct path leaves to the SDK, and the SDK's answer to each: (message, headers changed,
# the status, the JSON-RPC error code or None for a result).
LEFT = {
    "another method": (message(None, method="tools/list"), {}, 200, None),
    "a tool the role may not see": (message("ontoos_q_nothing_of_yours", {}), {}, 400, INVALID_PARAMS),
    "arguments that are a list": (message("ontoos_explore", ["workloads"]), {}, 400, INVALID_PARAMS),
    "a name that is not a string": (message(5, {}), {}, 400, HEADER_MISMATCH),
    "Mcp-Method says another method": (message("ontoos_catalog"), {"mcp_method": "tools/list"}, 400, HEADER_MISMATCH),
    "Mcp-Name says another tool": (message("ontoos_catalog"), {"mcp_name": "ontoos_explore"}, 400, HEADER_MISMATCH),
    "the header's version is not the body's": (message("ontoos_catalog", version="2099-01-01"), {}, 400,
                                              HEADER_MISMATCH),
    "no per-request envelope": (message("ontoos_catalog", meta={}), {}, 400, INVALID_PARAMS),
    "a Host of another server": (message("ontoos_catalog"), {"host": "evil.example:8765"}, 421, None),
    "an Origin of another site": (message("ontoos_catalog"), {"origin": "http://evil.example"}, 403, None),
    "an Accept without JSON": (message("ontoos_catalog"), {"accept": "text/event-stream"}, 406, None),
}


@pytest.mark.parametrize("case", LEFT)
async def test_what_the_direct_path_does_not_take_is_the_sdks_to_answer(endpoint, case):
    msg, change, status, code = LEFT[case]
    headers = headers_for(msg, **change)
    ex = Exchange(b"")
    assert await endpoint.direct.answer(scope_for(headers), ex.send, msg, ANALYST) is False
    assert ex.sent == []  # nothing of an answer was sent: the SDK gives the whole of it
    answered = await through_endpoint(endpoint, msg, headers)
    assert answered.status == status
    if code is not None or status >= 400 and status != 406:
        payload = answered.payload
        if code is not None:
            assert payload["error"]["code"] == code
        else:  # the transport's refusals leave as JSON-RPC errors with the envelope (mcp_http.json_errors)
            assert payload["error"]["data"]["ok"] is False
    elif status == 200:
        assert "result" in answered.payload


async def test_a_duplicated_routing_header_is_the_sdks_to_refuse(endpoint):
    msg = message("ontoos_catalog")
    headers = headers_for(msg) + [(b"mcp-method", b"tools/call")]
    ex = Exchange(b"")
    assert await endpoint.direct.answer(scope_for(headers), ex.send, msg, ANALYST) is False
    answered = await through_endpoint(endpoint, msg, headers)
    assert (answered.status, answered.payload["error"]["code"]) == (400, HEADER_MISMATCH)


async def test_a_call_without_a_principal_is_not_answered_in_place(endpoint):
    assert endpoint.direct.takes(message("ontoos_catalog"), None) is None


async def test_a_kept_verdict_is_only_ever_its_own_requests(endpoint):
    """Every request above, good and bad, through one endpoint three times over: the verdicts the direct
    path keeps never let a request through that it would refuse, nor the other way round."""
    good = [message(*CALLS[case]) for case in ("the JSON form", "a named query's own tool", "no arguments at all")]
    for _ in range(3):
        for msg in good:
            ex = Exchange(b"")
            assert await endpoint.direct.answer(scope_for(headers_for(msg)), ex.send, msg, ANALYST) is True
            assert ex.status == 200
        refused = [(headers_for(msg, **change), msg) for msg, change, _, _ in LEFT.values()]
        catalog = message("ontoos_catalog")
        refused += [(headers_for(catalog, content_type="text/plain"), catalog),
                    (headers_for(catalog) + [(b"mcp-method", b"tools/call")], catalog)]
        for headers, msg in refused:
            ex = Exchange(b"")
            assert await endpoint.direct.answer(scope_for(headers), ex.send, msg, ANALYST) is False, headers
            assert ex.sent == []
    assert endpoint.direct._verdicts  # they were kept: the rounds after the first read them


async def test_a_large_request_is_checked_every_time(endpoint):
    msg = message("ontoos_catalog", meta={PROTOCOL_VERSION_META_KEY: LATEST_MODERN_VERSION,
                                          CLIENT_CAPABILITIES_META_KEY: {"x-" + "a" * 5000: {}}})
    ex = Exchange(b"")
    assert await endpoint.direct.answer(scope_for(headers_for(msg)), ex.send, msg, ANALYST) is True
    assert endpoint.direct._verdicts == {}


class Noting(Exchange):
    """An exchange that notes, as each message is sent, how many events the audit holds."""

    def __init__(self, body: bytes, audit: Trail) -> None:
        super().__init__(body)
        self.audit, self.noted = audit, []

    async def send(self, msg: dict[str, Any]) -> None:
        self.noted.append(len(self.audit.events))
        await super().send(msg)


async def test_a_direct_answer_leaves_after_its_audit_event_and_is_audited_once(endpoint):
    audit = endpoint.tools.audit
    for i, (name, arguments) in enumerate(CALLS.values()):
        msg = message(name, arguments)
        ex = Noting(json.dumps(msg).encode(), audit)
        await endpoint(scope_for(headers_for(msg)), ex.receive, ex.send)
        assert ex.status == 200 and ex.noted == [i + 1, i + 1], name  # audited before any of the answer left
        assert len(audit.events) == i + 1, name  # once
    assert [e.surface for e in audit.events] == ["mcp"] * len(CALLS)
    assert [e.error_code for e in audit.events] == [None, None, "EX202", "EX102", None, None, None]
