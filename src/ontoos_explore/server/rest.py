"""Server, the REST API: its endpoints, and an `Answer` as an HTTP response.

    POST /api/v1/explore   the JSON form (bodies.read_json_object)
    GET  /api/v1/explore   the same question as a query string (query_string.explore_arguments)
    GET  /api/v1/catalog   ?dataset= to describe one, ?name= to find anything by name
    POST /api/v1/requests  a template request: {"question": ..., "dataset": ...}
    GET  /api/v1/queries   the named queries the caller may run (?domain=, ?q=)
    GET  /api/v1/queries/{id}       one of them
    POST /api/v1/queries/{id}/run   run it: {"params": {...}} (and "cursor", "require")
    GET  /api/v1/openapi.json       this API described (OpenAPI 3.1, ETag), no token
    GET  /.well-known/...  404, no token: MCP clients probing for OAuth fall back to the bearer header
    GET  /healthz          liveness, no token
    GET  /readyz           readiness: the database reachable, the contract loaded, drift (reported), no token
    GET  /favicon.ico      204, so a browser's own fetch is not a refusal to audit

A call first chooses what it answers as (`negotiate.choose`: a 406 before
anything else), then takes one from the caller's rate limit (before a body is
read), then reads its arguments, then goes through `Tools.call`, watching for
the client to leave (`unless_gone`: the exploration is cancelled, its query
with it). A refusal of the request itself is recorded once (`Tools.refuse`).

`answer_response` is the only translation of an envelope: as JSON, the status
of its row, `Retry-After` from `meta.retry_after_s`, `WWW-Authenticate` on a
401, `Connection: close` when the body was not read (408, 413, 499). A
successful answer asked as CSV is `negotiate.csv_response` (a dry run, which
has no rows, stays JSON), and a catalog answer whose ETag the client holds a
bodiless 304.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import request_response

from ..envelope import Answer
from ..jsontext import FastJSONResponse
from ..errors import (CLIENT_CLOSED, AuthError, Codes, ExploreError, InputError, InternalError, cancelled, flooded,
                      not_a_route, not_acceptable)
from ..offload import INLINE_SOURCE, off_loop
from .bodies import body_timeout_s, read_json_object
from .gone import unless_gone
from .mcp_server import PRINCIPAL_KEY
from .negotiate import CSV, JSON, choose, csv_response, etag, matches
from .query_string import catalog_arguments, explore_arguments, query_arguments, without_format
from .recording import counted_after_send
from .tools import Tools

log = logging.getLogger("ontoos_explore.http")

PING_EVERY_S = 1.0  # /readyz asks the database at most this often
LOOPBACK = ("127.0.0.1", "::1")  # the client addresses /metrics trusts (unless metrics_loopback is false)
UNREAD_BODY = (408, 413, CLIENT_CLOSED)  # answered before the body was read: the connection cannot be reused
ROUTES = ("POST/GET /api/v1/explore, GET /api/v1/catalog, GET /api/v1/queries[/{id}], POST /api/v1/queries/{id}/run, "
          "POST /api/v1/requests, GET /api/v1/openapi.json, /mcp, /governance, /healthz, /readyz, /metrics")

LISTING_PARAMS = ("domain", "q")  # GET /api/v1/queries (an id is a path of its own): the document says these


_TAG: tuple[int, str] | None = None  # (pid, tag): drawn again in a process forked after it was drawn


def process_tag() -> str:
    """A random tag of this process: which process of a deployment answered /healthz (it names nothing)."""
    global _TAG
    if _TAG is None or _TAG[0] != os.getpid():
        _TAG = (os.getpid(), secrets.token_hex(4))
    return _TAG[1]


def answer_response(answer: Answer, headers: dict[str, str] | None = None) -> JSONResponse:
    """An `Answer` over HTTP: its envelope (presentable already) with the status of its row."""
    status = answer.status
    headers = dict(headers or {})
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="ontoos-explore"'
    wait_s = answer.envelope.get("meta", {}).get("retry_after_s")
    if status == 429 or (status == 503 and wait_s):
        headers["Retry-After"] = str(wait_s or 1)
    if status in UNREAD_BODY:
        headers["Connection"] = "close"
    return FastJSONResponse(answer.envelope, status_code=status, headers=headers or None)


def rate_limit_headers(principal, ticket) -> dict[str, str]:
    """`RateLimit-Policy` and `RateLimit` (the IETF httpapi draft's structured fields) for a rate-limited
    principal: its bucket (q calls, refilled over w seconds) and what is left of it now (r calls, the
    next in t seconds). Nothing for a principal without a limit, or when the bucket was not counted."""
    limit = getattr(principal, "rate", None)
    if limit is None or ticket is None or ticket.remaining is None:
        return {}
    left = max(0.0, ticket.remaining)
    window = max(1, math.ceil(limit.burst / limit.per_second))
    reset = 0 if left >= 1 else max(1, math.ceil((1 - left) / limit.per_second))
    return {"RateLimit-Policy": f'"burst";q={limit.burst};w={window}',
            "RateLimit": f'"burst";r={math.floor(left)};t={reset}'}


class SentFirst:
    """A request/response endpoint as the ASGI app of its route, whose calls are counted in the metrics
    once its response is sent (`recording.counted_after_send`; Starlette sends the response the
    endpoint returns). Their audit events are queued before, as every call's."""

    def __init__(self, endpoint: Callable[[Request], Awaitable[Response]]) -> None:
        self.app = request_response(endpoint)
        self.__name__ = endpoint.__name__  # the route's name, as for the endpoint itself

    async def __call__(self, scope, receive, send) -> None:
        with counted_after_send():
            await self.app(scope, receive, send)


class Rest:
    """The REST endpoints over one `Tools`."""

    def __init__(self, tools: Tools, body_timeout: float | None = None, drain=None, authenticator=None) -> None:
        self.tools = tools
        self.authenticator = authenticator  # who may read /metrics from elsewhere than loopback
        self.floods = None  # limits.AuthFloods: tokens that do not authenticate, per address (set by build_app)
        self.drain = drain  # lifecycle.Drain: a process that drains is not ready
        self.body_timeout_s = body_timeout_s(body_timeout)
        self._pinged: tuple[float, dict[str, Any]] | None = None  # (when, what /readyz last found)

    async def call(self, request: Request, tool: str, read: Callable[[], Awaitable[dict[str, Any]]],
                   offered: tuple[str, ...] = (JSON,)) -> Response:
        """One REST call: what it may be answered as (`offered`: 406 before anything else when none is
        acceptable), the rate limit, then `read` the arguments, then the tool, unless the client leaves."""
        principal = request.scope[PRINCIPAL_KEY]
        asked = request.headers.get("accept")
        media = choose(asked, offered, request.query_params.get("format"))
        if media is None:
            wanted = request.query_params.get("format") or asked or ""
            return answer_response(self.tools.refuse(not_acceptable(wanted, offered), principal, "rest"))
        ticket, refused = await self.tools.admit(principal, tool != "ontoos_catalog")  # a catalog call rarely queries
        limits = rate_limit_headers(principal, ticket)
        if refused is not None:
            self.tools.record(refused, principal, "rest", None, tool)
            return answer_response(refused, limits)
        try:
            arguments = await read()
        except ExploreError as e:
            self.tools.admission.done(ticket)  # the slot it took goes back unused
            return answer_response(self.tools.refuse(e, principal, "rest", str(request.url.query)[:2000] or None),
                                   limits)
        answer = await unless_gone(request.scope, self.tools.call(tool, arguments, principal, "rest", admitted=ticket))
        if answer is None:
            return answer_response(Answer.refusal(cancelled("rest")))
        if media == CSV and answer.ok and "rows" in answer.envelope.get("data", {}):  # a dry run has none
            response = csv_response(answer.envelope)
            response.headers.update(limits)
            return response
        if tool == "ontoos_catalog" and answer.ok:  # what it says changes only with the contract (and drift)
            tag = etag(answer.envelope)
            if matches(request.headers.get("if-none-match"), tag):
                return Response(status_code=304, headers={"ETag": tag, **limits})
            return answer_response(answer, {"ETag": tag, **limits})
        return answer_response(answer, limits)

    async def explore(self, request: Request) -> Response:
        async def read() -> dict[str, Any]:
            if request.method == "POST":
                return await read_json_object(request, self.body_timeout_s)
            params = without_format(request.query_params)
            if len(request.scope.get("query_string", b"")) > INLINE_SOURCE:  # a long filter: parsed off the loop
                return await off_loop(lambda: explore_arguments(params))
            return explore_arguments(params)

        return await self.call(request, "ontoos_explore", read, (JSON, CSV))

    async def request_query(self, request: Request) -> JSONResponse:
        """POST /api/v1/requests: a template request ({"question": ..., "dataset": ...}), for reviewers."""
        async def read() -> dict[str, Any]:
            return await read_json_object(request, self.body_timeout_s)

        return await self.call(request, "ontoos_request_query", read)

    async def catalog(self, request: Request) -> JSONResponse:
        async def read() -> dict[str, Any]:
            return catalog_arguments(without_format(request.query_params))

        return await self.call(request, "ontoos_catalog", read)

    async def queries(self, request: Request) -> JSONResponse:
        """GET /api/v1/queries: ontoos_queries' listing (?domain=, ?q=)."""
        async def read() -> dict[str, Any]:
            return query_arguments(without_format(request.query_params), LISTING_PARAMS)

        return await self.call(request, "ontoos_queries", read)

    async def query(self, request: Request) -> JSONResponse:
        """GET /api/v1/queries/{id}: one named query (data.query), refused as unknown when not the caller's."""
        async def read() -> dict[str, Any]:
            query_arguments(without_format(request.query_params), ())
            return {"id": request.path_params["id"]}

        return await self.call(request, "ontoos_queries", read)

    async def run_query(self, request: Request) -> JSONResponse:
        """POST /api/v1/queries/{id}/run: {"params": {...}} (and cursor, require), run as ontoos_run_query."""
        async def read() -> dict[str, Any]:
            body = await read_json_object(request, self.body_timeout_s)
            if "id" in body:
                raise InputError(Codes.INVALID_REQUEST, "the body of a run has no 'id'",
                                 hint="the query's id is in the path: POST /api/v1/queries/{id}/run with "
                                      '{"params": {...}}')
            return {**body, "id": request.path_params["id"]}

        return await self.call(request, "ontoos_run_query", read, (JSON, CSV))

    async def openapi(self, request: Request) -> Response:
        """GET /api/v1/openapi.json: the document, or 304 when If-None-Match names its ETag."""
        from .. import __version__
        from .openapi import document, document_etag

        body = document(__version__)
        tag = document_etag(body)
        headers = {"ETag": tag, "Cache-Control": "no-cache"}
        if matches(request.headers.get("if-none-match"), tag):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    async def well_known(self, request: Request) -> JSONResponse:
        """Any /.well-known/ path: 404 without asking for a token (this server does not do OAuth)."""
        return answer_response(Answer.refusal(not_a_route(request.method, request.url.path, "Not Found", 404,
                                                          ROUTES)))

    async def healthz(self, request: Request) -> JSONResponse:
        """Alive: the process answers (nothing else is asked)."""
        lake = self.tools.lake
        return JSONResponse({"ok": True, "alive": True, "process": process_tag(), "contract_hash": self.tools.contract.hash,
                             "schema_drift": lake.drift.drifted, "_notice": dict(lake.notice)})

    async def readyz(self, request: Request) -> JSONResponse:
        """Ready: the database answers, the contract is loaded and the process is not draining (503
        otherwise: `draining` says which). Drift is reported, never
        fatal, as whether there is any: anyone may ask, so nothing of what drifted is shown (`ontoos doctor`
        lists it). The database is asked at most once a second, however often this is."""
        lake = self.tools.lake
        database = await self._database()
        drift = lake.drift
        draining = self.drain is not None and self.drain.draining
        ready = database["reachable"] and not draining
        body = {"ok": ready, "ready": ready, "draining": draining, "database": database,
                "contract": {"loaded": True, "hash": self.tools.contract.hash},
                "drift": {"checked_at": drift.checked_at.isoformat() if drift.checked_at else None,
                          "drifted": drift.drifted, **({"error": drift.error} if drift.error else {})},
                "_notice": dict(lake.notice)}
        return JSONResponse(body, status_code=200 if ready else 503)

    async def _database(self) -> dict[str, Any]:
        now = time.monotonic()
        if self._pinged is None or now - self._pinged[0] > PING_EVERY_S:
            found = await self.tools.explorer.executor.ping() if self.tools.explorer else {"reachable": False}
            self._pinged = (time.monotonic(), {k: v for k, v in found.items() if k != "version"})
        return self._pinged[1]

    async def metrics(self, request: Request) -> Response:
        """The Prometheus text (`metrics.py`), for loopback (unless the configuration says otherwise) or a
        principal marked `metrics`; anyone else is refused 403 (recorded)."""
        metrics = self.tools.metrics
        host = request.client.host if request.client else ""
        allowed = host in LOOPBACK and getattr(self.authenticator, "metrics_loopback", True)
        sent = request.headers.getlist("authorization")
        if not allowed and self.authenticator is not None:
            principal = self.authenticator.bearer(sent)
            allowed = principal is not None and principal.metrics
            if principal is None and sent and self.floods is not None:  # a token guessed here is limited too
                wait = await self.floods.take(host or "unknown")
                if wait > 0:
                    return answer_response(Answer.refusal(flooded(wait)))
        if metrics is None or not allowed:
            e = AuthError(Codes.METRICS_DENIED, "/metrics is for the operators",
                          hint="read it from the server's own machine, or with the token of a principal marked "
                               "metrics: true in the server configuration")
            return answer_response(self.tools.refuse(e, None, "rest"))
        metrics.sample(self.tools)
        return Response(metrics.exposition(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def favicon(self, request: Request) -> Response:
        return Response(status_code=204)


# ---------------------------------------------------------------- the app's exception handlers


async def no_route(request: Request, exc: HTTPException) -> JSONResponse:
    """Starlette's 404 and 405 (its Allow header kept), as envelopes."""
    e = not_a_route(request.method, request.url.path, exc.detail, exc.status_code, ROUTES)
    return answer_response(Answer.refusal(e), dict(getattr(exc, "headers", None) or {}))


async def refused(request: Request, exc: ExploreError) -> JSONResponse:
    """A refusal a route did not catch (e.g. BodyLimit's, from inside a form read): its envelope."""
    return answer_response(Answer.refusal(exc))


async def crash(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s", request.url.path)
    return answer_response(Answer.refusal(InternalError(reason="UNEXPECTED")))
