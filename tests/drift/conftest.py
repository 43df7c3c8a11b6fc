"""A database of its own with the demo lake, its grants, and drift planted in it (module-scoped)."""

from __future__ import annotations

import psycopg
import pytest

from tests.databases import demo_database

PREFIX = "ontoos_q_"
# What moved in the lake since the contract was written: one of each kind of drift.
PLANTED = (
    "DROP TABLE lake.databases CASCADE",  # a dataset's table
    "ALTER TABLE lake.hosts DROP COLUMN region",  # a column
    "ALTER TABLE lake.k8s_workloads ALTER COLUMN replicas TYPE text",  # a column's type
    f"REVOKE SELECT (hostname) ON lake.hosts FROM {PREFIX}analyst",  # a query role's grant
)


@pytest.fixture(scope="module")
def drifted_dsn(pg_dsn, demo) -> str:
    """The demo lake with PLANTED applied (after its grants: a revoke must find the grant)."""
    dsn = demo_database(pg_dsn, "drift", demo)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for stmt in PLANTED:
            conn.execute(stmt)
    return dsn
