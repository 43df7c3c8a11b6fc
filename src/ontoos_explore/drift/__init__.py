"""Drift: the contract checked against the database it describes.

    catalog, drift = await inspect(conn, contract, settings)   # catalog.py reads, compare.py compares
    lake = LakeState(contract, settings.min_cli_version, drift)  # state.py: what answers refuse
    watcher = Watcher(lake, pool, dsn, settings)                  # again every interval, and on NOTIFY

The service never refuses to start over drift: what moved is degraded
(refused clearly, marked in the catalog), everything else keeps answering.
"""

from __future__ import annotations

import asyncio
import logging

import psycopg

from ..contract import Contract
from ..engine import grants
from ..engine.settings import Settings
from .catalog import Catalog, read_catalog
from .compare import Drift, Finding, compare
from .state import NOT_CHECKED, LakeState, degraded

__all__ = ["CHANNEL", "Catalog", "Drift", "Finding", "LakeState", "NOT_CHECKED", "Watcher", "check", "compare",
           "degraded", "inspect"]

log = logging.getLogger("ontoos_explore.drift")
CHANNEL = "ontoos_reload"  # NOTIFY ontoos_reload: compare again now
CHECK_TIMEOUT_S = 10.0
MIN_GAP_S = 1.0  # the least time between two comparisons
RETRY_S = 10.0  # how soon a comparison that could not reach the database is tried again
KEEPALIVE_S = 60.0  # how often an otherwise idle listener is checked


async def inspect(conn, contract: Contract, settings: Settings) -> tuple[Catalog, Drift]:
    """The database's catalog and the contract compared with it, on one async connection."""
    roles = [f"{settings.role_prefix}{r}" for r in contract.roles] if settings.query_roles else []
    catalog = await read_catalog(conn, grants.schemas(contract), roles)
    drift = compare(contract, catalog, prefix=settings.role_prefix, query_roles=settings.query_roles,
                    expected_grants=grants.expected(contract, settings.role_prefix))
    return catalog, drift


async def check(pool, contract: Contract, settings: Settings, timeout_s: float = CHECK_TIMEOUT_S) -> Drift:
    """Compare once on a pooled connection, within `timeout_s`; a database that cannot be reached (or
    answer in time) is a Drift that says so."""
    try:
        async with asyncio.timeout(timeout_s):
            async with pool.connection(timeout=min(settings.pool_timeout_s, timeout_s)) as conn:
                return (await inspect(conn, contract, settings))[1]
    except Exception as e:  # noqa: BLE001 - whatever stops the comparison, the service goes on
        log.warning("the contract could not be compared with the database: %s", type(e).__name__)
        return Drift(error=f"the database could not be reached ({type(e).__name__})")


class Watcher:
    """Compares again every `settings.drift_interval_s` (0: never on a timer; at least MIN_GAP_S apart)
    and when the database sends NOTIFY ontoos_reload, on a LISTEN connection of its own: the
    notifications that arrive together are one comparison, and no two are closer than MIN_GAP_S (anyone
    connected may NOTIFY). Until a comparison has succeeded, it tries again every RETRY_S. The listener
    is checked every KEEPALIVE_S when nothing else uses it, and made again when it drops."""

    def __init__(self, lake: LakeState, pool, dsn: str, settings: Settings) -> None:
        self.lake, self.pool, self.dsn, self.settings = lake, pool, dsn, settings
        self.checks = 0

    @property
    def interval(self) -> float | None:
        every = self.settings.drift_interval_s
        return max(every, MIN_GAP_S) if every else None

    def _wait(self) -> float:
        if self.lake.drift.checked_at is None:
            return RETRY_S
        return self.interval or KEEPALIVE_S

    async def check_now(self) -> Drift:
        drift = await check(self.pool, self.lake.contract, self.settings)
        before = self.lake.drift
        if drift.checked_at is None and before.checked_at is not None:
            return before  # unreachable now: what was found last still holds
        self.lake.update(drift)
        self.checks += 1
        if [f.to_json() for f in drift.findings] != [f.to_json() for f in before.findings]:
            log.warning("%s", drift.summary())
        return drift

    async def run(self) -> None:
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True,
                                                                 connect_timeout=5) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")  # a constant: no caller's text
                    await self._listen(conn)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the listener is gone: compare on the timer meanwhile
                log.debug("drift listener: %s", type(e).__name__)
                await asyncio.sleep(min(self._wait(), RETRY_S))
                await self.check_now()

    async def _listen(self, conn) -> None:
        while True:
            wait = self._wait()
            got = [n async for n in conn.notifies(timeout=wait, stop_after=1)]
            if got:
                await asyncio.sleep(MIN_GAP_S)  # what else was sent meanwhile is the same comparison
                [n async for n in conn.notifies(timeout=0.01)]
                log.info("comparing the contract with the database again (NOTIFY %s)", CHANNEL)
            elif self.lake.drift.checked_at is not None and self.interval is None:
                await conn.execute("SELECT 1")  # the listener is alive (a half-open connection raises)
                continue
            await self.check_now()
