"""Governance, audit store connection: the writer's one connection, made in a thread, never abandoned.

`connect(dsn, statement_timeout_ms)` makes a connection ready for the
idempotent writes of `tables.py` (keepalives, the schema, the temporary batch
table); `open_in_thread` makes it off the event loop, closing what a
cancelled wait would otherwise leave open; `store_down` tells a store that
is away (retry later) from one that refused what was sent.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from .tables import BATCH_TABLE, ensure_schema

DEFAULTS = {"application_name": "ontoos-audit", "connect_timeout": "5", "keepalives": "1",
            "keepalives_idle": "10", "keepalives_interval": "5", "keepalives_count": "3"}


def store_down(e: BaseException, conn: psycopg.Connection | None) -> bool:
    """A failure of the store (retry later), as opposed to a refusal of what was sent."""
    if isinstance(e, (psycopg.OperationalError, psycopg.InterfaceError)):
        return True
    return conn is None or conn.closed or conn.broken


def conninfo(dsn: str) -> str:
    """`dsn` with the writer's defaults where it says nothing of them."""
    params = conninfo_to_dict(dsn)
    for k, v in DEFAULTS.items():
        params.setdefault(k, v)
    return make_conninfo(**params)


def connect(dsn: str, statement_timeout_ms: int) -> psycopg.Connection:
    conn = psycopg.connect(conninfo(dsn), autocommit=True)
    try:
        conn.execute(f"SET statement_timeout = {int(statement_timeout_ms)}")
        ensure_schema(conn)
        conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {BATCH_TABLE} (LIKE ontoos_audit.events) "
                     "ON COMMIT DELETE ROWS")
    except BaseException:
        conn.close()
        raise
    return conn


async def open_in_thread(dsn: str, statement_timeout_ms: int) -> psycopg.Connection:
    """`connect` in a worker thread. The thread cannot be stopped: if the wait for it is cancelled
    (close() gave up on a store that did not answer, and cancelled the task), the connection it may
    still make is closed there, by the thread or here, instead of being left open for the garbage
    collector to find."""
    lock = threading.Lock()
    state: dict[str, Any] = {"abandoned": False, "conn": None}

    def make() -> psycopg.Connection | None:
        conn = connect(dsn, statement_timeout_ms)
        with lock:
            if not state["abandoned"]:
                state["conn"] = conn
                return conn
        conn.close()  # nobody is waiting for it any more
        return None

    try:
        return await asyncio.to_thread(make)
    except asyncio.CancelledError:
        with lock:
            state["abandoned"] = True
            made, state["conn"] = state["conn"], None
        if made is not None:  # made, but the wait was cancelled before it was taken
            made.close()
        raise
