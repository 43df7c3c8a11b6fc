"""Engine, one transaction's statements in one libpq pipeline (engine/wire.py), on the real PostgreSQL."""

from __future__ import annotations

import datetime

import anyio
import psycopg
import pytest

from ontoos_explore.engine import wire
from ontoos_explore.engine.pool import open_pool
from ontoos_explore.engine.settings import Settings

from ..databases import new_database

pytestmark = pytest.mark.anyio


@pytest.fixture
async def conn(pg_dsn):
    """One pooled connection, configured as explorations' are."""
    settings = Settings(dsn=pg_dsn, pool_min=1, pool_max=1)
    pool = await open_pool(pg_dsn, settings)
    try:
        async with pool.connection() as c:
            yield c
    finally:
        await pool.close()


async def prepared(conn) -> dict[str, str]:
    """The session's prepared statements: name -> text (read over a cursor, not prepared itself)."""
    cur = conn.cursor()
    await cur.execute("SELECT name, statement FROM pg_catalog.pg_prepared_statements")
    return dict(await cur.fetchall())


async def test_results_come_in_order_with_parameters_typed(conn):
    day = datetime.date(2026, 1, 2)
    results = await wire.pipeline(conn, [
        ("SELECT $1::int + 1, $2::text || '!'", (41, "hi")),
        ("SELECT $1::bool, $2::date, $3::text IS NULL", (True, day, None)),
        ("SELECT 'x' WHERE false", ()),
    ])
    # a date comes as PostgreSQL's text: the pool loads the types `rows` takes as text
    assert [wire.rows(conn, r) for r in results] == [[(42, "hi!")], [(True, "2026-01-02", True)], []]


async def test_each_text_is_prepared_once_byte_for_byte(conn):
    sql = "SELECT $1::int * 2 /* as sent */"
    for n in (1, 2, 3):
        (result,) = await wire.pipeline(conn, [(sql, (n,))])
        assert wire.rows(conn, result) == [(n * 2,)]
    texts = [t for name, t in (await prepared(conn)).items() if name.startswith("ontoos_")]
    assert texts.count(sql) == 1


async def test_a_refused_statement_raises_psycopgs_own_error_and_the_connection_goes_on(conn):
    with pytest.raises(psycopg.errors.DivisionByZero):
        await wire.pipeline(conn, [("BEGIN", ()), ("SELECT 1 / $1::int", (0,)), ("ROLLBACK", ())])
    await conn.rollback()  # what the pool does with a connection back in a failed transaction
    # the statements after the refusal were not run, and those prepared before it are usable
    results = await wire.pipeline(conn, [("BEGIN", ()), ("SELECT 1 / $1::int", (1,)), ("ROLLBACK", ())])
    assert wire.rows(conn, results[1]) == [(1,)]


async def test_statements_lost_to_deallocate_all_are_prepared_again(conn):
    statements = [("BEGIN", ()), ("SELECT $1::int", (7,)), ("ROLLBACK", ())]
    await wire.pipeline(conn, statements)
    await conn.cursor().execute("DEALLOCATE ALL")  # what psycopg's own cache sends after a ROLLBACK
    results = await wire.pipeline(conn, statements)
    assert wire.rows(conn, results[1]) == [(7,)]
    assert sorted((await prepared(conn)).values()) == sorted(s for s, _ in statements)


async def test_a_connection_lost_raises_psycopgs_operational_error(conn, pg_dsn):
    await wire.pipeline(conn, [("SELECT 1", ())])
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (conn.pgconn.backend_pid,))
    with anyio.fail_after(10):  # raised, not waited on for ever
        with pytest.raises(psycopg.OperationalError):
            await wire.pipeline(conn, [("BEGIN", ()), ("SELECT 1", ()), ("ROLLBACK", ())])
    assert conn.pgconn.status == psycopg.pq.ConnStatus.BAD  # the pool replaces it


async def test_older_statements_are_closed_past_the_most_kept(conn):
    for n in range(wire.MOST + 10):
        await wire.pipeline(conn, [(f"SELECT {n}", ())])
    for _ in range(2):  # the second closes the one the first evicted (a known one evicts nothing)
        await wire.pipeline(conn, [("SELECT 'last'", ())])
    texts = [t for name, t in (await prepared(conn)).items() if name.startswith("ontoos_")]
    assert len(texts) == wire.MOST
    assert "SELECT 'last'" in texts and "SELECT 10" not in texts and f"SELECT {wire.MOST + 9}" in texts


async def test_a_table_changed_under_a_statement_fails_it_once(pg_dsn):
    dsn = new_database(pg_dsn, "wire_alter")
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("CREATE TABLE public.t (v int)")
        admin.execute("INSERT INTO public.t VALUES (1)")
    settings = Settings(dsn=dsn, pool_min=1, pool_max=1)
    pool = await open_pool(dsn, settings)
    try:
        async with pool.connection() as c:
            sql = "SELECT * FROM public.t"
            assert wire.rows(c, (await wire.pipeline(c, [(sql, ())]))[0]) == [(1,)]
            with psycopg.connect(dsn, autocommit=True) as admin:
                admin.execute("ALTER TABLE public.t ALTER COLUMN v TYPE text")
            with pytest.raises(psycopg.errors.FeatureNotSupported):  # the server's stale plan
                await wire.pipeline(c, [(sql, ())])
            assert wire.rows(c, (await wire.pipeline(c, [(sql, ())]))[0]) == [("1",)]
    finally:
        await pool.close()
