"""Server, HTTP: one Starlette app for MCP (streamable HTTP), the REST API, health and the dashboard.

    /mcp              MCP over streamable HTTP (bearer token)          mcp_http.py
    /api/v1/explore   POST the JSON form, or GET with a query string   rest.py
    /api/v1/catalog   GET, ?dataset= to describe one, ?name= to find   rest.py
    /api/v1/requests  POST, a template request for reviewers           rest.py
    /healthz          liveness, no token                               rest.py
    /metrics          Prometheus text: loopback, or a metrics principal  rest.py, metrics.py
    /readyz           readiness (database, contract, drift), no token  rest.py
    /governance...    the reviewers' dashboard (when given)            governance_routes.py

In front of every route: `Draining` (outermost: lifecycle.py, the requests in
flight counted, new ones refused while the process stops), `BodyLimit` (for
open paths too), then `BearerAuth` (middleware.py). Every answer is an envelope with the status of
its row; an exception a route did not catch is answered the same way.
"""

from __future__ import annotations

import asyncio
import contextlib

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.routing import Route

from ..envelope import Answer
from ..errors import ExploreError
from . import bodies
from .config import Authenticator
from .lifecycle import Drain, Draining
from .metrics import Metrics
from .limits import AuthFloods
from .mcp_http import MCPEndpoint
from .middleware import BearerAuth, BodyLimit
from .rest import Rest, SentFirst, crash, no_route, refused
from .tools import Tools


SAMPLE_EVERY_S = 1.0


@contextlib.asynccontextmanager
async def running(work):
    """`work` as a task while the block runs, cancelled after."""
    task = asyncio.ensure_future(work)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def build_app(tools: Tools, authenticator: Authenticator, lifespan=None, governance=None,
              security=None, body_timeout_s: float | None = None, mcp_sessions: int = 64,
              drain: Drain | None = None, mcp_stateless: bool = False) -> Starlette:
    """The app; `body_timeout_s` defaults to ONTOOS_BODY_TIMEOUT, else 30 s; `drain`: the process's shutdown
    (`lifecycle.py`; its own when not given)."""
    timeout_s = bodies.body_timeout_s(body_timeout_s)
    drain = drain if drain is not None else Drain()
    rest = Rest(tools, timeout_s, drain, authenticator)
    if tools.metrics is None:
        tools.metrics = Metrics()
    mcp = MCPEndpoint(tools, security, timeout_s, mcp_sessions, stateless=mcp_stateless)
    floods = auth_floods(tools, authenticator)
    if governance is not None:  # a failed sign-in at /governance/login draws on the same per-address limit
        governance.floods = floods

    @contextlib.asynccontextmanager
    async def lifespan_(app):
        async with contextlib.AsyncExitStack() as stack:
            if lifespan is not None:
                await stack.enter_async_context(lifespan(app))
            if floods is not None:  # exits before the lifespan's: the audit takes the open episodes
                stack.callback(floods.seal_all)
            await stack.enter_async_context(mcp.run())
            await stack.enter_async_context(running(mcp.server.changes.watch()))
            await stack.enter_async_context(running(sampling(tools)))
            yield

    app = Starlette(
        # in the order a request is matched: the two the agents and scripts call on every question first
        # (each route before a request's own costs it a regex match)
        routes=[
            Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]),
            Route("/api/v1/explore", SentFirst(rest.explore), methods=["GET", "POST"]),
            Route("/api/v1/requests", SentFirst(rest.request_query), methods=["POST"]),
            Route("/healthz", rest.healthz, methods=["GET"]),
            Route("/readyz", rest.readyz, methods=["GET"]),
            Route("/favicon.ico", rest.favicon, methods=["GET"]),
            Route("/metrics", rest.metrics, methods=["GET"]),
            Route("/api/v1/catalog", SentFirst(rest.catalog), methods=["GET"]),
            Route("/api/v1/queries", SentFirst(rest.queries), methods=["GET"]),
            Route("/api/v1/queries/{id}", SentFirst(rest.query), methods=["GET"]),
            Route("/api/v1/queries/{id}/run", SentFirst(rest.run_query), methods=["POST"]),
            Route("/api/v1/openapi.json", rest.openapi, methods=["GET"]),
            Route("/.well-known/{rest:path}", rest.well_known, methods=["GET", "HEAD", "POST"]),
            *(governance.routes() if governance is not None else []),
        ],
        exception_handlers={HTTPException: no_route, ExploreError: refused, Exception: crash},
        lifespan=lifespan_,
    )

    def on_refusal(e: ExploreError, path: str) -> Answer:
        return tools.refuse(e, None, "mcp" if path.startswith("/mcp") else "rest")

    app.state.floods = rest.floods = floods
    app.add_middleware(BearerAuth, authenticator=authenticator, on_refusal=on_refusal, floods=floods,
                       open_paths=("/healthz", "/readyz", "/favicon.ico", "/metrics", "/governance/login",
                                   "/api/v1/openapi.json"), open_prefixes=("/.well-known/",),
                       sessions=governance.principal_for_session if governance is not None else None)
    app.add_middleware(BodyLimit, timeout_s=timeout_s)  # before auth, for open paths too
    app.add_middleware(Draining, drain=drain, on_refusal=on_refusal)  # outermost: counts what is in flight
    return app


async def sampling(tools: Tools, every_s: float = SAMPLE_EVERY_S) -> None:
    """The metrics read rather than counted, once a second (with several workers, each one's own)."""
    while True:
        await asyncio.sleep(every_s)
        if tools.metrics is not None:
            tools.metrics.sample(tools)


def auth_floods(tools: Tools, authenticator: Authenticator) -> AuthFloods | None:
    """The per-address limit of requests without a valid token, whose episodes the audit records as gaps."""
    limit = getattr(authenticator, "failure_limit", None)
    if limit is None:
        return None

    def unrecorded(n: int, first, last, address: str) -> None:
        if tools.audit is not None:
            tools.audit.unrecorded("AUTH_FLOOD", n, first, last,
                                   f"{n} requests without a valid token from {address} were answered 429 "
                                   f"(over {limit.describe()}) and not recorded one by one")

    return AuthFloods(limit, unrecorded)
