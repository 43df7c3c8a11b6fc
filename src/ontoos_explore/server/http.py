"""Server, HTTP: one Starlette app for MCP (streamable HTTP), the REST API and health.

    /mcp              MCP over streamable HTTP (bearer token)
    /api/v1/explore   POST the JSON form, or GET with a query string (bearer token)
    /api/v1/catalog   GET, ?dataset= to describe one (bearer token)
    /healthz          liveness, no token

Every answer is the envelope; the status code follows its error type
(`status_for`). The caller is resolved once, by `BearerAuth`, for every
route that needs one, and left in the ASGI scope for the MCP handlers.

Hostile input is refused before it is read further: bodies over MAX_BODY
(413) or slower than the body timeout (408), a Content-Type that is not JSON
(415), malformed JSON, NaN and duplicate keys (400), and on /mcp the same
(as JSON-RPC errors carrying the envelope in `error.data`), plus batches. A
REST call is first taken from the caller's rate limit (429 with
Retry-After), and an exploration whose client disconnects is cancelled,
its query with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import AuthError, BudgetError, Codes, ExploreError, InputError, InternalError
from ..grammar.forms import from_flags, loads_strict
from .config import Authenticator, Principal
from .limits import AuthFloods, SessionCaps, flooded, too_many_sessions
from .mcp_server import PRINCIPAL_KEY, build_server, http_principal
from ..service import Answer
from .tools import Tools, cancelled, presentable

log = logging.getLogger("ontoos_explore.http")

MAX_BODY = 256 * 1024
BODY_TIMEOUT_S = 30.0  # a body must arrive within this (ONTOOS_BODY_TIMEOUT); slower is 408
SINGLE = ("dataset", "limit", "dry_run", "query")
MULTI = ("fields", "filter", "relation", "group_by", "order_by")
TRUE, FALSE = ("1", "true", "yes"), ("0", "false", "no")
INTEGER = re.compile(r"[+-]?[0-9]{1,4000}")  # ASCII digits only: int() would also take "５" or "1_0"
CLIENT_CLOSED = 499  # nginx's "client closed request": logged, never received
UNREAD_BODY = (408, 413, CLIENT_CLOSED)  # answered before the body was read: the connection cannot be reused


def status_for(envelope: dict[str, Any]) -> int:
    if envelope.get("ok"):
        return 200
    err = envelope["error"]
    if err["code"] == Codes.INPUT_TOO_LARGE.code:
        return 413
    if err["code"] == Codes.RATE_LIMITED.code:
        return 429
    if err["code"] == Codes.CANCELLED.code:
        return CLIENT_CLOSED
    if err["type"] == "validation":
        return 400
    if err["type"] == "auth":
        return 401 if err["subtype"] == "AUTH_REQUIRED" else 403
    if err["type"] == "policy":
        return 504 if err["code"] == Codes.TIME_BUDGET.code else 403
    if err["type"] == "network":
        return 503
    return 500


def envelope_response(envelope: dict[str, Any], status: int | None = None) -> JSONResponse:
    status = status or status_for(envelope)
    headers = {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="ontoos-explore"'
    if status == 429:
        headers["Retry-After"] = str(envelope.get("meta", {}).get("retry_after_s") or 1)
    if status in UNREAD_BODY:
        headers["Connection"] = "close"
    if not envelope.get("ok"):  # a refusal may echo the caller's text: encodable, and not too much of it
        envelope = presentable(envelope)
    return JSONResponse(envelope, status_code=status, headers=headers or None)


def error_response(e: ExploreError, status: int | None = None) -> JSONResponse:
    return envelope_response(e.to_envelope(), status)


class Refused(Exception):
    """A surface-level refusal with a status of its own (408, 415), not derived from the envelope."""

    def __init__(self, error: ExploreError, status: int) -> None:
        super().__init__(error.message)
        self.error, self.status = error, status


def json_media_type(value: str | None) -> bool:
    """application/json or application/*+json, in UTF-8 if a charset is given; absent is accepted."""
    if value is None or not value.strip():
        return True
    media, _, params = value.partition(";")
    media = media.strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        return False
    for param in params.split(";"):
        key, _, v = param.partition("=")
        if key.strip().lower() == "charset" and v.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return False
    return True


def not_json(value: str) -> Refused:
    shown = value.encode("ascii", "replace").decode("ascii")[:60]
    return Refused(InputError(Codes.INVALID_REQUEST, f"the body is sent as '{shown}', not as JSON",
                              hint="send Content-Type: application/json (UTF-8) with a JSON object, "
                              "e.g. curl -H 'Content-Type: application/json' -d '{\"dataset\": ...}'"), 415)


class BearerAuth:
    """ASGI middleware: resolve `Authorization: Bearer <token>` to a Principal, or answer 401
    (429 past the per-address limit of requests without a valid token: `AuthFloods`)."""

    def __init__(self, app, authenticator: Authenticator, open_paths: tuple[str, ...] = ("/healthz",),
                 on_refusal=None, floods: AuthFloods | None = None) -> None:
        self.app = app
        self.auth = authenticator
        self.open_paths = open_paths
        self.on_refusal = on_refusal  # called with (error, path) for the audit
        self.floods = floods

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            return await self.app(scope, receive, send)
        raw = scope.get("headers") or []
        headers = dict(raw)
        header = headers.get(b"authorization", b"")
        if sum(1 for k, _ in raw if k == b"authorization") > 1:  # which one counts is ambiguous: neither
            header = b"several"
        scheme, _, token = header.decode("latin-1").partition(" ")
        browser = scope["path"].startswith("/governance")
        if not header and browser:  # the dashboard: a cookie set by /governance/login
            token, scheme = _cookie(headers.get(b"cookie", b""), "ontoos_token"), "bearer"
        principal = self.auth.authenticate(token.strip(" \t")) if scheme.lower() == "bearer" else None  # OWS only
        if principal is None and browser and scope["method"] == "GET":
            return await RedirectResponse("/governance/login", status_code=303)(scope, receive, send)
        if principal is None:
            if self.floods is not None:
                wait = self.floods.admit((scope.get("client") or ("unknown",))[0])
                if wait > 0:
                    return await envelope_response(flooded(wait))(scope, receive, send)
            code = Codes.NO_TOKEN
            message = ("a bearer token is required" if not header else
                       "more than one Authorization header was sent" if header == b"several" else
                       "the bearer token is not valid")
            e = AuthError(code, message, hint="send one Authorization: Bearer <token> header "
                          "(tokens are issued in the server configuration)")
            if self.on_refusal is not None and scope["path"].startswith(("/mcp", "/api/")):
                self.on_refusal(e, scope["path"])  # a request for data; not a browser's stray fetch
            return await error_response(e)(scope, receive, send)
        scope[PRINCIPAL_KEY] = principal
        return await self.app(scope, receive, send)


class BodyLimit:
    """ASGI middleware: MAX_BODY and the body timeout for the routes that read a body on their own
    (the dashboard's forms, whatever is added later); /api/v1/explore and /mcp check theirs with
    envelopes of their own. A Content-Length over the limit is refused before anything is read;
    a chunked body is cut off (413) as it passes the limit; a slow one is a 408."""

    def __init__(self, app, own_paths: tuple[str, ...] = ("/api/v1/explore", "/mcp"),
                 timeout_s: float | None = None) -> None:
        self.app = app
        self.own_paths = own_paths
        self.timeout_s = timeout_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in self.own_paths:
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length", b"").decode("latin-1").strip()
        if declared.isdigit() and int(declared) > MAX_BODY:
            e = BudgetError(Codes.INPUT_TOO_LARGE, f"the body is {int(declared)} bytes",
                            hint=f"send at most {MAX_BODY} bytes")
            return await error_response(e)(scope, receive, send)
        timeout_s = self.timeout_s or float(os.environ.get("ONTOOS_BODY_TIMEOUT") or BODY_TIMEOUT_S)
        deadline = asyncio.get_running_loop().time() + timeout_s
        size, done = 0, False

        async def limited():
            nonlocal size, done
            if done:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise Refused(InputError(Codes.INVALID_REQUEST, f"the body did not arrive within {timeout_s:g} s",
                                         hint="send the whole body at once, with a Content-Length that matches it"),
                              408) from None
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                done = not message.get("more_body", False)
                if size > MAX_BODY:
                    raise BudgetError(Codes.INPUT_TOO_LARGE, "the body is too large", hint=f"send at most {MAX_BODY} bytes")
            return message

        return await self.app(scope, limited, send)


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
    dry_run = params.get("dry_run", "false").strip().lower()
    if dry_run not in TRUE + FALSE:
        raise InputError(Codes.INVALID_REQUEST, "'dry_run' must be true or false", hint="e.g. dry_run=true")
    dry_run = dry_run in TRUE
    if "query" in params:
        others = [k for k in params.keys() if k not in ("query", "dry_run")]
        if others:  # as the JSON form: one or the other, never a text silently winning over flags
            raise InputError(Codes.INVALID_REQUEST, f"'query' cannot be combined with '{others[0]}'",
                             hint="put the whole exploration in the text of 'query', or leave 'query' out")
        return {"query": params["query"]}, dry_run
    if "dataset" not in params:
        raise InputError(Codes.INVALID_REQUEST, "'dataset' is required",
                         hint="e.g. /api/v1/explore?dataset=workloads&fields=name,namespace&filter=namespace=prod")
    limit = params.get("limit")
    if limit is not None:
        if not INTEGER.fullmatch(limit.strip()):
            raise InputError(Codes.INVALID_REQUEST, "'limit' must be an integer", hint="e.g. limit=20")
        limit = int(limit)
    exploration = from_flags(params["dataset"], params.getlist("fields"), params.getlist("filter"),
                             params.getlist("relation"), params.getlist("group_by"), params.getlist("order_by"), limit)
    return exploration, dry_run


def catalog_args(request: Request) -> dict[str, Any]:
    params = request.query_params
    for key in params.keys():
        if key != "dataset":
            raise InputError(Codes.INVALID_REQUEST, f"unknown query parameter '{key[:40]}'",
                             hint="the catalog takes one parameter, dataset, e.g. /api/v1/catalog?dataset=workloads")
    if len(params.getlist("dataset")) > 1:
        raise InputError(Codes.INVALID_REQUEST, "'dataset' is given more than once", hint="give 'dataset' once")
    return {"dataset": params["dataset"]} if "dataset" in params else {}


async def read_limited(receive, declared: str | None, timeout_s: float) -> bytes:
    """The whole body from an ASGI `receive`, at most MAX_BODY bytes, within `timeout_s`."""
    if declared and declared.strip().isdigit() and int(declared) > MAX_BODY:
        raise BudgetError(Codes.INPUT_TOO_LARGE, f"the body is {int(declared)} bytes",
                          hint=f"send at most {MAX_BODY} bytes")
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":  # the caller left half-way: nobody to answer
                    raise Refused(cancelled("rest"), CLIENT_CLOSED)
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > MAX_BODY:
                    raise BudgetError(Codes.INPUT_TOO_LARGE, "the body is too large",
                                      hint=f"send at most {MAX_BODY} bytes")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        raise Refused(InputError(Codes.INVALID_REQUEST, f"the body did not arrive within {timeout_s:g} s",
                                 hint="send the whole body at once, with a Content-Length that matches it"),
                      408) from None


async def _read_body(request: Request, timeout_s: float) -> dict[str, Any]:
    content_type = request.headers.get("content-type")
    if not json_media_type(content_type):
        raise not_json(content_type)
    body = loads_strict(await read_limited(request.receive, request.headers.get("content-length"), timeout_s))
    if not isinstance(body, dict):
        raise InputError(Codes.INVALID_REQUEST, "the body must be a JSON object",
                         hint='e.g. {"dataset": "workloads", "fields": ["name"]}')
    return body


async def unless_gone(request: Request, work) -> Answer | None:
    """Await `work` (a coroutine), unless the client disconnects first: then cancel it (the executor
    cancels its query on the server; `Tools` records the call as CANCELLED) and answer None.
    Starlette does not cancel a handler on disconnect, so the ASGI channel is watched here."""
    task = asyncio.ensure_future(work)

    async def gone() -> None:
        try:
            while (await request.receive())["type"] != "http.disconnect":
                pass
        except Exception:  # a channel that cannot be watched: wait for the work alone
            await asyncio.Event().wait()

    watcher = asyncio.ensure_future(gone())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():  # the client left (or this handler itself was cancelled): stop the work
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    return None if task.cancelled() else task.result()


def rpc_payload(e: ExploreError, code: int = -32600) -> dict[str, Any]:
    """A JSON-RPC error for /mcp that carries the envelope (with its hint) in `error.data`."""
    env = presentable(e.to_envelope())
    message = env["error"]["message"] + (f"; {env['error']['hint']}" if env["error"].get("hint") else "")
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message, "data": env}}


MCP_HINTS = {
    400: "see the MCP streamable HTTP transport: POST one JSON-RPC message with Content-Type: application/json",
    403: "the Origin header must be this server's own address (DNS-rebinding protection)",
    421: "the Host header must be this server's own address (DNS-rebinding protection)",
}


def json_errors(send):
    """Wrap an ASGI `send` so that an error the MCP SDK answers in plain text (a bad Host or Origin,
    a bad Content-Type) leaves as a JSON-RPC error with the envelope, like every other answer."""
    held: dict[str, Any] | None = None
    chunks: list[bytes] = []

    async def wrapped(message):
        nonlocal held
        if message["type"] == "http.response.start":
            ctype = dict(message.get("headers") or []).get(b"content-type", b"")
            if message["status"] >= 400 and not ctype.startswith(b"application/json"):
                held = message
                return
        elif held is not None and message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            status = held["status"]
            text = b"".join(chunks).decode("utf-8", "replace").strip()[:200] or f"refused ({status})"
            e = InputError(Codes.INVALID_REQUEST, text, hint=MCP_HINTS.get(status, MCP_HINTS[400]))
            body = json.dumps(rpc_payload(e)).encode("utf-8")
            headers = [(k, v) for k, v in held.get("headers") or [] if k.lower() not in (b"content-type", b"content-length")]
            headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await send(message)

    return wrapped


def loopback_security(host: str, port: int):
    """DNS-rebinding protection for a server bound to loopback: only its own Host and Origin."""
    from mcp.server.transport_security import TransportSecuritySettings

    if host not in ("127.0.0.1", "localhost", "::1"):
        return None
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=[f"http://{h}" for h in hosts])


def build_app(tools: Tools, authenticator: Authenticator, lifespan=None, governance=None,
              security=None, body_timeout_s: float | None = None, mcp_sessions: int = 64) -> Starlette:
    mcp_server = build_server(tools, http_principal)
    sessions = StreamableHTTPSessionManager(app=mcp_server, security_settings=security)
    # the SDK keeps its sessions in a private table; without it (another SDK), nothing is counted
    instances = getattr(sessions, "_server_instances", None)
    caps = SessionCaps(mcp_sessions, (lambda sid: sid in instances) if isinstance(instances, dict) else
                       (lambda sid: False))
    if body_timeout_s is None:
        body_timeout_s = float(os.environ.get("ONTOOS_BODY_TIMEOUT") or BODY_TIMEOUT_S)

    async def rest(request: Request, read, run) -> JSONResponse:
        """One REST call: rate limit first, then read the request (`read`), then `run` it, watching
        for the client to leave. Every outcome, refusals of the request itself included, is recorded."""
        principal = _principal(request)
        refused = tools.admit(principal)
        if refused is not None:
            tools.record(refused, principal, "rest", None)
            return envelope_response(refused.envelope)
        try:
            parsed = await read()
        except (ExploreError, Refused) as x:
            e, status = (x.error, x.status) if isinstance(x, Refused) else (x, None)
            tools.record(Answer(e.to_envelope(), error=e), principal, "rest", str(request.url.query)[:2000] or None)
            return error_response(e, status)
        answer = await unless_gone(request, run(parsed, principal))
        if answer is None:
            return envelope_response(cancelled("rest").to_envelope())
        return envelope_response(answer.envelope)

    async def explore(request: Request) -> JSONResponse:
        if request.method == "POST":
            async def read():
                return await _read_body(request, body_timeout_s)

            def run(arguments, principal):
                return tools.call("ontoos_explore", arguments, principal, surface="rest", admitted=True)
        else:
            async def read():
                return query_to_body(request)

            def run(parsed, principal):
                exploration, dry_run = parsed
                return tools.explore(exploration, principal, "rest", dry_run=dry_run, admitted=True)
        return await rest(request, read, run)

    async def catalog(request: Request) -> JSONResponse:
        async def read():
            return catalog_args(request)

        def run(args, principal):
            return tools.call("ontoos_catalog", args, principal, surface="rest", admitted=True)

        return await rest(request, read, run)

    async def favicon(request: Request) -> Response:
        return Response(status_code=204)

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True, "contract_hash": tools.contract.hash})

    class MCPEndpoint:  # an ASGI app as a Route endpoint: /mcp exactly, no redirect
        async def __call__(self, scope, receive, send):
            if scope["method"] == "POST":
                receive, refused = await mcp_body(scope, receive)
                if refused is not None:
                    e, status, code = refused
                    tools.record(Answer(e.to_envelope(), error=e), scope.get(PRINCIPAL_KEY), "mcp", None)
                    headers = {"Connection": "close"} if status in UNREAD_BODY else None
                    return await JSONResponse(rpc_payload(e, code), status_code=status, headers=headers)(
                        scope, receive, send)
            principal = scope.get(PRINCIPAL_KEY)
            headers = dict(scope.get("headers") or [])
            if principal is not None and scope["method"] == "POST" and b"mcp-session-id" not in headers:
                if held := caps.full(principal.name):  # a request that would open one more session
                    e = too_many_sessions(principal.name, held)
                    tools.record(Answer(e.to_envelope(), error=e), principal, "mcp", None)
                    return await JSONResponse(rpc_payload(e, -32000), status_code=429)(scope, receive, send)
                send = _noting_session(send, principal.name)
            await sessions.handle_request(scope, receive, json_errors(send))

    def _noting_session(send, principal: str):
        async def noting(message):
            if message["type"] == "http.response.start":
                for k, v in message.get("headers") or []:
                    if k.lower() == b"mcp-session-id":
                        caps.opened(principal, v.decode("latin-1"))
            await send(message)
        return noting

    async def mcp_body(scope, receive):
        """Read and check a POST /mcp body before the SDK does: size, time, Content-Type, strict JSON
        (no NaN, no duplicate keys), one message (no batch). -> (a receive replaying it, refusal or None)."""
        headers = {k.lower(): v for k, v in scope.get("headers") or []}
        content_type = headers.get(b"content-type", b"").decode("latin-1")
        try:
            if not json_media_type(content_type) or not content_type:
                raise not_json(content_type or "nothing")
            body = await read_limited(receive, headers.get(b"content-length", b"").decode("latin-1"), body_timeout_s)
        except ExploreError as e:  # too large
            return receive, (e, 413, -32600)
        except Refused as r:  # not JSON (415), too slow (408), gone (499)
            return receive, (r.error, r.status, -32600)
        try:
            message = loads_strict(body)
        except ExploreError as e:
            e.hint = "send one JSON-RPC 2.0 message: a UTF-8 JSON object, without NaN or duplicate keys"
            return receive, (e, 413 if e.code == Codes.INPUT_TOO_LARGE.code else 400, -32700)
        problem, code = None, -32600
        if not isinstance(message, dict):
            problem = ("the body must be one JSON-RPC message (an object)",
                       "send one request per POST; batches are not supported")
        elif isinstance(ident := message.get("id"), bool) or not isinstance(ident, (str, int, type(None))):
            problem = ("a JSON-RPC id must be a string or an integer", 'e.g. "id": 1')
        else:
            try:  # the SDK's parser refuses these with a bare "Parse error": say which and why
                json.dumps(message, ensure_ascii=False, default=str).encode("utf-8")
            except UnicodeEncodeError:
                problem, code = ("the message has an unpaired surrogate escape (\\ud800-\\udfff) in a string",
                                 "JSON text must be valid Unicode: pair the surrogates, or remove the escape"), -32700
        if problem is not None:
            return receive, (InputError(Codes.INVALID_REQUEST, problem[0], hint=problem[1]), 400, code)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay, None

    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        e = InputError(Codes.INVALID_REQUEST, f"{request.method} {request.url.path[:80]}: {exc.detail}",
                       hint="routes: POST/GET /api/v1/explore, GET /api/v1/catalog, /mcp, /governance, /healthz")
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code in UNREAD_BODY:
            headers["Connection"] = "close"
        return JSONResponse(presentable(e.to_envelope()), status_code=exc.status_code, headers=headers or None)

    async def refused_error(request: Request, exc: ExploreError | Refused) -> JSONResponse:
        """A refusal a route did not catch (e.g. BodyLimit's, from inside a form read): its envelope."""
        return error_response(exc.error, exc.status) if isinstance(exc, Refused) else error_response(exc)

    async def crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return JSONResponse(InternalError(reason="UNEXPECTED").to_envelope(), status_code=500)

    def unrecorded(n: int, first, last, address: str) -> None:
        if tools.audit is not None:
            tools.audit.unrecorded("AUTH_FLOOD", n, first, last,
                                   f"{n} requests without a valid token from {address} were answered 429 "
                                   f"(over {floods.limit.describe()}) and not recorded one by one")

    limit = getattr(authenticator, "failure_limit", None)
    floods = AuthFloods(limit, unrecorded) if limit is not None else None

    @contextlib.asynccontextmanager
    async def lifespan_(app):
        async with contextlib.AsyncExitStack() as stack:
            if lifespan is not None:
                await stack.enter_async_context(lifespan(app))
            if floods is not None:  # exits before the lifespan's: the audit takes the open episodes
                stack.callback(floods.seal_all)
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
        exception_handlers={HTTPException: http_error, ExploreError: refused_error, Refused: refused_error,
                            Exception: crash},
        lifespan=lifespan_,
    )
    def refused(e: ExploreError, path: str) -> None:
        surface = "mcp" if path.startswith("/mcp") else "rest"
        tools.record(Answer(e.to_envelope(), error=e), None, surface, None)

    app.add_middleware(BearerAuth, authenticator=authenticator, on_refusal=refused, floods=floods,
                       open_paths=("/healthz", "/favicon.ico", "/governance/login"))
    app.add_middleware(BodyLimit, timeout_s=body_timeout_s)  # outermost: before auth, for open paths too
    return app
