"""Runtime: Settings + Contract -> a ready Explorer (database, pool, grants).

With no DSN it starts the embedded PostgreSQL, loads the demo lakehouse if
it is missing, and applies the contract's grants; with a DSN it uses that
database as it is and only checks that the query roles exist (create them
with `ontoos grants --apply`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import psycopg

from . import drift
from .contract import Contract
from .drift import LakeState
from .engine import embedded, grants
from .engine.executor import Executor
from .engine.pool import open_pool
from .engine.settings import Settings
from .errors import Codes, ExploreError, UpstreamError
from .service import Explorer

log = logging.getLogger("ontoos_explore.runtime")


def prepare_embedded(settings: Settings, contract: Contract, *, load_demo: bool = True) -> str:
    """Start the embedded server (reusing its data), load the demo, grant; return its DSN."""
    from .engine import demo_data

    server = embedded.start(settings.data_dir)
    dsn = embedded.dsn_of(server)
    with psycopg.connect(dsn, autocommit=True) as conn:
        if load_demo and demo_data.ensure(conn):
            log.info("loaded the demo lakehouse into %s", settings.data_dir)
        if settings.query_roles:
            conn.autocommit = False
            grants.apply(conn, contract, settings.role_prefix)
    return dsn


def check_roles(dsn: str, contract: Contract, settings: Settings) -> None:
    if not settings.query_roles:
        return
    wanted = [f"{settings.role_prefix}{r}" for r in contract.roles]
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            found = {r for (r,) in conn.execute(
                "SELECT rolname FROM pg_catalog.pg_roles WHERE rolname = ANY(%s)", [wanted]).fetchall()}
    except psycopg.OperationalError:
        raise UpstreamError(reason="CONNECT_FAILED") from None
    missing = [r for r in wanted if r not in found]
    if missing:
        raise ExploreError(
            Codes.DATABASE_SETUP,
            f"the database has no role {missing[0]} for the contract's roles",
            hint="run: ontoos grants --contract PATH --dsn DSN --apply (or set ONTOOS_QUERY_ROLES=off)",
        )


def resolve_dsn(settings: Settings, contract: Contract, *, load_demo: bool = True) -> str:
    if settings.dsn is None:
        return prepare_embedded(settings, contract, load_demo=load_demo)
    check_roles(settings.dsn, contract, settings)
    return settings.dsn


@contextlib.asynccontextmanager
async def open_explorer(contract: Contract, settings: Settings, dsn: str, *,
                        compare: bool = True) -> AsyncIterator[Explorer]:
    """An Explorer on a pool of `dsn`, the contract compared with the database first (`compare`: what
    drifted is refused clearly; its answers' `_notice` says whether it did)."""
    pool = await open_pool(dsn, settings)
    lake = LakeState(contract, settings.min_cli_version)
    try:
        if compare:
            lake.update(await drift.check(pool, contract, settings))
        yield Explorer(contract, Executor(pool, settings), lake=lake)
    finally:
        await pool.close()
