"""Databases of a test's own on the test PostgreSQL: `new_database(pg_dsn, "audit")` -> the DSN of a
new, empty database (from template0) on the same server.

A server under test writes its audit to `ontoos_audit` in its exploration database unless
ONTOOS_AUDIT_DSN says otherwise; pointing each one at a database of its own means its tests read
exactly the events it recorded (no baseline to take, nothing left by an earlier test or module to
count) and never disturb another module's counts. `drop_created()` drops them all (conftest does,
at the end of a session on ONTOOS_TEST_DSN; an embedded server is thrown away whole).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

_created: list[tuple[str, str]] = []  # (the server's DSN, a database made on it), to drop at the end

# Data directories of embedded servers live outside pytest's temporary root: pytest makes that root
# private (0700) whenever a session starts, and as root pgserver runs PostgreSQL as its own user, which
# must reach the directory (a second pytest on the machine would otherwise take that away mid-initdb).
_PG_ROOT = Path(tempfile.gettempdir()) / f"ontoos-test-pg-{os.getuid()}"


def pg_data_dir(name: str) -> Path:
    """A new directory for an embedded server's data (removed when this process exits, after the servers
    pgserver stops then: atexit runs what it was given last first)."""
    _PG_ROOT.mkdir(mode=0o711, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=_PG_ROOT))
    path.chmod(0o711)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path / "data"


def new_database(pg_dsn: str, purpose: str) -> str:
    name = f"ontoos_test_{purpose}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
    _created.append((pg_dsn, name))
    return make_conninfo(pg_dsn, dbname=name)


def database_of(dsn: str) -> str:
    return conninfo_to_dict(dsn).get("dbname") or ""


def drop_created() -> None:
    while _created:
        pg_dsn, name = _created.pop()
        try:
            with psycopg.connect(pg_dsn, autocommit=True, connect_timeout=5) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        except psycopg.Error:
            pass  # the server is gone already (an embedded one stops with the session)


def demo_database(pg_dsn: str, purpose: str, contract, *statements: str, prefix: str = "ontoos_q_") -> str:
    """A new database with the demo lake and `contract`'s grants (roles `prefix`...), then `statements`
    run in it (autocommit): the DSN."""
    from ontoos_explore.engine import demo_data, grants
    from tests.conftest import DEMO_SCALE, DEMO_SEED

    dsn = new_database(pg_dsn, purpose)
    with psycopg.connect(dsn) as conn:
        demo_data.ensure(conn, scale=DEMO_SCALE, seed=DEMO_SEED)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for stmt in statements:
            conn.execute(stmt)
    with psycopg.connect(dsn) as conn:
        grants.apply(conn, contract, prefix)
    return dsn
