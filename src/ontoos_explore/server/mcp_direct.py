"""Server, /mcp: a 2026-07-28 `tools/call` answered in the request's task, by the SDK's own rules.

A request of the stateless era is one POST and one JSON answer. The SDK's entry for it (its session
manager in JSON mode) checks the transport, builds a connection, a dispatch context and a kernel,
validates the parameters into a model, runs its middleware chain (an OpenTelemetry span), validates
the handler's result against the protocol version's schema and dumps it, wraps it in a response
model, dumps that and encodes it with the standard library's JSON: about 0.8 ms of a filtered scan's
3 ms of server CPU, and the whole of a 5,000-row answer encoded twice over.

`Direct.answer` takes the calls that need none of that machinery to be answered as the SDK answers
them, and leaves every other request to the SDK (it says False, having read nothing of `receive`):

- the method is `tools/call`, the message a request (`jsonrpc` "2.0", an id), its parameters an object
  with a tool name and object arguments that the SDK's own parameter model accepts;
- the tool is one the caller may see, and its input schema declares no Mcp-Param header (the SDK
  checks those headers against it);
- the SDK's own checks pass: the transport's Host, Origin and Content-Type
  (`TransportSecurityMiddleware`), an Accept that takes JSON, no routing header twice, and the
  per-request envelope against the headers and the supported versions (`classify_inbound_request`).
  A client sends the same headers and envelope with every call: each verdict is kept (`Direct.verdict`),
  some 50 us of a call where the code is cold.

Any rejection, unknown tool or odd shape is therefore the SDK's answer, as before. The call itself is
the handler's (`mcp_server.run_tool`, so `Tools.call`: admitted, run, recorded once), its result the
handler's (`tool_result`, which is the wire shape the SDK checks it against), stamped with the server's
`serverInfo` as the SDK stamps a 2026-era result, and encoded once (`jsontext.dumps_bytes`). A client
that leaves is answered as `gone.unless_gone` says: its call is cancelled and recorded, nothing sent.
"""

from __future__ import annotations

from typing import Any

from mcp.server.streamable_http import check_accept_headers
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import InboundModernRoute, classify_inbound_request, find_duplicated_routing_header
from mcp.types import CallToolRequestParams
from mcp_types import SERVER_INFO_META_KEY
import orjson
from pydantic import ValidationError
from starlette.requests import Request

from ..jsontext import dumps_bytes
from .config import Principal
from .gone import unless_gone
from .mcp_server import run_tool, tool_result
from .recording import counted_after_send
from .tools import Tools

JSON_HEADERS = [(b"content-type", b"application/json")]
# no check reads these: left out of a verdict's key (they differ from call to call, or are secrets)
UNREAD_HEADERS = (b"authorization", b"content-length", b"cookie", b"proxy-authorization")
MOST_KEPT_BYTES = 4096  # of a request's headers and parameters, for its verdict to be kept
PAIR_BYTES = 64  # what a kept header costs beyond its bytes (its tuple)
MOST_VERDICTS = 256


class Direct:
    """The stateless era's `tools/call`, answered without the SDK's dispatch (see the module)."""

    def __init__(self, tools: Tools, server: Any, security: TransportSecuritySettings | None = None) -> None:
        self.tools = tools
        self.schema_of = server.get_tool_input_schema  # the caller's view of a tool's schema (mcp_server)
        self.security = TransportSecurityMiddleware(security)
        # the SDK copies its stamp for each response in case a caller changes it; this one is only encoded
        self.stamp = server.server_info_stamp
        self._verdicts: dict[tuple, str | None] = {}  # (method, headers, params but arguments) -> `verdict`

    async def verdict(self, scope, message: dict[str, Any]) -> str | None:
        """The SDK's checks of a request `takes` took: its protocol version, or None to leave it to the SDK.
        They read the headers and the message's parameters but for the arguments (any JSON object passes),
        and nothing else: a client sends the same ones with every call, so each verdict is kept, by those
        exact bytes (a small request's: a large one is checked every time, and the table starts again
        when full). The tool's schema lookup depends on the caller: never kept."""
        params = message["params"]
        key = None
        try:
            rest = orjson.dumps({k: v for k, v in params.items() if k != "arguments"})
        except (TypeError, orjson.JSONEncodeError):
            rest = None
        if rest is not None and len(rest) <= MOST_KEPT_BYTES:
            headers = tuple((k, v) for k, v in scope["headers"] if k not in UNREAD_HEADERS)
            if sum(len(k) + len(v) + PAIR_BYTES for k, v in headers) + len(rest) <= MOST_KEPT_BYTES:
                key = (message.get("method"), headers, rest)
                if key in self._verdicts:
                    return self._verdicts[key]
        version = await self._checked(scope, message)
        if key is not None:
            if len(self._verdicts) >= MOST_VERDICTS:
                self._verdicts.clear()
            self._verdicts[key] = version
        return version

    async def _checked(self, scope, message: dict[str, Any]) -> str | None:
        request = Request(scope)
        if await self.security.validate_request(request, is_post=True) is not None:
            return None
        if not check_accept_headers(request)[0] or find_duplicated_routing_header(request.headers.items()):
            return None
        verdict = classify_inbound_request(message, headers=dict(request.headers))
        if not isinstance(verdict, InboundModernRoute):
            return None
        try:
            CallToolRequestParams.model_validate(message["params"], by_name=False)
        except ValidationError:
            return None
        return verdict.protocol_version

    def takes(self, message: dict[str, Any], principal: Principal | None) -> str | None:
        """The tool name of a message this answers by its shape and caller alone, else None."""
        if message.get("method") != "tools/call" or message.get("jsonrpc") != "2.0" or "id" not in message:
            return None
        params = message.get("params")
        if principal is None or not isinstance(params, dict):
            return None
        name, arguments = params.get("name"), params.get("arguments")
        if not isinstance(name, str) or not (arguments is None or isinstance(arguments, dict)):
            return None
        return name if name in self.tools.visible(principal) else None

    async def answer(self, scope, send, message: dict[str, Any], principal: Principal | None) -> bool:
        """Answer `message` (True), or leave the request to the SDK (False: nothing was sent)."""
        name = self.takes(message, principal)
        if name is None:
            return False
        version = await self.verdict(scope, message)
        if version is None or self.schema_of(name) is not None:
            return False
        params = message["params"]
        with counted_after_send():  # the answer leaves, then it is counted
            answer = await unless_gone(scope, run_tool(self.tools, name, params.get("arguments") or {}, principal))
            if answer is None:  # its client has gone: nobody to answer
                return True
            result = tool_result(answer, version)
            result["_meta"] = {SERVER_INFO_META_KEY: self.stamp}
            body = dumps_bytes({"jsonrpc": "2.0", "id": message["id"], "result": result})
            await send({"type": "http.response.start", "status": 200,
                        "headers": [*JSON_HEADERS, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
        return True
