"""Drift, the catalog: what the database has, read from pg_catalog with static statements -> `Catalog`.

    catalog = await read_catalog(conn, schemas=["lake"], roles=["ontoos_q_analyst", ...])

Three statements, each with its values as parameters (never text of the
contract's or a caller's): the columns of every table, view, materialized
view and foreign table in the schemas the contract names (with each
column's type and its type's category); which of the given database roles
exist; and, for those, every column of those tables each role can SELECT
(`has_column_privilege`: a table-wide grant, a column grant, PUBLIC's, or
one inherited through membership, as PostgreSQL itself decides). Plus the
server's version and whether it is a standby, for `doctor` and `/readyz`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg

from ..engine.executor import PING

COLUMNS = (
    "SELECT n.nspname, c.relname, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), t.typcategory "
    "FROM pg_catalog.pg_attribute a "
    "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
    "WHERE n.nspname = ANY($1) AND c.relkind IN ('r', 'v', 'm', 'p', 'f') AND a.attnum > 0 AND NOT a.attisdropped"
)
ROLES = "SELECT rolname FROM pg_catalog.pg_roles WHERE rolname = ANY($1)"
GRANTS = (
    "SELECT r.rolname, n.nspname, c.relname, a.attname "
    "FROM pg_catalog.pg_roles r "
    "CROSS JOIN pg_catalog.pg_class c "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid "
    "WHERE r.rolname = ANY($1) AND n.nspname = ANY($2) AND c.relkind IN ('r', 'v', 'm', 'p', 'f') "
    "AND a.attnum > 0 AND NOT a.attisdropped "
    "AND pg_catalog.has_column_privilege(r.oid, c.oid, a.attnum, 'SELECT')"
)
SERVER = PING  # the server's version, and whether it is a standby


@dataclass(frozen=True)
class Catalog:
    """What the database has: (schema, table) -> column -> (type, category); roles; role -> (schema,
    table) -> the columns it can SELECT."""

    tables: dict[tuple[str, str], dict[str, tuple[str, str]]] = field(default_factory=dict)
    roles: frozenset[str] = frozenset()
    grants: dict[str, dict[tuple[str, str], frozenset[str]]] = field(default_factory=dict)
    version: str = ""
    standby: bool = False

    def table(self, schema: str, table: str) -> dict[str, tuple[str, str]] | None:
        return self.tables.get((schema, table))


async def read_catalog(conn, schemas: list[str], roles: list[str]) -> Catalog:
    """The catalog of `schemas`, and the grants of those of `roles` that exist, on one async connection
    (autocommit, as the login user: the catalog is not the query roles' to read)."""
    tables: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}
    cur = psycopg.AsyncRawCursor(conn)  # $n placeholders, whatever the connection's cursor factory
    await cur.execute(COLUMNS, [schemas])
    for schema, table, column, type_name, category in await cur.fetchall():
        tables.setdefault((schema, table), {})[column] = (type_name, category)
    await cur.execute(ROLES, [roles])
    found = frozenset(r for (r,) in await cur.fetchall())
    grants: dict[str, dict[tuple[str, str], set[str]]] = {}
    if found:
        await cur.execute(GRANTS, [sorted(found), schemas])
        for role, schema, table, column in await cur.fetchall():
            grants.setdefault(role, {}).setdefault((schema, table), set()).add(column)
    await cur.execute(SERVER)
    version, standby = await cur.fetchone()
    return Catalog(tables, found, {r: {k: frozenset(v) for k, v in t.items()} for r, t in grants.items()},
                   version, bool(standby))
