"""The explorations' pool (engine/pool.py): a connection idle past IDLE_CHECK_S is checked before it is
handed out, one used within it is not, and a connection is back in the pool as soon as it is returned.

Each test kills the pool's one backend from another connection (`pg_terminate_backend`) and asks again.
"""

from __future__ import annotations

import asyncio
import contextlib

import psycopg
import pytest

from ontoos_explore.engine import pool as pool_module
from ontoos_explore.engine.pool import open_pool
from ontoos_explore.engine.settings import Settings

pytestmark = pytest.mark.anyio


async def _backend(conn) -> int:
    return (await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0]


def _terminate(dsn: str, pid: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


@contextlib.asynccontextmanager
async def _pool(dsn: str, size: int):
    p = await open_pool(dsn, Settings(dsn=dsn, pool_min=size, pool_max=size, pool_timeout_s=5))
    await p.wait(timeout=10)
    try:
        yield p
    finally:
        await p.close()


@pytest.fixture
async def one(pg_dsn):
    async with _pool(pg_dsn, 1) as p:
        yield p


async def test_a_connection_idle_past_the_check_interval_is_checked_and_replaced_if_dead(pg_dsn, one, monkeypatch):
    monkeypatch.setattr(pool_module, "IDLE_CHECK_S", 0.2)
    async with one.connection() as conn:
        first = await _backend(conn)
    _terminate(pg_dsn, first)
    await asyncio.sleep(0.4)  # idle past the interval: checked at the next hand-out, found dead, replaced
    async with one.connection() as conn:
        second = await _backend(conn)
    assert second != first


async def test_a_connection_used_within_the_interval_is_handed_out_unchecked(pg_dsn, one, monkeypatch):
    monkeypatch.setattr(pool_module, "IDLE_CHECK_S", 30.0)
    async with one.connection() as conn:
        await _backend(conn)
    async with one.connection() as conn:  # within the interval of the last hand-out
        first = await _backend(conn)
    _terminate(pg_dsn, first)
    await asyncio.sleep(0.2)
    with pytest.raises(psycopg.OperationalError):  # not checked: the dead connection is the caller's to find
        async with one.connection() as conn:
            await _backend(conn)
    async with one.connection() as conn:  # the pool dropped it and made another
        assert await _backend(conn) != first


async def test_a_returned_connection_is_back_in_the_pool_at_once(one):
    async with one.connection() as conn:
        await _backend(conn)
    # no turn of the loop between the return and the next hand-out's count: nothing is left to a worker task
    assert one.get_stats()["pool_available"] == 1


@pytest.fixture
async def three(pg_dsn):
    async with _pool(pg_dsn, 3) as p:
        yield p


async def test_calls_one_after_another_run_on_the_same_backend(three):
    """The connection handed out is the one returned last, so one caller's calls keep one backend (and its
    warm caches) rather than going round the pool."""
    seen = []
    for _ in range(6):
        async with three.connection() as conn:
            seen.append(await _backend(conn))
    assert len(set(seen)) == 1 and three.get_stats()["pool_available"] == 3


async def test_the_connection_returned_last_is_handed_out_first(three):
    a, b, c = [await three.getconn() for _ in range(3)]
    pids = {id(x): await _backend(x) for x in (a, b, c)}
    for conn in (b, c, a):  # a is back last
        await three.putconn(conn)
    again = await three.getconn()
    assert await _backend(again) == pids[id(a)]
    await three.putconn(again)
    held = [await three.getconn() for _ in range(3)]  # all of them still, each once
    assert sorted([await _backend(x) for x in held]) == sorted(pids.values())
    for conn in held:
        await three.putconn(conn)


async def test_a_pool_kept_otherwise_is_left_as_it_is_with_a_warning(pg_dsn, caplog):
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(pg_dsn, min_size=1, open=False)
    pool._pool = list(pool._pool)  # a psycopg_pool that kept them in something else
    assert pool_module.most_recent_first(pool) is False
    assert type(pool._pool) is list and "oldest first" in caplog.text
