"""Server, ASGI middleware: who is asking (`BearerAuth`), and how much of a body is read (`BodyLimit`).

`BearerAuth` resolves `Authorization: Bearer <token>` (or, on the dashboard's
/governance pages only, its sign-in cookie) to a `Principal` and leaves it in
the ASGI scope (`PRINCIPAL_KEY`) for the routes and the MCP handlers. Without
one: a browser's GET of a dashboard page is sent to /governance/login; past
the per-address limit of requests without a valid token (`AuthFloods`) the
answer is 429 (FLOODED), unrecorded; else 401 (NO_TOKEN, or BAD_COOKIE for a
sign-in cookie that does not sign in), recorded for /mcp and /api/ paths.
Two Authorization headers are refused, whichever of them is valid. Only
"http" scopes are authenticated and passed on, and "lifespan" (the app's
start and stop); any other (a "websocket" one: closed, which its server
answers 403) never reaches the app, whatever it carries.

`BodyLimit` holds MAX_BODY and the body timeout on every route that reads a
body on its own (the dashboard's forms); /api/v1/explore and /mcp check their
own bodies with envelopes of their own (`bodies.read_limited`).
"""

from __future__ import annotations

import asyncio

from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.responses import RedirectResponse

from ..envelope import Answer
from ..errors import ExploreError, bad_cookie, body_too_large, body_too_slow, flooded, no_token
from .bodies import MAX_BODY, body_timeout_s, declared_too_large
from .config import Authenticator
from .limits import AuthFloods
from .mcp_server import PRINCIPAL_KEY
from .rest import answer_response
from .sessions import COOKIE  # "ontoos_session": set by /governance/login, read on /governance paths only



class BearerAuth:
    """ASGI middleware: the caller, or the refusal. `on_refusal(error, path)` records a 401 (-> its Answer)."""

    def __init__(self, app, authenticator: Authenticator, open_paths: tuple[str, ...] = ("/healthz",),
                 on_refusal=None, floods: AuthFloods | None = None, sessions=None,
                 open_prefixes: tuple[str, ...] = ()) -> None:
        self.app = app
        self.sessions = sessions  # a session id -> its Principal, or None (Governance.principal_for_session)
        self.auth = authenticator
        self.open_paths = open_paths
        self.open_prefixes = open_prefixes  # whole trees without a token (/.well-known/: always a 404)
        self.on_refusal = on_refusal
        self.floods = floods

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, send)
        if scope["type"] != "http":  # no route takes a WebSocket (or anything else): never the app's
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return None
        if scope["path"] in self.open_paths or scope["path"].startswith(self.open_prefixes):
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        sent = headers.getlist("authorization")
        if sent == [""]:  # an empty header is no header (the dashboard's cookie may still sign in)
            sent = []
        browser = scope["path"].startswith("/governance")
        cookie = cookie_parser(headers.get("cookie", "")).get(COOKIE) if browser and not sent else None
        principal = None
        if len(sent) == 1:  # two: which one counts is ambiguous (a proxy may check one, the app the other)
            principal = self.auth.bearer(sent)
        elif cookie is not None:
            principal = self.sessions(cookie) if self.sessions is not None else None
        if principal is not None:
            scope[PRINCIPAL_KEY] = principal
            return await self.app(scope, receive, send)
        if browser and scope["method"] == "GET":
            return await RedirectResponse("/governance/login", status_code=303)(scope, receive, send)
        if self.floods is not None and (wait := await self.floods.take((scope.get("client") or ("unknown",))[0])) > 0:
            return await answer_response(Answer.refusal(flooded(wait)))(scope, receive, send)
        e = _refusal(sent, cookie)
        answer = Answer.refusal(e)
        if self.on_refusal is not None and scope["path"].startswith(("/mcp", "/api/")):
            answer = self.on_refusal(e, scope["path"])  # a request for data; not a browser's stray fetch
        return await answer_response(answer)(scope, receive, send)


def _refusal(sent: list[str], cookie: str | None) -> ExploreError:
    if len(sent) > 1:
        return no_token("more than one Authorization header was sent")
    if sent:
        return no_token("the bearer token is not valid")
    return bad_cookie() if cookie is not None else no_token()


class BodyLimit:
    """ASGI middleware: a Content-Length over MAX_BODY is refused (413) before anything is read; a
    chunked body is cut off (413) as it passes the limit; one slower than the timeout is a 408.
    Inside a route the refusals are raised (`ExploreError`), for the route or the app's handler."""

    def __init__(self, app, own_paths: tuple[str, ...] = ("/api/v1/explore", "/mcp"),
                 timeout_s: float | None = None) -> None:
        self.app = app
        self.own_paths = own_paths
        self.timeout_s = timeout_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in self.own_paths:
            return await self.app(scope, receive, send)
        if (declared := declared_too_large(Headers(scope=scope).get("content-length"))) is not None:
            return await answer_response(Answer.refusal(body_too_large(MAX_BODY, declared)))(scope, receive, send)
        timeout_s = body_timeout_s(self.timeout_s)
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
                raise body_too_slow(timeout_s) from None
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                done = not message.get("more_body", False)
                if size > MAX_BODY:
                    raise body_too_large(MAX_BODY)
            return message

        return await self.app(scope, limited, send)
