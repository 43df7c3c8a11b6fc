"""Shared fixtures: the demo contract, loaded once per session; a real PostgreSQL with the demo
lakehouse (one per session, or per xdist worker); a pool over it.

Every module passes alone and in any order. To check that, ONTOOS_TEST_REVERSE=1 runs the
modules in reverse order and the tests of each module in reverse order too (=modules reverses
the modules only):

    ONTOOS_TEST_REVERSE=1 .venv/bin/pytest -n 0 -q
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from ontoos_explore import load_contract
from tests.databases import pg_data_dir

ROOT = Path(__file__).resolve().parent.parent
CASES = Path(__file__).resolve().parent / "cases"


def pytest_collection_modifyitems(config, items):
    how = os.environ.get("ONTOOS_TEST_REVERSE", "").strip().lower()
    if how in ("", "0", "no", "off"):
        return
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    reordered = []
    for tests in reversed(list(modules.values())):
        reordered.extend(tests if how == "modules" else reversed(tests))
    items[:] = reordered


@pytest.fixture(scope="session", autouse=True)
def _drop_test_databases():
    """The databases tests made with tests.databases.new_database, dropped at the end on a server that
    is not the session's own (ONTOOS_TEST_DSN); an embedded one goes with its directory (dropping
    each would cost a checkpoint)."""
    from tests import databases

    yield
    if os.environ.get("ONTOOS_TEST_DSN"):
        databases.drop_created()


@pytest.fixture(scope="session")
def demo():
    return load_contract(ROOT / "contracts" / "demo.yaml")


# ---------------------------------------------------------------- a real PostgreSQL

DEMO_SCALE, DEMO_SEED = 1.0, 7


@pytest.fixture(scope="session")
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="session")
def _pg(demo):
    """(dsn, the embedded server or None): ONTOOS_TEST_DSN if set (its schema `lake` is replaced),
    else an embedded pgserver in a fresh directory of this worker's own (`databases.pg_data_dir`),
    stopped at the end of the session."""
    import psycopg

    from ontoos_explore.engine import demo_data, embedded, grants

    dsn, server = os.environ.get("ONTOOS_TEST_DSN"), None
    if not dsn:
        server = embedded.start(pg_data_dir("pg"))
        dsn = embedded.dsn_of(server)
    with psycopg.connect(dsn) as conn:
        demo_data.ensure(conn, scale=DEMO_SCALE, seed=DEMO_SEED)
    with psycopg.connect(dsn) as conn:
        grants.apply(conn, demo, "ontoos_q_")
    return dsn, server


@pytest.fixture(scope="session")
def pg_dsn(_pg) -> str:
    """A PostgreSQL with the demo lakehouse and the demo contract's grants."""
    return _pg[0]


@pytest.fixture(scope="session")
def pg_log(_pg):
    """pg_log() -> a mark; pg_log(mark) -> what the test PostgreSQL logged since (what stopped a
    statement: a cancel, a timeout), or None when the server is not ours (ONTOOS_TEST_DSN)."""
    server = _pg[1]

    def read(mark: int | None = None) -> int | str | None:
        if server is None:
            return None
        if mark is None:
            return server.log.stat().st_size
        with open(server.log, "rb") as f:
            f.seek(mark)
            return f.read().decode("utf-8", "replace")

    return read


@contextlib.asynccontextmanager
async def executor_for(dsn: str, contract, **settings):
    """An Executor over a pool of its own (two connections unless `settings` say otherwise), closed after."""
    from ontoos_explore.engine.executor import Executor
    from ontoos_explore.engine.pool import open_pool
    from ontoos_explore.engine.settings import Settings

    chosen = Settings(dsn=dsn, **{"pool_max": 2, **settings})
    pool = await open_pool(dsn, chosen)
    try:
        yield Executor(pool, chosen)
    finally:
        await pool.close()


@pytest.fixture
async def pool(pg_dsn):
    """(a pool of two connections to the test database, its Settings), closed after the test."""
    from ontoos_explore.engine.pool import open_pool
    from ontoos_explore.engine.settings import Settings

    settings = Settings(dsn=pg_dsn, pool_max=2)
    p = await open_pool(pg_dsn, settings)
    try:
        yield p, settings
    finally:
        await p.close()
