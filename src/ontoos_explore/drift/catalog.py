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

# A column's type is its base type (a domain's underlying one), without a precision: format_type with a
# null typmod gives `timestamp with time zone` for timestamptz(3), and pg_catalog's own names.
COLUMNS = (
    "SELECT n.nspname, c.relname, a.attname, "
    "pg_catalog.format_type(coalesce(b.oid, t.oid), NULL), coalesce(b.typcategory, t.typcategory) "
    "FROM pg_catalog.pg_attribute a "
    "JOIN pg_catalog.pg_class c ON c.oid = a.attrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "JOIN pg_catalog.pg_type t ON t.oid = a.atttypid "
    "LEFT JOIN pg_catalog.pg_type b ON b.oid = t.typbasetype AND t.typtype = 'd' "
    "WHERE n.nspname = ANY($1) AND c.relkind IN ('r', 'v', 'm', 'p', 'f') AND a.attnum > 0 AND NOT a.attisdropped"
)
# Each role that exists: whether the login user may SET ROLE to it, and the schemas it may use.
ROLES = (
    "SELECT r.rolname, pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER'), "
    "coalesce(array_agg(n.nspname::text) FILTER (WHERE pg_catalog.has_schema_privilege(r.oid, n.oid, 'USAGE')), '{}'::text[]) "
    "FROM pg_catalog.pg_roles r LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = ANY($2) "
    "WHERE r.rolname = ANY($1) GROUP BY r.rolname, r.oid"
)
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
    usage: dict[str, frozenset[str]] | None = None  # role -> the schemas it may use (None: not read)
    members: frozenset[str] | None = None  # the roles the login user may SET ROLE to (None: not read)
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
    await cur.execute(ROLES, [roles, schemas])
    read = await cur.fetchall()
    found = frozenset(r for r, _, _ in read)
    members = frozenset(r for r, member, _ in read if member)
    usage = {r: frozenset(used) for r, _, used in read}
    grants: dict[str, dict[tuple[str, str], set[str]]] = {}
    if found:
        await cur.execute(GRANTS, [sorted(found), schemas])
        for role, schema, table, column in await cur.fetchall():
            grants.setdefault(role, {}).setdefault((schema, table), set()).add(column)
    await cur.execute(SERVER)
    version, standby = await cur.fetchone()
    return Catalog(tables, found, {r: {k: frozenset(v) for k, v in t.items()} for r, t in grants.items()},
                   usage, members, version, bool(standby))
