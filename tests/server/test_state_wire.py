"""The shared limits' statements over libpq (server/state_wire.py), on real PostgreSQL: rows come back as
text with NULL as None; a statement the server refuses raises Refused and leaves the connection good;
one cancelled halfway is read to its end before the next is sent; a
connection whose session ended is Broken; and SharedLimits, given a broken wire, takes its own
limits for that call and a new connection after."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from ontoos_explore.server.shared_limits import SharedLimits, Unavailable
from ontoos_explore.server.state_wire import Broken, Refused, Wire, text_array

pytestmark = pytest.mark.anyio
STATEMENTS = {b"echo": "SELECT $1::text AS t, NULL::int AS n, array_length($2::int8[], 1) AS k",
              b"divide": "SELECT 1 / $1::int", b"sleep": "SELECT pg_sleep($1::float8)"}


@pytest.fixture
async def wire(pg_dsn):
    conn = await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True)
    w = Wire(conn)
    await w.prepare(STATEMENTS)
    yield w, conn
    await conn.close()


async def test_rows_come_back_as_text_and_null_as_none(wire):
    w, _ = wire
    assert await w.ask(b"echo", ["å'b".encode(), text_array([5, -2**63, 2**63 - 1])]) == [("å'b".encode(), None, b"3")]


async def test_a_refused_statement_names_its_sqlstate_and_the_connection_stays_good(wire):
    w, conn = wire
    with pytest.raises(Refused) as refused:
        await w.ask(b"divide", [b"0"])
    assert refused.value.sqlstate == "22012"
    assert not w.broken and await w.ask(b"divide", [b"1"]) == [(b"1",)]
    assert (await (await conn.execute("SELECT 2")).fetchone()) == (2,)  # psycopg's own path still works


async def test_a_statement_cancelled_halfway_is_read_to_its_end_before_the_next(wire):
    """The caller goes; what the server answers it is still read, so the next statement gets its own
    answer on the same connection (whose session, and advisory locks, stay)."""
    w, conn = wire
    pid = conn.info.backend_pid
    task = asyncio.ensure_future(w.ask(b"sleep", [b"0.5"]))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not w.broken
    started = time.monotonic()
    assert await w.ask(b"divide", [b"1"]) == [(b"1",)]  # after the sleep's own answer
    assert time.monotonic() - started >= 0.3 and conn.info.backend_pid == pid


async def test_a_session_that_ended_is_broken(wire, pg_dsn):
    w, conn = wire
    with psycopg.connect(pg_dsn, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
    with pytest.raises(Broken):
        await w.ask(b"divide", [b"1"])
    assert w.broken


async def test_shared_limits_on_a_broken_wire_fall_back_once_then_connect_again(pg_dsn):
    from tests.databases import new_database

    limits = SharedLimits(new_database(pg_dsn, "state"))
    try:
        assert await limits.take("principal:w", 5, 0.0001) == 0.0
        first = limits._conn
        limits._wire.broken = True  # as a connection lost halfway leaves it
        with pytest.raises(Unavailable):
            await limits.take("principal:w", 5, 0.0001)
        assert limits._conn is None and first.closed
        deadline = time.monotonic() + 5
        while True:  # a new connection once the retry interval has passed; the bucket kept its count
            try:
                _, tokens = await limits.take_counted("principal:w", 5, 0.0001)
                break
            except Unavailable:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
        assert limits._conn is not first and round(tokens) == 3
    finally:
        await limits.close()
