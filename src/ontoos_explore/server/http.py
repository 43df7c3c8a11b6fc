"""Server, HTTP: one Starlette app for MCP (streamable HTTP), the REST API and health.

    /mcp              MCP over streamable HTTP (bearer token)
    /api/v1/explore   POST the JSON form, or GET with a query string (bearer token)
    /api/v1/catalog   GET, ?dataset= to describe one (bearer token)
    /healthz          liveness, no token

Every answer is the envelope; the status code follows its error type
(`status_for`). The caller is resolved once, by `BearerAuth`, for every
route that needs one, and left in the ASGI scope for the MCP handlers.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import BudgetError, Codes, ExploreError, InputError, InternalError
from ..grammar.forms import from_flags, loads_strict
from .config import Authenticator, Principal
from .mcp_server import PRINCIPAL_KEY, build_server, http_principal
from ..service import Answer
from .tools import Tools

log = logging.getLogger("ontoos_explore.http")

MAX_BODY = 256 * 1024
SINGLE = ("dataset", "limit", "dry_run", "query")
MULTI = ("fields", "filter", "relation", "group_by", "order_by")


def status_for(envelope: dict[str, Any]) -> int:
    if envelope.get("ok"):
        return 200
    err = envelope["error"]
    if err["code"] == Codes.INPUT_TOO_LARGE.code:
        return 413
    if err["type"] == "validation":
        return 400
    if err["type"] == "auth":
        return 401 if err["subtype"] == "AUTH_REQUIRED" else 403
    if err["type"] == "policy":
        return 504 if err["code"] == Codes.TIME_BUDGET.code else 403
    if err["type"] == "network":
        return 503
    return 500


def envelope_response(envelope: dict[str, Any]) -> JSONResponse:
    status = status_for(envelope)
    headers = {"WWW-Authenticate": 'Bearer realm="ontoos-explore"'} if status == 401 else None
    return JSONResponse(envelope, status_code=status, headers=headers)


def error_response(e: ExploreError) -> JSONResponse:
    return envelope_response(e.to_envelope())


class BearerAuth:
    """ASGI middleware: resolve `Authorization: Bearer <token>` to a Principal, or answer 401."""

    def __init__(self, app, authenticator: Authenticator, open_paths: tuple[str, ...] = ("/healthz",),
                 on_refusal=None) -> None:
        self.app = app
        self.auth = authenticator
        self.open_paths = open_paths
        self.on_refusal = on_refusal  # called with (error, path) for the audit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        header = headers.get(b"authorization", b"")
        scheme, _, token = header.decode("latin-1").partition(" ")
        browser = scope["path"].startswith("/governance")
        if not header and browser:  # the dashboard: a cookie set by /governance/login
            token, scheme = _cookie(headers.get(b"cookie", b""), "ontoos_token"), "bearer"
        principal = self.auth.authenticate(token.strip()) if scheme.lower() == "bearer" else None
        if principal is None and browser and scope["method"] == "GET":
            return await RedirectResponse("/governance/login", status_code=303)(scope, receive, send)
        if principal is None:
            code = Codes.NO_TOKEN
            message = "a bearer token is required" if not header else "the bearer token is not valid"
            from ..errors import AuthError

            e = AuthError(code, message, hint="send Authorization: Bearer <token> "
                          "(tokens are issued in the server configuration)")
            if self.on_refusal is not None and scope["path"].startswith(("/mcp", "/api/")):
                self.on_refusal(e, scope["path"])  # a request for data; not a browser's stray fetch
            return await error_response(e)(scope, receive, send)
        scope[PRINCIPAL_KEY] = principal
        return await self.app(scope, receive, send)


def _cookie(raw: bytes, name: str) -> str:
    from http.cookies import SimpleCookie

    jar = SimpleCookie()
    try:
        jar.load(raw.decode("latin-1"))
    except Exception:  # a malformed cookie header is no cookie
        return ""
    return jar[name].value if name in jar else ""


def _principal(request: Request) -> Principal:
    return request.scope[PRINCIPAL_KEY]


def query_to_body(request: Request) -> tuple[Any, bool]:
    """The GET form: single-valued keys once, list keys repeatable; read like CLI flags."""
    params = request.query_params
    for key in params.keys():
        if key not in SINGLE + MULTI:
            raise InputError(Codes.INVALID_REQUEST, f"unknown query parameter '{key[:40]}'",
                             hint=f"parameters: {', '.join(SINGLE + MULTI)}")
    for key in SINGLE:
        if len(params.getlist(key)) > 1:
            raise InputError(Codes.INVALID_REQUEST, f"'{key}' is given more than once", hint=f"give '{key}' once")
    dry_run = params.get("dry_run", "false").lower() in ("1", "true", "yes")
    if "query" in params:
        return {"query": params["query"]}, dry_run
    if "dataset" not in params:
        raise InputError(Codes.INVALID_REQUEST, "'dataset' is required",
                         hint="e.g. /api/v1/explore?dataset=workloads&fields=name,namespace&filter=namespace=prod")
    limit = params.get("limit")
    if limit is not None:
        try:
            limit = int(limit)
        except ValueError:
            raise InputError(Codes.INVALID_REQUEST, "'limit' must be an integer", hint="e.g. limit=20") from None
    exploration = from_flags(params["dataset"], params.getlist("fields"), params.getlist("filter"),
                             params.getlist("relation"), params.getlist("group_by"), params.getlist("order_by"), limit)
    return exploration, dry_run


async def _read_body(request: Request) -> dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > MAX_BODY:
        raise BudgetError(Codes.INPUT_TOO_LARGE, f"the body is {declared} bytes", hint=f"send at most {MAX_BODY} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise BudgetError(Codes.INPUT_TOO_LARGE, "the body is too large", hint=f"send at most {MAX_BODY} bytes")
        chunks.append(chunk)
    body = loads_strict(b"".join(chunks))
    if not isinstance(body, dict):
        raise InputError(Codes.INVALID_REQUEST, "the body must be a JSON object",
                         hint='e.g. {"dataset": "workloads", "fields": ["name"]}')
    return body


def loopback_security(host: str, port: int):
    """DNS-rebinding protection for a server bound to loopback: only its own Host and Origin."""
    from mcp.server.transport_security import TransportSecuritySettings

    if host not in ("127.0.0.1", "localhost", "::1"):
        return None
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=[f"http://{h}" for h in hosts])


def build_app(tools: Tools, authenticator: Authenticator, lifespan=None, governance=None,
              security=None) -> Starlette:
    mcp_server = build_server(tools, http_principal)
    sessions = StreamableHTTPSessionManager(app=mcp_server, security_settings=security)

    async def explore(request: Request) -> JSONResponse:
        principal = _principal(request)
        try:
            if request.method == "POST":
                arguments = await _read_body(request)
            else:
                exploration, dry_run = query_to_body(request)
                answer = await tools.explore(exploration, principal, "rest", dry_run=dry_run)
                return envelope_response(answer.envelope)
        except ExploreError as e:
            tools.record(Answer(e.to_envelope(), error=e), principal, "rest", str(request.url.query)[:2000] or None)
            return error_response(e)
        answer = await tools.call("ontoos_explore", arguments, principal, surface="rest")
        return envelope_response(answer.envelope)

    async def catalog(request: Request) -> JSONResponse:
        args = {"dataset": request.query_params["dataset"]} if "dataset" in request.query_params else {}
        answer = await tools.call("ontoos_catalog", args, _principal(request), surface="rest")
        return envelope_response(answer.envelope)

    async def favicon(request: Request) -> Response:
        return Response(status_code=204)

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "contract_hash": tools.contract.hash})

    class MCPEndpoint:  # an ASGI app as a Route endpoint: /mcp exactly, no redirect
        async def __call__(self, scope, receive, send):
            await sessions.handle_request(scope, receive, send)

    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        e = InputError(Codes.INVALID_REQUEST, f"{request.method} {request.url.path[:80]}: {exc.detail}",
                       hint="routes: POST/GET /api/v1/explore, GET /api/v1/catalog, /mcp, /governance, /healthz")
        return JSONResponse(e.to_envelope(), status_code=exc.status_code, headers=getattr(exc, "headers", None))

    async def crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return JSONResponse(InternalError(reason="UNEXPECTED").to_envelope(), status_code=500)

    @contextlib.asynccontextmanager
    async def lifespan_(app):
        async with contextlib.AsyncExitStack() as stack:
            if lifespan is not None:
                await stack.enter_async_context(lifespan(app))
            await stack.enter_async_context(sessions.run())
            yield

    app = Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/favicon.ico", favicon, methods=["GET"]),
            Route("/api/v1/explore", explore, methods=["GET", "POST"]),
            Route("/api/v1/catalog", catalog, methods=["GET"]),
            Route("/mcp", MCPEndpoint(), methods=["GET", "POST", "DELETE"]),
            *(governance.routes() if governance is not None else []),
        ],
        exception_handlers={HTTPException: http_error, Exception: crash},
        lifespan=lifespan_,
    )
    def refused(e: ExploreError, path: str) -> None:
        surface = "mcp" if path.startswith("/mcp") else "rest"
        tools.record(Answer(e.to_envelope(), error=e), None, surface, None)

    app.add_middleware(BearerAuth, authenticator=authenticator, on_refusal=refused,
                       open_paths=("/healthz", "/favicon.ico", "/governance/login"))
    return app
