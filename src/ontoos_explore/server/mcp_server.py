"""Server, MCP: the tools over the Model Context Protocol (official SDK, low-level Server).

The low-level server is used for control the high-level one does not give:
unknown argument keys reach our own validation (with did-you-mean), an
unknown tool is a protocol error as the spec says, and every exception is
caught here so no internal text can leave as a JSON-RPC error.

A call goes through `Tools.call` (stdio and streamable HTTP alike) and its
`Answer` becomes a tool result (`tool_result`): a refusal is a tool error
(`isError`) whose text is the error envelope JSON, without structured
content; a success carries the envelope as structured content and as JSON text.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from mcp.server import Server, ServerRequestContext
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
from .tool_models import ANNOTATIONS, INSTRUCTIONS, READ_ONLY, TOOLS, input_schema, output_schema
from .tools import Tools

log = logging.getLogger("ontoos_explore.mcp")

PRINCIPAL_KEY = "ontoos.principal"  # where the HTTP auth middleware leaves the caller in the ASGI scope


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


def http_principal(ctx: ServerRequestContext) -> Principal | None:
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None) or {}
    return scope.get(PRINCIPAL_KEY)


def build_server(tools: Tools, principal_of: Callable[[ServerRequestContext], Principal | None],
                 surface: str = "mcp") -> Server:
    """An MCP server whose caller is `principal_of(ctx)`: fixed for stdio, from the token over HTTP."""
    listed = tool_list()

    async def list_tools(ctx: ServerRequestContext, params: PaginatedRequestParams | None) -> ListToolsResult:
        visible = tools.visible(principal_of(ctx))
        return ListToolsResult(tools=[t for t in listed if t.name in visible])

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

    return Server(
        "ontoos-explore",
        version=__version__,
        title="ontoos-explore",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def tool_result(answer: Answer) -> CallToolResult:
    """An `Answer` as an MCP tool result (the envelope is presentable already: `Answer.refusal`)."""
    text = json.dumps(answer.envelope, ensure_ascii=False)
    if not answer.ok:
        return CallToolResult(is_error=True, content=[TextContent(type="text", text=text)])
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=answer.envelope)


def fixed(principal: Principal) -> Callable[[Any], Principal]:
    return lambda ctx: principal
