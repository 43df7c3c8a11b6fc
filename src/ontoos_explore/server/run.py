"""Server, start-up: contract + settings + config -> a running MCP/HTTP server.

`http_app()` builds the Starlette app whose lifespan opens the database pool;
`run_stdio()` serves MCP on stdin/stdout for one fixed principal (stdio has no
tokens: the caller is whoever started the process, with the role given).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from ..contract import Contract
from ..engine.executor import Executor, open_pool
from ..engine.settings import Settings
from ..governance.registry import Registry
from ..service import Explorer
from .config import Authenticator, Principal, ServerConfig
from .http import build_app
from .tools import Tools


def audit_writer(settings: Settings, dsn: str):
    from ..governance.audit import AuditWriter

    return AuditWriter(settings.audit_dsn or dsn) if settings.audit else None


def http_app(contract: Contract, settings: Settings, dsn: str, config: ServerConfig, registry: Registry,
             registry_file: Path | None = None, rule=None, host: str = "127.0.0.1", port: int = 8765):
    from ..governance.report import Rule
    from .governance_routes import Governance

    tools = Tools(contract, None, registry, audit_writer(settings, dsn))
    authenticator = Authenticator(config, contract)
    governance = Governance(tools, authenticator, registry_file, rule or Rule())

    @contextlib.asynccontextmanager
    async def lifespan(app):
        pool = await open_pool(dsn, settings)
        tools.explorer = Explorer(contract, Executor(pool, contract, settings))
        if tools.audit is not None:
            await tools.audit.start()
        try:
            yield
        finally:
            if tools.audit is not None:
                await tools.audit.close()
            await pool.close()

    from .http import loopback_security

    return build_app(tools, authenticator, lifespan, governance, loopback_security(host, port))


async def run_stdio(contract: Contract, settings: Settings, dsn: str, principal: Principal, registry: Registry) -> None:
    from mcp.server.stdio import stdio_server

    from .mcp_server import build_server, fixed

    pool = await open_pool(dsn, settings)
    audit = audit_writer(settings, dsn)
    if audit is not None:
        await audit.start()
    try:
        tools = Tools(contract, Explorer(contract, Executor(pool, contract, settings)), registry, audit)
        server = build_server(tools, fixed(principal), surface="mcp-stdio")
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        if audit is not None:
            await audit.close()
        await pool.close()


def log_to_stderr(level: str = "WARNING") -> None:
    """stdio carries the protocol on stdout: everything else goes to stderr."""
    import logging

    logging.basicConfig(stream=sys.stderr, level=level, format="%(asctime)s %(name)s %(levelname)s %(message)s")


def registry_path(explicit: str | None) -> Path | None:
    import os

    value = explicit or os.environ.get("ONTOOS_QUERIES")
    return Path(value) if value else None
