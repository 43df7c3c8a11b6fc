"""Engine, faults on a PostgreSQL of the test's own: timeouts, outage and restart,
cancellation, and 200 mixed explorations without a leaked connection.

The slow dataset is a view over pg_sleep that only this fixture creates:
pg_sleep never goes through the language.
"""

from __future__ import annotations

import asyncio
import json
import time
import warnings

import psycopg
import pytest

from ontoos_explore.engine.executor import Executor
from ontoos_explore.engine.pool import open_pool
from ontoos_explore.engine.settings import Settings
from ontoos_explore.service import Explorer
from tests import sleepy_lake
from tests.databases import pg_data_dir

pytestmark = pytest.mark.anyio

PREFIX = "ontoos_f_"
SCHEMA = "faults"


@pytest.fixture(scope="module")
def contract():
    return sleepy_lake.contract(SCHEMA)


@pytest.fixture(scope="module")
def server():
    """(pgserver instance, dsn) of a server this module may stop and start."""
    from ontoos_explore.engine import embedded

    srv = embedded.start(pg_data_dir("faults"))
    dsn = embedded.dsn_of(srv)
    sleepy_lake.install(dsn, SCHEMA, PREFIX)
    return srv, dsn


def settings_for(dsn: str, **kw) -> Settings:
    return Settings(dsn=dsn, role_prefix=PREFIX, **{"pool_max": 4, "pool_timeout_s": 2, **kw})


async def open_explorer(dsn, contract, **kw):
    settings = settings_for(dsn, **kw)
    pool = await open_pool(dsn, settings)
    return pool, Explorer(contract, Executor(pool, settings))


def activity(dsn: str) -> list[tuple[str, str]]:
    """(state, query) of this project's other backends."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(
            "SELECT state, query FROM pg_stat_activity WHERE application_name = 'ontoos-explore' "
            "AND pid <> pg_backend_pid()").fetchall()


async def settled(pool, timeout: float = 30.0) -> dict:
    """Pool stats once every connection is back (or the timeout passes)."""
    deadline = time.monotonic() + timeout
    while True:
        stats = pool.get_stats()
        if stats.get("pool_available", 0) == stats.get("pool_size", 0) or time.monotonic() > deadline:
            return stats
        await asyncio.sleep(0.05)


async def test_a_statement_past_the_budget_is_killed_by_postgres(server, contract):
    _, dsn = server
    pool, explorer = await open_explorer(dsn, contract)
    try:
        answer = await explorer.explore("explore slow fields id, label limit 100", "hasty")
        err = answer.envelope["error"]
        assert (err["subtype"], err["code"]) == ("QUERY_BUDGET_EXCEEDED", "EX410")
        assert "300 ms" in err["message"] and "filter" in err["hint"]
        # PostgreSQL stopped it, not the client's margin: a client deadline would say CLIENT_DEADLINE
        assert answer.error.reason == "STATEMENT_TIMEOUT"
        assert "pg_sleep" not in json.dumps(answer.envelope)
        # the pool is healthy: the next exploration on the same connection works
        again = await explorer.explore("explore things fields id, label where id <= 3 limit 10", "hasty")
        assert again.ok and again.envelope["meta"]["rows"] == 3
        stats = await settled(pool)
        assert stats["pool_available"] == stats["pool_size"]
        assert not [a for a in activity(dsn) if a[0] != "idle"]
    finally:
        await pool.close()


async def test_database_down_then_back(server, contract):
    srv, dsn = server
    import pgserver

    pool, explorer = await open_explorer(dsn, contract, pool_timeout_s=1)
    try:
        assert (await explorer.explore("explore things fields id limit 1", "patient")).ok
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pgserver.pg_ctl(["-w", "stop", "-m", "fast"], pgdata=srv.pgdata, user=srv.system_user)
        down = await explorer.explore("explore things fields id limit 1", "patient")
        err = down.envelope["error"]
        assert (err["type"], err["subtype"], err["code"]) == ("network", "UPSTREAM_UNAVAILABLE", "EX601")
        assert "retry" in err["hint"]
        srv.ensure_postgres_running()
        back = None
        for _ in range(40):  # the first call after the restart must work, at the latest once the pool reconnects
            back = await explorer.explore("explore things fields id limit 1", "patient")
            if back.ok:
                break
            await asyncio.sleep(0.25)
        assert back.ok, back.envelope
    finally:
        await pool.close()
        srv.ensure_postgres_running()


async def test_a_database_that_is_not_there_is_upstream_unavailable(contract, tmp_path):
    dsn = f"postgresql://postgres@/postgres?host={tmp_path}&connect_timeout=1"
    pool, explorer = await open_explorer(dsn, contract, pool_timeout_s=0.5)
    try:
        answer = await explorer.explore("explore things fields id limit 1", "patient")
        assert answer.envelope["error"]["subtype"] == "UPSTREAM_UNAVAILABLE"
        assert str(tmp_path) not in json.dumps(answer.envelope)  # no connection details
    finally:
        await pool.close()


def log_since(srv, offset: int) -> str:
    with open(srv.log, "rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


async def test_a_cancelled_call_frees_its_connection(server, contract):
    srv, dsn = server
    pool, explorer = await open_explorer(dsn, contract, pool_max=1)
    mark = srv.log.stat().st_size
    try:
        task = asyncio.create_task(explorer.explore("explore slow fields id limit 100", "patient"))
        deadline = time.monotonic() + 30
        while not any("slow_things" in q for s, q in activity(dsn) if s == "active"):
            assert time.monotonic() < deadline and not task.done(), "the slow exploration never started"
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the query is cancelled on the server (PostgreSQL logs the cancel: it did not just run to its
        # end), and the single connection comes back
        deadline = time.monotonic() + 30
        while ("canceling statement due to user request" not in log_since(srv, mark)
               or any(s == "active" for s, _ in activity(dsn))) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert "canceling statement due to user request" in log_since(srv, mark)
        assert not any(s == "active" for s, _ in activity(dsn))
        answer = await asyncio.wait_for(explorer.explore("explore things fields id limit 1", "patient"), 30)
        assert answer.ok
    finally:
        await pool.close()


async def test_200_mixed_explorations_leak_nothing(server, contract):
    _, dsn = server
    pool, explorer = await open_explorer(dsn, contract, pool_max=4)
    kinds = {
        "good": ("explore things fields id, label where id between 1 and 50 order by id limit 20", "patient"),
        "refused": ("explore things fields token", "patient"),
        "syntax": ("explore things fields", "patient"),
        "timeout": ("explore slow fields id limit 100", "hasty"),
    }
    plan = [list(kinds)[i % 4] for i in range(200)]
    sem = asyncio.Semaphore(16)

    async def one(kind):
        async with sem:
            source, role = kinds[kind]
            return kind, await explorer.explore(source, role)

    try:
        results = await asyncio.gather(*(one(k) for k in plan))
        expected = {"good": None, "refused": "UNKNOWN_FIELD", "syntax": "SYNTAX_ERROR", "timeout": "QUERY_BUDGET_EXCEEDED"}
        for kind, answer in results:
            if expected[kind] is None:
                assert answer.ok and answer.envelope["meta"]["rows"] == 20, answer.envelope
            else:
                assert answer.envelope["error"]["subtype"] == expected[kind], (kind, answer.envelope)
            assert "ONTOOS-SECRET-" not in json.dumps(answer.envelope)
        stats = await settled(pool)
        assert stats["pool_size"] <= 4 and stats["pool_available"] == stats["pool_size"]
        assert stats.get("requests_waiting", 0) == 0
        assert not [a for a in activity(dsn) if a[0] in ("active", "idle in transaction", "idle in transaction (aborted)")]
    finally:
        await pool.close()


async def test_a_lost_connection_is_no_answer_the_read_is_asked_again(server, contract):
    """Every pooled connection's backend is terminated between two calls (as a restarted server or a
    standby taken away leaves them): the next call is answered from a new connection, not refused."""
    _, dsn = server
    pool, explorer = await open_explorer(dsn, contract, pool_min=2, pool_max=2)
    try:
        asked = {"dataset": "things", "fields": ["id"], "order_by": ["id"], "limit": 3}
        first = await explorer.explore(asked, "patient")
        assert first.ok, first.envelope
        with psycopg.connect(dsn, autocommit=True) as conn:
            ended = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                                 "WHERE application_name = 'ontoos-explore' AND pid <> pg_backend_pid()").fetchone()[0]
        assert ended >= 1
        again = [await explorer.explore(asked, "patient") for _ in range(3)]
        assert all(a.ok for a in again), [a.envelope for a in again]
        assert again[0].envelope["data"]["rows"] == first.envelope["data"]["rows"]
    finally:
        await pool.close()


async def test_a_dsn_of_several_hosts_reads_from_one_that_answers(server, contract, tmp_path):
    """libpq's multi-host DSN: the first host is a socket nobody listens on; the exploration is answered
    by the next (how reads go to whichever standby is up, `load_balance_hosts` spreading them)."""
    _, dsn = server
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    parts = conninfo_to_dict(dsn)
    hosts = make_conninfo(dsn, host=f"{tmp_path},{parts['host']}", port=f"{parts.get('port', 5432)},"
                                                                          f"{parts.get('port', 5432)}",
                          load_balance_hosts="disable", target_session_attrs="any")
    pool, explorer = await open_explorer(hosts, contract)
    try:
        answer = await explorer.explore({"dataset": "things", "fields": ["id"], "limit": 2}, "patient")
    finally:
        await pool.close()
    assert answer.ok, answer.envelope


@pytest.mark.parametrize("error, lost", [
    (psycopg.errors.AdminShutdown("terminating connection due to administrator command"), True),  # 57P01
    (psycopg.errors.CrashShutdown("crash"), True),  # 57P02
    (psycopg.errors.CannotConnectNow("starting up"), True),  # 57P03
    (psycopg.errors.ConnectionFailure("gone"), True),  # class 08
    (psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly"), True),
    (psycopg.errors.PipelineAborted("pipeline aborted"), True),  # the socket closed under a pipeline
    (psycopg.errors.QueryCanceled("canceling statement due to statement timeout"), False),  # the caller's budget
    (psycopg.errors.DiskFull("no space"), False),  # 53100: the statement, not the connection
    (psycopg.errors.DivisionByZero("division by zero"), False),  # not an OperationalError at all
    (__import__("psycopg_pool").PoolTimeout("no connection in 1 s"), False),  # one, but no connection was had
])
def test_what_counts_as_a_lost_connection(error, lost):
    """A lost connection is asked again elsewhere; a statement the server refused is the answer."""
    from ontoos_explore.engine.translate import connection_lost

    assert connection_lost(error, None) is lost
