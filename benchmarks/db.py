"""The benchmark's own embedded PostgreSQL: one pgserver data directory per demo scale.

    dsn = ensure_database(scale=25)   # starts it, loads the demo at that scale unless loaded, applies grants

Data lives under benchmarks/.data/pg-s<scale> (gitignored), so a full run and
a --quick run do not reload each other's lakehouse. The server is stopped when
the last process attached to it exits (pgserver's cleanup_mode="stop").
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg

from ontoos_explore.contract import Contract
from ontoos_explore.engine import demo_data, embedded, grants

DATA = Path(__file__).resolve().parent / ".data"
ROLE_PREFIX = "ontoos_q_"
SEED = 7

_servers: list = []  # keep the pgserver handles alive for the process


def data_dir(scale: float) -> Path:
    tag = f"{scale:g}".replace(".", "_")
    return DATA / f"pg-s{tag}"


def ensure_database(contract: Contract, scale: float, log=print) -> tuple[str, dict]:
    """Start the scale's server, load the demo unless that scale is loaded, grant. -> (dsn, info)."""
    t0 = time.perf_counter()
    server = embedded.start(data_dir(scale))
    _servers.append(server)
    dsn = embedded.dsn_of(server)
    started = time.perf_counter() - t0
    with psycopg.connect(dsn, autocommit=True) as conn:
        t1 = time.perf_counter()
        loaded = demo_data.ensure(conn, scale=scale, seed=SEED)
        load_s = time.perf_counter() - t1
        if loaded:
            log(f"  loaded the demo lakehouse at scale {scale:g} in {load_s:.1f} s")
        conn.autocommit = False
        grants.apply(conn, contract, ROLE_PREFIX)
        conn.commit()
        conn.autocommit = True
        rows = dict(conn.execute(
            "SELECT c.relname, c.reltuples::bigint FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = 'lake' AND c.relkind = 'r' ORDER BY c.relname").fetchall())
        version = conn.execute("SHOW server_version").fetchone()[0]
    info = {"scale": scale, "seed": SEED, "data_dir": str(data_dir(scale)), "loaded_now": loaded,
            "load_s": round(load_s, 2) if loaded else None, "start_s": round(started, 2),
            "server_version": version, "rows": {k: int(v) for k, v in rows.items()},
            "total_rows": int(sum(rows.values()))}
    return dsn, info
