"""Server, /mcp: MCP over streamable HTTP (the SDK's session manager), with what we check first.

Before the SDK sees a POST, its body is read and checked (`precheck`): size and
time (`bodies.read_limited`), a JSON Content-Type, strict JSON (no NaN, no
duplicate keys, no unpaired surrogate), one JSON-RPC message (no batch, an id
that is a string, an integer or null). An initialize past the principal's open
sessions (`SessionCaps`) is refused too. Each refusal is recorded once and
answered as a JSON-RPC error carrying the envelope (`rpc_payload`: the code is
the row's `rpc`, the status its `status`); the SDK's own plain-text refusals
(a bad Host, Origin or Accept: its status kept) leave the same way
(`json_errors`, via `errors.transport_refused`).

A 2026-07-28 `tools/call` that the SDK would answer with a tool result is answered in place by
`mcp_direct.Direct` (the SDK's own checks first; the same result, encoded once); every other request
goes to the SDK.

A session answers only the principal that opened it. Its principal is noted
from the response that hands out its id (`SessionCaps.opened`); any request
(POST, the GET stream, DELETE) whose mcp-session-id names a session the SDK
does not hold, or one another principal opened, is answered 404 UNKNOWN_SESSION
before the SDK sees it, the same bytes either way (so a leaked id's existence
is not revealed), and recorded (reason UNKNOWN_SESSION or FOREIGN_SESSION).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import JSONResponse

from ..envelope import Answer
from ..errors import Codes, ExploreError, InputError, not_json, too_many_sessions, transport_refused, unknown_session
from ..grammar.forms import loads_strict
from .bodies import json_media_type, read_limited
from .gone import unless_gone
from .limits import SessionCaps
from .mcp_direct import Direct
from .mcp_server import CALLER, PRINCIPAL_KEY, build_server, http_principal
from .rest import UNREAD_BODY
from .tools import Tools

log = logging.getLogger("ontoos_explore.http")
SESSION_HEADER = "mcp-session-id"
PROTOCOL_HEADER = b"mcp-protocol-version"
DELETE_WAIT_S = 2.0  # a DELETE waits at most this for its session's requests in progress

HINTS = {
    400: "see the MCP streamable HTTP transport: POST one JSON-RPC message with Content-Type: application/json",
    403: "the Origin header must be this server's own address (DNS-rebinding protection)",
    421: "the Host header must be this server's own address (DNS-rebinding protection)",
}


def rpc_payload(e: ExploreError | Answer) -> dict[str, Any]:
    """A JSON-RPC error (code: the row's `rpc`) that carries the envelope, hint included, in `error.data`."""
    answer = e if isinstance(e, Answer) else Answer.refusal(e)
    err = answer.envelope["error"]
    message = err["message"] + (f"; {err['hint']}" if err.get("hint") else "")
    return {"jsonrpc": "2.0", "id": None, "error": {"code": answer.error.error_code.rpc, "message": message,
                                                    "data": answer.envelope}}


def rpc_response(answer: Answer, status: int | None = None) -> JSONResponse:
    status = status or answer.status
    return JSONResponse(rpc_payload(answer), status_code=status,
                        headers={"Connection": "close"} if status in UNREAD_BODY else None)


def loopback_security(host: str, port: int):
    """DNS-rebinding protection for a server bound to loopback: only its own Host and Origin."""
    from mcp.server.transport_security import TransportSecuritySettings

    if host not in ("127.0.0.1", "localhost", "::1"):
        return None
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=[f"http://{h}" for h in hosts])


async def precheck(scope, receive, timeout_s: float):
    """Read and check a POST /mcp body before the SDK does. -> (a receive replaying it, None, the message)
    or (receive, the refusal, None)."""
    headers = Headers(scope=scope)
    content_type = headers.get("content-type", "")
    try:
        if not content_type or not json_media_type(content_type):
            raise not_json(content_type or "nothing")
        body = await read_limited(receive, headers.get("content-length"), timeout_s)
        try:
            message = loads_strict(body)
        except ExploreError as e:
            e.hint = "send one JSON-RPC 2.0 message: a UTF-8 JSON object, without NaN or duplicate keys"
            raise
        one_message(message, body)
    except ExploreError as e:
        return receive, e, None
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay, None, message


SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # how a JSON text can hold a surrogate (UTF-8 cannot)


def one_message(message: Any, body: bytes) -> None:
    """One JSON-RPC message, as the SDK's parser needs it (it would refuse these with a bare "Parse error")."""
    if not isinstance(message, dict):
        raise InputError(Codes.NOT_JSON_RPC, "the body must be one JSON-RPC message (an object)",
                         hint="send one request per POST; batches are not supported")
    if isinstance(ident := message.get("id"), bool) or not isinstance(ident, (str, int, type(None))):
        raise InputError(Codes.NOT_JSON_RPC, "a JSON-RPC id must be a string or an integer", hint='e.g. "id": 1')
    if SURROGATE_ESCAPE.search(body) is None:  # no escape of one: no string of the message can hold one
        return
    try:
        json.dumps(message, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(Codes.JSON_UNREADABLE,
                         "the message has an unpaired surrogate escape (\\ud800-\\udfff) in a string",
                         hint="JSON text must be valid Unicode: pair the surrogates, or remove the escape") from None


def json_errors(send):
    """Wrap an ASGI `send` so that an error the MCP SDK answers in plain text (a bad Host or Origin,
    a bad Content-Type) leaves as a JSON-RPC error with the envelope, with the SDK's status."""
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
            text = b"".join(chunks).decode("utf-8", "replace").strip() or f"refused ({status})"
            body = json.dumps(rpc_payload(transport_refused(text, HINTS.get(status, HINTS[400])))).encode("utf-8")
            headers = [(k, v) for k, v in held.get("headers") or []
                       if k.lower() not in (b"content-type", b"content-length")]
            headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await send(message)

    return wrapped


class MCPEndpoint:
    """/mcp as an ASGI app (a Route endpoint: /mcp exactly, no redirect). `run()` must be
    entered by the app's lifespan."""

    def __init__(self, tools: Tools, security=None, body_timeout_s: float = 30.0, mcp_sessions: int = 64,
                 stateless: bool = False) -> None:
        self.tools = tools
        self.body_timeout_s = body_timeout_s
        self.server = build_server(tools, http_principal)
        # stateless: no session ids, so any process of a deployment answers any request of a handshake-era client
        self.sessions = StreamableHTTPSessionManager(app=self.server, security_settings=security, stateless=stateless)
        # a 2026-07-28 request (one POST, one answer) in JSON mode: the SDK answers it in the request's own
        # task, without the SSE mode's task group, stream and disconnect watcher (~9% of a call's CPU); the
        # protocol cancels it when its client leaves (`gone.unless_gone`), as the watcher would have. The
        # handshake era keeps SSE: the SDK's client fails on a JSON answer to a call it cancelled.
        self.modern = StreamableHTTPSessionManager(app=self.server, security_settings=security, stateless=True,
                                                   json_response=True)
        # the SDK keeps its sessions in a private table: without it, whose a session is cannot be held
        # to (nor sessions counted), so a server on another SDK does not start
        instances = getattr(self.sessions, "_server_instances", None)
        if not isinstance(instances, dict):
            raise RuntimeError("this MCP SDK does not expose its sessions (StreamableHTTPSessionManager."
                               "_server_instances): sessions could not be held to their principals")
        self.direct = Direct(tools, self.server, security)  # the 2026-07-28 era's tools/call, answered in place
        self.caps = SessionCaps(mcp_sessions, lambda sid: sid in instances)
        self.busy: dict[str, int] = {}  # session id -> its POST and DELETE requests in progress

    @contextlib.asynccontextmanager
    async def run(self):
        """Both session managers running (the app's lifespan enters this)."""
        async with self.sessions.run(), self.modern.run():
            yield

    async def __call__(self, scope, receive, send):
        caller = CALLER.set(scope.get(PRINCIPAL_KEY))
        try:
            await self._handle(scope, receive, send)
        finally:
            CALLER.reset(caller)

    async def _handle(self, scope, receive, send):
        principal = scope.get(PRINCIPAL_KEY)
        session_id = Headers(scope=scope).get(SESSION_HEADER)
        if scope["method"] == "POST":
            receive, refused, message = await precheck(scope, receive, self.body_timeout_s)
            if refused is not None:
                return await rpc_response(self.tools.refuse(refused, principal, "mcp"))(scope, receive, send)
            if principal is not None and session_id is None:
                if held := self.caps.full(principal.name):  # a request that would open one more session
                    answer = self.tools.refuse(too_many_sessions(principal.name, held), principal, "mcp")
                    return await rpc_response(answer)(scope, receive, send)
                if modern(scope) and await self.direct.answer(scope, send, message, principal):
                    return
                send = self._noting_session(send, principal.name)
        if session_id is not None and (refused := self._not_theirs(session_id, principal)) is not None:
            return await rpc_response(self.tools.refuse(refused, principal, "mcp"))(scope, receive, send)
        if session_id is None and modern(scope):  # nobody to answer once its client has left
            return await unless_gone(scope, self.modern.handle_request(scope, receive, json_errors(_once(send))))
        if session_id is None or scope["method"] == "GET":  # a GET is the session's stream: it lasts
            return await self.sessions.handle_request(scope, receive, json_errors(_once(send)))
        if scope["method"] == "DELETE":  # the SDK closes the session's streams at once: let its requests finish
            await self._settled(session_id)
        self.busy[session_id] = self.busy.get(session_id, 0) + 1
        try:
            await self.sessions.handle_request(scope, receive, json_errors(_once(send)))
        finally:
            left = self.busy[session_id] - 1
            if left:
                self.busy[session_id] = left
            else:
                del self.busy[session_id]

    async def _settled(self, session_id: str, most_s: float = DELETE_WAIT_S) -> None:
        """Wait (at most `most_s`) until no request of the session is in progress: a DELETE that closed
        the session's streams under a POST still being answered made the SDK fail on them (logged)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + most_s
        while self.busy.get(session_id) and loop.time() < deadline:
            await asyncio.sleep(0.01)

    def _not_theirs(self, session_id: str, principal) -> ExploreError | None:
        """None when `session_id` is an open session of `principal`; else the refusal, the same whether
        the session is unknown, ended, or another principal's (only its audit reason differs)."""
        owner = self.caps.owner(session_id)
        if owner is not None and principal is not None and owner == principal.name:
            return None
        if owner is None:
            return unknown_session()
        log.warning("%s sent the mcp-session-id of a session %s opened: answered as an unknown session",
                    principal.name if principal is not None else "a caller without a principal", owner)
        return unknown_session("FOREIGN_SESSION")

    def _noting_session(self, send, principal: str):
        async def noting(message):
            if message["type"] == "http.response.start":
                for k, v in message.get("headers") or []:
                    if k.lower() == SESSION_HEADER.encode():
                        self.caps.opened(principal, v.decode("latin-1"))
            await send(message)
        return noting


def modern(scope) -> bool:
    """Whether a request is of the 2026-07-28 era: an MCP-Protocol-Version the handshake does not name
    (the SDK's own routing: an unknown version goes there too, to be refused with its reason)."""
    version = next((v for k, v in scope["headers"] if k == PROTOCOL_HEADER), None)
    return version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS


def _once(send):
    """An ASGI `send` that takes one response: once its last body part went out, what follows is dropped.
    The SDK can answer a notification POST (202) and then, when a DELETE closed the session meanwhile,
    try to send a 500 on the finished response (uvicorn raises on it and logs a traceback)."""
    done = False

    async def sending(message):
        nonlocal done
        if done:
            return
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            done = True
        await send(message)

    return sending
