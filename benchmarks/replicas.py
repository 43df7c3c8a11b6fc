"""The lake of a load run: the embedded PostgreSQL (`Embedded`), or a primary and a hot standby on
PostgreSQL's own streaming replication (`Replicas`, `python -m benchmarks.load --standby`).

Both offer what the load run reads: `dsn` (what the server reads the lake from), `write_dsn` (where the
audit database is made), `probe()` (the service's backends on every server, summed by application and
state), `logs()` and `log_offsets()` (PostgreSQL's own log files, read for statement timeouts), and
`pids()`. `Replicas` is built with the test suite's topology (tests/topology.py: initdb, pg_basebackup
-R, pg_ctl, with pgserver's binaries: the PostgreSQL of the other runs); the server reads from `standby,primary` with
`target_session_attrs=prefer-standby`, so while the standby is away (`take_away`) the reads go to the
primary, and no request may fail for it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from benchmarks.common import log
from benchmarks.db import ROLE_PREFIX, SEED


def _activity(dsn: str) -> dict[str, int] | None:
    """'app/state' -> backends of the explorer's pool and the audit writer on one server (None: down)."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=1, application_name="ontoos-load-probe") as conn:
            rows = conn.execute(
                "SELECT application_name, coalesce(state, '?'), count(*) FROM pg_catalog.pg_stat_activity "
                "WHERE application_name IN ('ontoos-explore', 'ontoos-audit') GROUP BY 1, 2").fetchall()
    except psycopg.Error:
        return None
    return {f"{app}/{state}": n for app, state, n in rows}


def summed(dsns: list[str]) -> dict[str, int] | None:
    """`_activity` over every server, added up (None when none answered)."""
    found = [a for a in map(_activity, dsns) if a is not None]
    if not found:
        return None
    total: dict[str, int] = {}
    for acts in found:
        for k, n in acts.items():
            total[k] = total.get(k, 0) + n
    return total


class Embedded:
    """The benchmarks' embedded pgserver (benchmarks/db.py)."""

    standby = None

    def __init__(self, dsn: str, pg) -> None:
        self.dsn = self.write_dsn = dsn
        self.pg = pg

    def probe(self) -> dict[str, int] | None:
        return summed([self.dsn])

    def logs(self) -> list[Path]:
        return [self.pg.log]

    def pids(self) -> list[int]:
        return [self.pg.get_pid()]

    def close(self) -> None:
        pass


@dataclasses.dataclass
class Away:
    """A part taken away `after_s` into the measured load, for `down_s` (0: for the rest of the run), and when
    it was: asked to stop, stopped, asked to start, up."""

    after_s: float
    down_s: float
    stopping: float | None = None
    down: float | None = None
    starting: float | None = None
    up: float | None = None


def lake_server(name: str, contract, scale: float, databases: tuple[str, ...] = ()):
    """A PostgreSQL of its own on loopback TCP (the test suite's topology) with the demo lake at `scale` in
    its database `lake`, the contract's grants, ANALYZEd, and empty `databases` beside it. pgserver's
    binaries: the PostgreSQL of the other runs (benchmarks/db.py), so the plans compare."""
    from ontoos_explore.engine import demo_data, grants
    from tests.topology import Postgres, pgserver_bin

    server = Postgres.initdb(name, bin=pgserver_bin()).start()
    try:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            for db in ("lake", *databases):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db)))
        with psycopg.connect(server.dsn("lake")) as conn:
            demo_data.ensure(conn, scale=scale, seed=SEED)
        with psycopg.connect(server.dsn("lake")) as conn:
            grants.apply(conn, contract, ROLE_PREFIX)
        with psycopg.connect(server.dsn("lake"), autocommit=True) as conn:
            conn.execute("ANALYZE")  # the planner's estimates (the cost budget) as on a lake long loaded
    except BaseException:
        server.destroy()
        raise
    return server


class Replicas:
    """A primary with the demo lakehouse at `scale` and the contract's grants, and a hot standby of it."""

    def __init__(self, contract, scale: float) -> None:
        from tests.topology import read_dsn

        t0 = time.perf_counter()
        self.primary = lake_server("load-primary", contract, scale)
        try:
            self.standby = self.primary.basebackup("load-standby").start()
            self.standby.wait_replayed(self.primary)
        except BaseException:
            self.close()
            raise
        self.dsn = read_dsn([self.standby, self.primary], "lake")
        self.write_dsn = self.primary.dsn("lake")
        with psycopg.connect(self.write_dsn) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
            (rows,) = conn.execute("SELECT sum(c.reltuples)::bigint FROM pg_catalog.pg_class c JOIN "
                                   "pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
                                   "WHERE n.nspname = 'lake' AND c.relkind = 'r'").fetchone()
        self.info: dict[str, Any] = {"scale": scale, "seed": SEED, "total_rows": int(rows or 0),
                                     "topology": "a primary and a hot standby (pg_basebackup -R; the server reads "
                                     "from standby,primary with prefer-standby)", "server_version": version,
                                     "setup_s": round(time.perf_counter() - t0, 1)}
        log(f"  primary :{self.primary.port} and standby :{self.standby.port} ready in {self.info['setup_s']} s")

    def probe(self) -> dict[str, int] | None:
        return summed([self.standby.dsn("lake"), self.primary.dsn("lake")])

    def logs(self) -> list[Path]:
        return [self.standby.log, self.primary.log]

    def pids(self) -> list[int]:
        return [int((s.data / "postmaster.pid").read_text().split()[0]) for s in (self.primary, self.standby)
                if s.running()]

    async def take_away(self, away: Away, start_at: float) -> None:
        """Stop the standby (`pg_ctl stop -m fast`) at `start_at`, and start it again `down_s` later."""
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        away.stopping = time.monotonic()
        log("  standby: stopping it" + (f" for {away.down_s:g} s" if away.down_s else " for the rest of the run"))
        await asyncio.to_thread(self.standby.stop, "fast")
        away.down = time.monotonic()
        if not away.down_s:
            return
        await asyncio.sleep(away.down_s)
        away.starting = time.monotonic()
        await asyncio.to_thread(self.standby.start)
        away.up = time.monotonic()
        log(f"  standby: up again ({away.up - away.starting:.1f} s to start)")

    def close(self) -> None:
        for part in (getattr(self, "standby", None), self.primary):
            if part is not None:
                part.destroy()
