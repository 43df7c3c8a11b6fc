"""Engine, the third wall: Contract -> the PostgreSQL roles and column grants that mirror it.

One NOLOGIN role per contract role (`<prefix><role>`), granted SELECT on
exactly the allowed columns of its read sets (readable columns plus the join
and always-filter columns: the same set the guard allows, from allowed.py),
and on the publish log's columns when a dataset it reads has sources (each
answer reads its evidence in the same transaction, as that role).
The executor does `SET LOCAL ROLE` to it in each transaction, so a secret
column referenced anywhere fails in PostgreSQL itself (42501) even if both
walls above it failed.

The statements are composed with psycopg.sql (identifiers quoted by the
driver) from contract names only.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from ..allowed import allowed_for_role
from ..contract import PUBLISH_LOG_COLUMNS, Contract


def schemas(contract: Contract) -> list[str]:
    """Every schema the contract names: its datasets' and its publish log's."""
    return sorted({d.schema_name for d in contract.datasets.values()}
                  | ({contract.evidence.schema_name} if contract.evidence else set()))


def expected(contract: Contract, prefix: str) -> dict[str, dict[tuple[str, str], frozenset[str]]]:
    """Database role -> (schema, table) -> the columns it is granted SELECT on: what `apply` makes."""
    out: dict[str, dict[tuple[str, str], frozenset[str]]] = {}
    for role in sorted(contract.roles.values(), key=lambda r: r.name):
        relations = dict(allowed_for_role(contract, role).relations)
        if contract.evidence is not None and any(d.sources for d in contract.readable_datasets(role)):
            log_table = (contract.evidence.schema_name, contract.evidence.table_name)
            relations[log_table] = relations.get(log_table, frozenset()) | frozenset(PUBLISH_LOG_COLUMNS)
        out[f"{prefix}{role.name}"] = relations
    return out


def role_statements(contract: Contract, prefix: str) -> list[tuple[str, sql.Composed]]:
    """(database role, statement) pairs: reset, then grant, per contract role."""
    out: list[tuple[str, sql.Composed]] = []
    for db_role, relations in expected(contract, prefix).items():
        ident = sql.Identifier(db_role)
        for schema in schemas(contract):
            # revoking the table privilege revokes its column privileges too
            out.append((db_role, sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA {} FROM {}").format(sql.Identifier(schema), ident)))
            out.append((db_role, sql.SQL("REVOKE USAGE ON SCHEMA {} FROM {}").format(sql.Identifier(schema), ident)))
        for schema in sorted({s for s, _ in relations}):
            out.append((db_role, sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(schema), ident)))
        for (schema, table), columns in sorted(relations.items()):
            cols = sql.SQL(", ").join(sql.Identifier(c) for c in sorted(columns))
            out.append((db_role, sql.SQL("GRANT SELECT ({}) ON {} TO {}").format(cols, sql.Identifier(schema, table), ident)))
        # lets a non-superuser login SET ROLE to it
        out.append((db_role, sql.SQL("GRANT {} TO CURRENT_USER").format(ident)))
    return out


# a role made unless it exists: the script can be run again (every REVOKE and GRANT is idempotent already)
CREATE_ROLE = sql.SQL("DO $ontoos$ BEGIN CREATE ROLE {} NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; "
                      "END $ontoos$;")


def script(contract: Contract, prefix: str) -> str:
    """The whole grant script as text, for a DBA to read or run (and run again: it is idempotent)."""
    lines = [f"-- ontoos-explore grants for contract {contract.hash} (safe to run again)"]
    created = set()
    for db_role, stmt in role_statements(contract, prefix):
        if db_role not in created:
            created.add(db_role)
            if "$" in db_role:  # contract role names are plain identifiers; never one that ends the quoting
                raise ValueError(f"role name {db_role!r} cannot be scripted")
            lines.append(CREATE_ROLE.format(sql.Identifier(db_role)).as_string(None))
        lines.append(stmt.as_string(None) + ";")
    return "\n".join(lines) + "\n"


def apply(conn: psycopg.Connection, contract: Contract, prefix: str) -> list[str]:
    """Create missing roles and (re)grant, in one transaction. Returns the roles."""
    roles: list[str] = []
    with conn.transaction():
        with conn.cursor() as cur:
            for db_role, stmt in role_statements(contract, prefix):
                if db_role not in roles:
                    roles.append(db_role)
                    cur.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", [db_role])
                    if cur.fetchone() is None:
                        cur.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(db_role)))
                try:
                    with conn.transaction():  # a savepoint, so one refusal does not abort the rest
                        cur.execute(stmt)
                except psycopg.errors.InvalidGrantOperation:
                    pass  # GRANT role TO CURRENT_USER where the membership exists already
    return roles
