"""Reliability fixtures: PostgreSQL servers a test may stop and start, and `ontoos serve` subprocesses.

`lake` is the exploration database: a small contract of its own (a table,
and a view over pg_sleep that only this fixture creates, so a statement can
run past its time budget; pg_sleep never goes through the language). `store`
is a second PostgreSQL for the audit (ONTOOS_AUDIT_DSN). Both are pgserver
clusters in this session's tmp dir, verbose in their logs (the SQLSTATE of
every error), and any test that stops one starts it again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from ontoos_explore.engine import embedded
from tests import serving, sleepy_lake
from tests.databases import pg_data_dir

PREFIX = "ontoos_r_"
SCHEMA = "rel"
ACTIVE_STATES = ("active", "idle in transaction", "idle in transaction (aborted)")

# principal -> contract role; tokens are made per server
PRINCIPALS = {"pat": "patient", "hal": "hasty"}


class Pg:
    """A pgserver cluster of the test session's own, which tests may stop and start."""

    def __init__(self, path: Path) -> None:
        self.srv = embedded.start(path)
        self.dsn = embedded.dsn_of(self.srv)
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET log_error_verbosity = 'verbose'")  # the SQLSTATE in the log
            conn.execute("SELECT pg_reload_conf()")

    def stop(self) -> None:
        import pgserver

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pgserver.pg_ctl(["-w", "stop", "-m", "fast"], pgdata=self.srv.pgdata, user=self.srv.system_user)

    def start(self) -> None:
        self.srv.ensure_postgres_running()

    def running(self) -> bool:
        try:
            with psycopg.connect(self.dsn, connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def log_size(self) -> int:
        return self.srv.log.stat().st_size

    def log_since(self, offset: int) -> str:
        with open(self.srv.log, "rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")

    def activity(self, *apps: str) -> list[dict[str, Any]]:
        """Backends of these application names (default: the explorer's pool and the audit writer)."""
        apps = apps or ("ontoos-explore", "ontoos-audit")
        with psycopg.connect(self.dsn, autocommit=True) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute("SELECT pid, application_name AS app, state, query FROM pg_catalog.pg_stat_activity "
                        "WHERE application_name = ANY(%s) AND pid <> pg_backend_pid()", [list(apps)])
            return cur.fetchall()

    def events(self, where: str = "TRUE", params: Any = None) -> list[dict[str, Any]]:
        with psycopg.connect(self.dsn) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute("SELECT to_regclass('ontoos_audit.events') IS NOT NULL AS present")
            if not cur.fetchone()["present"]:
                return []
            cur.execute(f"SELECT * FROM ontoos_audit.events WHERE {where} ORDER BY at, id", params)
            return cur.fetchall()

    def gaps(self) -> list[dict[str, Any]]:
        with psycopg.connect(self.dsn) as conn, conn.cursor(row_factory=dict_row) as cur:
            cur.execute("SELECT to_regclass('ontoos_audit.gaps') IS NOT NULL AS present")
            if not cur.fetchone()["present"]:
                return []
            cur.execute("SELECT * FROM ontoos_audit.gaps ORDER BY at")
            return cur.fetchall()

    def reset_audit(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS ontoos_audit CASCADE")


@pytest.fixture(scope="session")
def contract_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rel-contract") / "reliability.yaml"
    path.write_text(sleepy_lake.contract_text(SCHEMA), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def lake() -> Pg:
    pg = Pg(pg_data_dir("rel-lake"))
    sleepy_lake.install(pg.dsn, SCHEMA, PREFIX)
    return pg


@pytest.fixture(scope="session")
def store() -> Pg:
    return Pg(pg_data_dir("rel-store"))


@pytest.fixture
def running(lake, store):
    """Every test starts with both servers up, and leaves them up."""
    for pg in (lake, store):
        if not pg.running():
            pg.start()
    yield
    for pg in (lake, store):
        if not pg.running():
            pg.start()


# ---------------------------------------------------------------- ontoos serve --http


@dataclass
class Serve:
    """`ontoos serve --http` in a subprocess, on a free loopback port."""

    workdir: Path
    dsn: str
    contract: Path
    env: dict[str, str] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen | None = None
    returncode: int | None = None

    def start(self) -> Serve:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = serving.free_port()
        self.tokens = {name: f"{name}-{secrets.token_hex(12)}" for name in PRINCIPALS}
        config = self.workdir / "server.yaml"
        # more clients at once than the pool has connections is what these tests do (a principal's
        # in-flight cap, 4 by default, would refuse them before they reach the pool)
        config.write_text("max_in_flight: 16\nprincipals:\n" + "".join(
            f'  {name}: {{role: {role}, token_sha256: "{hashlib.sha256(self.tokens[name].encode()).hexdigest()}"}}\n'
            for name, role in PRINCIPALS.items()), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
        env.update(ONTOOS_DSN=self.dsn, ONTOOS_CONTRACT=str(self.contract), ONTOOS_ROLE_PREFIX=PREFIX,
                   ONTOOS_DATA_DIR=str(self.workdir / "unused"), ONTOOS_POOL_MAX="4", ONTOOS_POOL_TIMEOUT="1",
                   PYTHONUNBUFFERED="1", **self.env)
        self._stderr = open(self.workdir / "serve.stderr.log", "wb")
        self.proc = subprocess.Popen([serving.ontoos_executable(), "serve", "--http", f"127.0.0.1:{self.port}", "--config", str(config)],
                                     env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
                                     cwd=self.workdir)
        try:
            serving.wait_healthy(self.proc, self.port, stderr=self.stderr, timeout=60)
        except serving.ServeError:
            self.stop()
            raise
        return self

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def headers(self, principal: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[principal]}"}

    def stderr(self) -> str:
        return (self.workdir / "serve.stderr.log").read_text(encoding="utf-8", errors="replace")

    def stop(self, timeout: float = 30) -> int | None:
        """SIGTERM (a clean shutdown: the requests in flight finish, the audit queue is flushed, exit 0),
        only to the process this test started."""
        if self.proc is not None:
            self.returncode = serving.stop(self.proc, timeout)
            self._stderr.close()
        return self.returncode


clean = serving.clean_exit  # the exit status of a graceful shutdown on SIGTERM


@pytest.fixture
def serve(tmp_path, contract_file, running):
    """serve(dsn, **env) -> a started Serve; stopped at the end of the test if still running."""
    started: list[Serve] = []

    def make(dsn: str, **env: str) -> Serve:
        s = Serve(tmp_path / f"serve{len(started)}", dsn, contract_file, env).start()
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


@contextlib.asynccontextmanager
async def rest(srv: Serve, principal: str | None = "pat", timeout: float = 30):
    import httpx2

    headers = srv.headers(principal) if principal else {}
    async with httpx2.AsyncClient(base_url=srv.base, headers=headers, timeout=timeout) as client:
        yield client
