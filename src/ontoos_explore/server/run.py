"""Server, start-up: contract + settings + config -> a running MCP/HTTP server.

`http_app()` builds the Starlette app whose lifespan opens the database pool;
`run_stdio()` serves MCP on stdin/stdout for one fixed principal (stdio has no
tokens: the caller is whoever started the process, with the role given).

The named queries are a `LiveRegistry` (governance/store.py): a change to the
registry file, by the CLI, another process or the dashboard, is served within
a second, over HTTP and stdio alike. The dashboard reads the audit at
`audit_dsn` (else the exploration database), given at construction.

The audit writer's queue is bounded (governance/audit/writer.py says what happens
when it is full) by the settings `audit_queue_max` and `audit_queue_mb`
(settings.py). On a clean shutdown the queue is flushed, and a trail
that is not complete says so on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
from pathlib import Path

import anyio

from .. import drift
from ..contract import Contract
from ..cursors import Cursors
from ..drift import LakeState, Watcher
from ..envelope import install_notice
from ..engine.executor import Executor
from ..engine.pool import open_pool
from ..engine.settings import Settings
from ..governance.registry import Registry
from ..governance.store import LiveRegistry, store_for
from ..governance.store_db import registry_dsn
from ..service import Answer, Explorer
from .config import Authenticator, Principal, ServerConfig
from .logs import say
from .app import build_app, running
from .tools import Tools

log = logging.getLogger("ontoos_explore.server")
START_CHECK_S = 2.0  # the first comparison waits at most this for the database; the watcher tries again soon


def audit_writer(settings: Settings, dsn: str):
    from ..governance.audit import AuditWriter, Spool, spool_directory

    if not settings.audit:
        return None
    store = settings.audit_dsn or dsn
    spool = None
    if settings.audit_spool is not None:
        try:
            spool = Spool(spool_directory(settings.audit_spool, store))
        except OSError as e:
            log.error("audit spool %s cannot be used (%s): queued events are held in memory only",
                      settings.audit_spool, e.strerror or type(e).__name__)
    return AuditWriter(store, queue_max=settings.audit_queue_max,
                       queue_max_bytes=int(settings.audit_queue_mb * 2**20), spool=spool)


async def close_audit(audit) -> None:
    """Flush the trail; say on stderr if it is not complete (never silently)."""
    if audit is None:
        return
    await audit.close()
    stats = audit.stats()
    incomplete = stats["dropped"] or stats["rejected"] or stats["lost"]
    log.log(logging.WARNING if incomplete else logging.INFO,
            "audit: %(recorded)d events recorded, %(written)d written, %(dropped)d dropped (queue full), "
            "%(rejected)d rejected by the store, %(lost)d lost at shutdown, %(left)d left in the spool for the next "
            "start (%(recovered)d recovered from ended processes)", stats)


def http_app(contract: Contract, settings: Settings, dsn: str, config: ServerConfig, registry: Registry | LiveRegistry,
             registry_file: Path | None = None, rule=None, host: str = "127.0.0.1", port: int = 8765, drain=None,
             quiet: bool = False):
    """The app of `ontoos serve --http`; `drain`: the process's `lifecycle.Drain` (its server's signals);
    `quiet`: say nothing at start (a worker other than the first)."""
    from ..governance.report import Rule
    from .governance_routes import Governance

    tools = Tools(contract, None, registry, audit_writer(settings, dsn), cursors=cursors_for(settings, warn=not quiet))
    lake = LakeState(contract, settings.min_cli_version)
    authenticator = Authenticator(config, contract)
    from .sessions import Sessions

    store = None if registry_file is None else store_for(registry_file, settings.contract, registry_dsn(settings))
    governance = Governance(tools, authenticator, store, rule or Rule(),
                            audit_dsn=settings.audit_dsn or dsn, audit=settings.audit,
                            sessions=Sessions(config.session_hours * 3600, secret=settings.secret,
                                              resolve=authenticator.by_name),
                            allow_self_approval=config.allow_self_approval, secure_cookies=config.secure_cookies)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        pool = await open_pool(dsn, settings)
        tools.explorer = Explorer(contract, Executor(pool, settings), lake=lake)
        following = sign_outs = None
        if settings.shared_limits:  # the deployment's limits, kept where its audit is (the primary)
            from .shared_limits import SharedLimits

            tools.admission.shared = SharedLimits(settings.audit_dsn or dsn)
            if app.state.floods is not None:  # the per-address limit of requests without a valid token too
                app.state.floods.shared = tools.admission.shared
            if settings.secret:  # signed sessions any process serves: a sign-out anywhere ends them everywhere
                from .shared_sessions import SignOuts

                sign_outs = SignOuts(tools.admission.shared, governance.sessions)
                following = asyncio.ensure_future(sign_outs.follow())
        if tools.audit is not None:
            await tools.audit.start()
        if isinstance(tools.registry, LiveRegistry):
            tools.registry.watch()  # a registry in the database: its watcher, in this process
        try:
            async with watching(lake, pool, dsn, settings, announce=not quiet):
                gc.collect()
                gc.freeze()  # the contract, grammar and dialect tables stay: full collections need not walk them
                try:
                    yield
                finally:
                    await close_audit(tools.audit)
        finally:
            if following is not None:
                following.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await following
                await sign_outs.settled()
            if tools.admission.shared is not None:
                await tools.admission.shared.close()
            await pool.close()

    from .mcp_http import loopback_security

    return build_app(tools, authenticator, lifespan, governance, loopback_security(host, port),
                     mcp_sessions=config.mcp_sessions, drain=drain, mcp_stateless=settings.mcp_stateless)


async def run_stdio(contract: Contract, settings: Settings, dsn: str, principal: Principal,
                    registry: Registry | LiveRegistry) -> None:
    from mcp.server.stdio import stdio_server

    from .mcp_server import build_server, fixed

    pool = await open_pool(dsn, settings)
    audit = audit_writer(settings, dsn)
    if audit is not None:
        await audit.start()
    if isinstance(registry, LiveRegistry):
        registry.watch()
    lake = LakeState(contract, settings.min_cli_version)
    try:
        tools = Tools(contract, Explorer(contract, Executor(pool, settings), lake=lake), registry, audit,
                      cursors=cursors_for(settings))
        server = build_server(tools, fixed(principal), surface="mcp-stdio")
        async with watching(lake, pool, dsn, settings), running(server.changes.watch()), \
                stdio_server() as (read, write):
            forward, inbound = anyio.create_memory_object_stream(0)
            async with anyio.create_task_group() as tg:
                tg.start_soon(answer_unreadable, read, forward, write,
                              lambda e: tools.record(Answer(e.to_envelope(), error=e), principal, "mcp-stdio", None))
                await server.run(inbound, write, server.create_initialization_options())
                tg.cancel_scope.cancel()
    finally:
        await close_audit(audit)
        await pool.close()


@contextlib.asynccontextmanager
async def watching(lake: LakeState, pool, dsn: str, settings: Settings, announce: bool = True):
    """The contract compared with the database before the first request (never fatal: what drifted is
    degraded), the start line on stderr (`announce`: the contract hash and the drift summary), `_notice` on
    every envelope, and the comparison made again on the interval and on NOTIFY while the server runs."""
    lake.update(await drift.check(pool, lake.contract, settings, timeout_s=START_CHECK_S))
    if announce:
        say(f"contract {lake.contract.hash}; {lake.drift.summary()}")
    remove = install_notice(lambda: lake.notice)
    task = asyncio.create_task(Watcher(lake, pool, dsn, settings).run())
    try:
        yield lake
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        remove()


async def answer_unreadable(read, forward, write, on_refusal=None) -> None:
    """Between the stdio transport and the server. A line the SDK cannot read reaches the
    server as an exception, and goes unanswered, so a client waiting on its id would wait
    for ever; JSON-RPC answers it with its row's code: -32700 (JSON_UNREADABLE, not JSON) or
    -32600 (NOT_JSON_RPC), with its id when one can be read, else null, and the envelope in `error.data`;
    `on_refusal(error)` records it (the audit, like every other refusal)."""
    from mcp.shared.message import SessionMessage
    from mcp.types import JSONRPCError

    from ..errors import Codes, InputError
    from .mcp_http import rpc_payload

    async with forward:
        async for item in read:
            if not isinstance(item, Exception):
                await forward.send(item)
                continue
            errors = item.errors() if hasattr(item, "errors") else []
            not_json = any(err.get("type") == "json_invalid" for err in errors)
            e = InputError(Codes.JSON_UNREADABLE if not_json else Codes.NOT_JSON_RPC,
                           "the line is not JSON" if not_json else "the line is not a JSON-RPC message",
                           hint="send one JSON-RPC 2.0 message per line, UTF-8, without unpaired surrogates")
            payload = rpc_payload(e)
            payload["id"] = _id_of(errors)
            if on_refusal is not None:
                on_refusal(e)
            await write.send(SessionMessage(JSONRPCError.model_validate(payload)))


def _id_of(errors: list[dict]) -> int | str | None:
    """The id of a message the SDK could not read, when one can be read at all."""
    for err in errors:
        raw = err.get("input")
        if isinstance(raw, (str, bytes)):
            try:
                raw = json.loads(raw)  # Python's reader takes what the SDK's strict one refused (a lone surrogate)
            except (ValueError, RecursionError):  # not JSON, or nested past any sense
                return None
        if isinstance(raw, dict):
            ident = raw.get("id")
            return ident if isinstance(ident, (int, str)) and not isinstance(ident, bool) else None
    return None


def log_to_stderr(level: str = "WARNING", fmt: str = "text") -> None:
    """stdio carries the protocol on stdout: everything else goes to stderr (`logs.py`: text or JSON lines)."""
    from .logs import to_stderr

    to_stderr(level, fmt)


def cursors_for(settings: Settings, warn: bool = True) -> Cursors:
    """The cursors of this server: signed with ONTOOS_SECRET, else (with a warning) a random secret."""
    if settings.secret is None and warn:
        say("ONTOOS_SECRET is not set: cursors are signed with a random secret of this process (they end with "
            "it, and other processes of the deployment refuse them)", "WARNING")
    return Cursors(settings.secret, settings.cursor_ttl_s)


def live_registry(settings: Settings, contract: Contract) -> LiveRegistry:
    """The registry the tools serve: the file `settings.queries` (ONTOOS_QUERIES, --queries; a missing
    file is no named queries), verified, and kept in step with the file while the server runs."""
    return LiveRegistry(store_for(settings.queries, settings.contract, registry_dsn(settings)), contract)
