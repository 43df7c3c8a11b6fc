"""Server, MCP: the tools over the Model Context Protocol (official SDK, low-level Server).

The low-level server is used for control the high-level one does not give:
unknown argument keys reach our own validation (with did-you-mean), an
unknown tool is a protocol error as the spec says, and every exception is
caught here so no internal text can leave as a JSON-RPC error.

A call goes through `Tools.call` (stdio and streamable HTTP alike) and its
`Answer` becomes a tool result (`tool_result`): a refusal is a tool error
(`isError`) whose text is the error envelope JSON, without structured
content; a success carries the envelope as structured content and as JSON text.

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
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
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
from .tools import QUERY_PREFIX, Tools

log = logging.getLogger("ontoos_explore.mcp")

PRINCIPAL_KEY = "ontoos.principal"  # where the HTTP auth middleware leaves the caller in the ASGI scope
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

    def listed(self, principal: Principal | None) -> list[Tool]:
        registry = self.tools.registry_now()
        if registry is not self._registry:
            self._registry, self._built = registry, {}
        out = []
        for q in self.tools.query_tools(principal):
            if q.id not in self._built:
                self._built[q.id] = query_tool(q)
            out.append(self._built[q.id])
        return out


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

    async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> CallToolResult:
        visible = tools.visible(principal_of(ctx))
        if params.name not in visible:  # a tool the role may not call is one that does not exist
            close = close_matches(params.name[:60], visible, n=1)
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name[:60]}. "
                           + (f"Did you mean {close[0]}? " if close else "") + f"Tools: {', '.join(visible)}")
        try:
            answer = await tools.call(params.name, params.arguments or {}, principal_of(ctx), surface=surface)
        except Exception:  # never let internal text out as a JSON-RPC error
            log.exception("tool %s failed", params.name)
            answer = Answer.refusal(InternalError(reason="UNEXPECTED"))
        return tool_result(answer)

    server = OntoosServer(
        "ontoos-explore",
        version=__version__,
        title="ontoos-explore",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        # private: the list varies with the caller's role
        cache_hints={"tools/list": CacheHint(ttl_ms=LIST_TTL_MS, scope="private")},
    )
    server.changes = changes  # its watch() runs while the transport does (run.run_stdio, app's lifespan)
    return server


def tool_result(answer: Answer) -> CallToolResult:
    """An `Answer` as an MCP tool result (the envelope is presentable already: `Answer.refusal`)."""
    text = json.dumps(answer.envelope, ensure_ascii=False)
    if not answer.ok:
        return CallToolResult(is_error=True, content=[TextContent(type="text", text=text)])
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=answer.envelope)


def fixed(principal: Principal) -> Callable[[Any], Principal]:
    return lambda ctx: principal
