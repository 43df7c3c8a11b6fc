"""Engine, connections: the pool explorations run on, its session settings pinned.

Every connection is autocommit (each exploration opens its own transaction, `executor`), made with
CONNECT_OPTIONS (the session's settings as the result text and the guard expect them: a search_path of
pg_catalog and pg_temp, UTC, ISO dates, read-only by default, a statement-timeout ceiling), the types
`rows` takes as text loaded as text, and psycopg's own preparing off (`wire` prepares the statements).
A connection handed out within IDLE_CHECK_S of its last hand-out is handed out unchecked; one idle longer
is checked first. The pool has no `reset` hook: with one, psycopg_pool returns every connection through
a task of its worker (a wake-up of another task per request, and the connection back only once it ran);
without, it is back in the pool as `putconn` returns.

The connection handed out is the one returned last (`MostRecentFirst`): psycopg_pool hands out the one
idle longest, so calls one after another went round every connection of the pool, each time to a
backend whose caches the others' turns had gone cold (a filtered scan, one caller, a pool of 8, three
runs of `benchmarks/pool_order_bench.py`: 1.07-1.44 ms a call and 0.74-0.97 ms of PostgreSQL's CPU,
against 0.89-1.08 and 0.56-0.70 handed the one returned last; 16 callers alike either way). Under
load every connection works anyway; when it is quiet, those at the bottom stay idle, are checked when
next handed out, and go when the pool shrinks (`max_idle`).
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import deque

import psycopg
from psycopg_pool import AsyncConnectionPool

from .rows import load_as_text
from .settings import Settings

IDLE_CHECK_S = 1.0  # a connection idle longer than this is checked before use

log = logging.getLogger("ontoos_explore.engine")

CONNECT_OPTIONS = " ".join(
    f"-c {k}={v}"
    for k, v in {
        "search_path": "pg_catalog,pg_temp",
        "standard_conforming_strings": "on",
        "TimeZone": "UTC",  # timestamptz text ends in +00
        "DateStyle": "ISO",  # dates and timestamps as YYYY-MM-DD hh:mm:ss
        "IntervalStyle": "postgres",
        "bytea_output": "hex",
        "extra_float_digits": "1",  # floats round-trip
        "default_transaction_read_only": "on",
        "application_name": "ontoos-explore",
        "statement_timeout": "60000",  # a ceiling; each exploration sets its own, lower
        "idle_in_transaction_session_timeout": "60000",
    }.items()
)

async def open_pool(dsn: str, settings: Settings) -> AsyncConnectionPool:
    """A pool of autocommit connections with the session settings pinned.

    It opens in the background: a database that is down makes calls wait
    `pool_timeout_s` and answer UPSTREAM_UNAVAILABLE, never blocks start-up."""
    pool = AsyncConnectionPool(
        dsn,
        min_size=settings.pool_min,
        max_size=settings.pool_max,
        # prepare_threshold None: psycopg prepares nothing of its own, so it never sends the DEALLOCATE ALL
        # it follows a ROLLBACK with, which would take the statements `wire` prepared with it
        kwargs={"autocommit": True, "options": CONNECT_OPTIONS, "cursor_factory": psycopg.AsyncRawCursor,
                "prepare_threshold": None},
        configure=_configure,
        check=_check_if_idle,
        timeout=settings.pool_timeout_s,
        # psycopg_pool's retry delay doubles without a cap while it keeps trying: after a 40 s outage
        # the first connection came 22 s late. Giving up after 5 s, the next request starts afresh.
        reconnect_timeout=5.0,
        name="ontoos-explore",
        open=False,
    )
    most_recent_first(pool)
    await pool.open(wait=False)
    return pool


class MostRecentFirst(deque):
    """A pool's idle connections as psycopg_pool keeps them (a deque it takes from with `popleft` and
    returns to with `append`), each returned to the front: the next one handed out is the one back last.
    (Its shrinking takes from the front too, so a pool idle for `max_idle` closes the one back last and
    keeps the others, each checked when next handed out: once per `max_idle` at most.)"""

    def append(self, conn) -> None:
        self.appendleft(conn)


def most_recent_first(pool: AsyncConnectionPool) -> bool:
    """Make `pool` (not open yet) hand out its most recently returned connection first; False, and the
    pool as it is (the oldest first: slower, as correct), when this psycopg_pool keeps them otherwise."""
    idle = getattr(pool, "_pool", None)
    if type(idle) is not deque or idle:
        log.warning("this psycopg_pool keeps its idle connections otherwise: they are handed out oldest first")
        return False
    pool._pool = MostRecentFirst()
    return True


async def _configure(conn) -> None:
    """Pool `configure` hook: the types `rows` takes as PostgreSQL's text, loaded as text."""
    load_as_text(conn.adapters)


_handed: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # connection -> when it was last handed out


async def _check_if_idle(conn) -> None:
    """Pool `check` hook, at every hand-out: a connection handed out within IDLE_CHECK_S is used as is (an
    empty query per checkout cost 0.1-0.25 ms); one idle longer is checked, so a database restarted while
    the pool was quiet is noticed before a query fails. (Timed from the last hand-out, not the return: a
    connection back from a query longer than IDLE_CHECK_S is checked once more than it needs.)"""
    now = time.monotonic()
    last = _handed.get(conn, 0.0)
    _handed[conn] = now
    if now - last > IDLE_CHECK_S:
        await AsyncConnectionPool.check_connection(conn)
