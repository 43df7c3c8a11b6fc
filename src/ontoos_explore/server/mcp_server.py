"""Server, MCP: the tools over the Model Context Protocol (official SDK, low-level Server).

The low-level server is used for control the high-level one does not give:
unknown argument keys reach our own validation (with did-you-mean), an
unknown tool is a protocol error as the spec says, and every exception is
caught here so no internal text can leave as a JSON-RPC error.

A call goes through `Tools.call` (stdio and streamable HTTP alike) and its
`Answer` becomes a tool result (`tool_result`): a refusal is a tool error
(`isError`) whose text is the error envelope JSON, without structured
content; a success carries the envelope as structured content and as JSON text (for a large
answer, its first rows: `tool_text`).

tools/list is the built-in tools, then one tool per named query the caller
may run (`ontoos_q_<id>`, by id: its parameters as the input schema, nested
objects for dotted names), with `ttlMs` so clients may cache it. The server
advertises `tools.listChanged`: `ToolListChanges.watch()` looks at the
registry every second and, when another one is served (an approval, a
retirement, an edit of the file), sends `notifications/tools/list_changed`
to every session that has listed tools.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import weakref
from collections.abc import Callable
from typing import Any

from mcp.server import Server, ServerRequestContext
from mcp.server.caching import CacheHint
from mcp.server.lowlevel.server import NotificationOptions
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import X_MCP_HEADER_KEY as X_MCP_HEADER
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
    ToolAnnotations,
)

from .. import __version__
from ..envelope import Answer
from ..errors import InternalError
from ..names import close_matches
from .config import Principal
from .tool_models import (ANNOTATIONS, INSTRUCTIONS, READ_ONLY, TOOLS, input_schema, output_schema,
                          query_description, query_input_schema)
from .tool_text import TEXT_BYTES, knows_structured, text_of
from .tools import QUERY_PREFIX, Tools

log = logging.getLogger("ontoos_explore.mcp")

PRINCIPAL_KEY = "ontoos.principal"  # where the HTTP auth middleware leaves the caller in the ASGI scope
# the caller of the MCP request being handled over HTTP (set by mcp_http.MCPEndpoint): what the SDK's
# schema lookup of a tools/call's Mcp-Param headers is answered for, as its tools/list would be
CALLER: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("ontoos_mcp_caller", default=None)
LIST_TTL_MS = 60_000  # how long a client may keep tools/list (a change is announced as it happens)
WATCH_S = 1.0  # how often the registry is looked at for a change to announce


def tool_list() -> list[Tool]:
    out = output_schema()
    return [
        Tool(
            name=name,
            title=title,
            description=description,
            input_schema=input_schema(model),
            output_schema=out,
            annotations=ToolAnnotations(title=title, **ANNOTATIONS.get(name, READ_ONLY)),
        )
        for name, (title, description, model) in TOOLS.items()
    ]


def query_tool(query: Any) -> Tool:
    """A named query as a tool of its own: read-only, idempotent, closed-world, like every reading tool."""
    return Tool(name=QUERY_PREFIX + query.id, title=query.title, description=query_description(query),
                input_schema=query_input_schema(query), output_schema=output_schema(),
                annotations=ToolAnnotations(title=query.title, **READ_ONLY))


class QueryTools:
    """The named queries' tools of the registry served now, built once per registry."""

    def __init__(self, tools: Tools) -> None:
        self.tools = tools
        self._registry: Any = None
        self._built: dict[str, Tool] = {}
        self._declares: dict[str, bool] = {}  # tool name -> whether its schema declares Mcp-Param headers

    def listed(self, principal: Principal | None) -> list[Tool]:
        registry = self.tools.registry_now()
        if registry is not self._registry:
            self._registry, self._built, self._declares = registry, {}, {}
        out = []
        for q in self.tools.query_tools(principal):
            if q.id not in self._built:
                self._built[q.id] = query_tool(q)
            out.append(self._built[q.id])
        return out

    def declares(self, tool: Tool) -> bool:
        """`declares_headers(tool)`, looked at once per tool of the registry served now (and the built-ins)."""
        found = self._declares.get(tool.name)
        if found is None:
            found = self._declares[tool.name] = declares_headers(tool)
        return found


class ToolListChanges:
    """`notifications/tools/list_changed` to the connections that listed tools, when the registry changes.

    A request's `ServerSession` lives as long as the request; the connection under it (the SDK keeps it
    as `_connection`) as long as the client stays: that is what is remembered, weakly, so a connection
    that closes is forgotten. A 2026-07-28 connection has no channel for it (its clients listen with
    subscriptions/listen): not remembered."""

    def __init__(self, tools: Tools, interval_s: float = WATCH_S) -> None:
        self.tools = tools
        self.interval_s = interval_s
        self.connections: weakref.WeakSet = weakref.WeakSet()

    def saw(self, session: Any) -> None:
        connection = getattr(session, "_connection", None)
        if connection is not None and getattr(connection, "protocol_version", None) not in MODERN_PROTOCOL_VERSIONS:
            self.connections.add(connection)

    async def watch(self) -> None:
        last = self.tools.registry_now()
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                now = self.tools.registry_now()
            except Exception:  # the file cannot even be looked at (a permission): the list stays, say so
                log.exception("could not look at the registry for tools/list_changed")
                continue
            if now is last:
                continue
            last = now
            for connection in list(self.connections):
                try:
                    await connection.outbound.notify("notifications/tools/list_changed", None)
                except Exception:  # a connection that has gone: forgotten
                    self.connections.discard(connection)


class OntoosServer(Server):
    """The SDK's low-level server, advertising tools.listChanged on every transport."""

    def create_initialization_options(self, notification_options=None, *args: Any, **kwargs: Any):
        return super().create_initialization_options(notification_options or NotificationOptions(tools_changed=True),
                                                     *args, **kwargs)


def http_principal(ctx: ServerRequestContext) -> Principal | None:
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None) or {}
    return scope.get(PRINCIPAL_KEY)


def build_server(tools: Tools, principal_of: Callable[[ServerRequestContext], Principal | None],
                 surface: str = "mcp") -> Server:
    """An MCP server whose caller is `principal_of(ctx)`: fixed for stdio, from the token over HTTP."""
    listed = tool_list()
    queries = QueryTools(tools)
    changes = ToolListChanges(tools)

    async def list_tools(ctx: ServerRequestContext, params: PaginatedRequestParams | None) -> ListToolsResult:
        principal = principal_of(ctx)
        visible = tools.visible(principal)
        changes.saw(getattr(ctx, "session", None))
        return ListToolsResult(tools=[t for t in listed if t.name in visible] + queries.listed(principal))

    by_name = {t.name: t for t in listed}

    def input_schema(name: str) -> dict[str, Any] | None:
        """A tool's input schema, for the caller of this request, as the SDK asks for it to check a
        tools/call's Mcp-Param headers against. None: a tool it may not see (its tools/list would not
        list it), or one that declares no header (nothing to check: the SDK's walk of a schema without
        one costs ~2% of a call). Without this lookup the SDK answers the question with a whole
        tools/list on every tools/call: about 5% of a call's CPU."""
        principal = CALLER.get()
        if principal is None or name not in tools.visible(principal):
            return None
        tool = by_name.get(name) or next((t for t in queries.listed(principal) if t.name == name), None)
        return tool.input_schema if tool is not None and queries.declares(tool) else None

    async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> dict[str, Any]:
        visible = tools.visible(principal_of(ctx))
        if params.name not in visible:  # a tool the role may not call is one that does not exist
            close = close_matches(params.name[:60], visible, n=1)
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name[:60]}. "
                           + (f"Did you mean {close[0]}? " if close else "") + f"Tools: {', '.join(visible)}")
        answer = await run_tool(tools, params.name, params.arguments or {}, principal_of(ctx), surface)
        return tool_result(answer, getattr(ctx, "protocol_version", None))

    server = OntoosServer(
        "ontoos-explore",
        version=__version__,
        title="ontoos-explore",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        # private: the list varies with the caller's role
        cache_hints={"tools/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="private")},
    )
    server.changes = changes  # its watch() runs while the transport does (run.run_stdio, app's lifespan)
    return server


async def run_tool(tools: Tools, name: str, arguments: dict[str, Any], principal: Principal | None,
                   surface: str = "mcp") -> Answer:
    """`Tools.call`, whatever it raises answered as an internal refusal: no internal text leaves."""
    try:
        return await tools.call(name, arguments, principal, surface=surface)
    except Exception:
        log.exception("tool %s failed", name)
        return Answer.refusal(InternalError(reason="UNEXPECTED"))


def tool_result(answer: Answer, protocol_version: str | None = None) -> dict[str, Any]:
    """An `Answer` as an MCP tool result (the envelope is presentable already: `Answer.refusal`), in its
    wire shape: the SDK validates a handler's result against the protocol version's schema either way,
    and a mapping spares it building and dumping a CallToolResult model first (~7% of a call's CPU).
    Its text is `tool_text.text_of` the envelope: whole, or for a large answer to a client that reads
    structured content, its first rows (the structured content holds them all)."""
    most = TEXT_BYTES if knows_structured(protocol_version) else None
    content = [{"type": "text", "text": text_of(answer.envelope, most)}]
    # resultType: the 2026-07-28 protocol requires it; an older version's schema drops it
    if not answer.ok:
        return {"resultType": "complete", "content": content, "isError": True}
    return {"resultType": "complete", "content": content, "structuredContent": answer.envelope, "isError": False}


def declares_headers(tool: Tool) -> bool:
    """Whether a tool's input schema mentions `x-mcp-header` anywhere (then the SDK checks the call's
    Mcp-Param headers against it; it decides which declarations hold)."""
    return X_MCP_HEADER in json.dumps(tool.input_schema)


def fixed(principal: Principal) -> Callable[[Any], Principal]:
    return lambda ctx: principal
