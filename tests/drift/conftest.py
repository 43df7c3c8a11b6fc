"""A database of its own with the demo lake, its grants, and drift planted in it (module-scoped)."""

from __future__ import annotations

import psycopg
import pytest

from ontoos_explore.engine import demo_data, grants
from tests.conftest import DEMO_SCALE, DEMO_SEED
from tests.databases import new_database

PREFIX = "ontoos_q_"
# What moved in the lake since the contract was written: one of each kind of drift.
PLANTED = (
    "DROP TABLE lake.databases CASCADE",  # a dataset's table
    "ALTER TABLE lake.hosts DROP COLUMN region",  # a column
    "ALTER TABLE lake.k8s_workloads ALTER COLUMN replicas TYPE text",  # a column's type
    f"REVOKE SELECT (hostname) ON lake.hosts FROM {PREFIX}analyst",  # a query role's grant
)


def demo_database(pg_dsn: str, purpose: str, contract, *planted: str) -> str:
    dsn = new_database(pg_dsn, purpose)
    with psycopg.connect(dsn) as conn:
        demo_data.ensure(conn, scale=DEMO_SCALE, seed=DEMO_SEED)
    with psycopg.connect(dsn) as conn:
        grants.apply(conn, contract, PREFIX)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for stmt in planted:
            conn.execute(stmt)
    return dsn


@pytest.fixture(scope="module")
def drifted_dsn(pg_dsn, demo) -> str:
    """The demo lake with PLANTED applied."""
    return demo_database(pg_dsn, "drift", demo, *PLANTED)
