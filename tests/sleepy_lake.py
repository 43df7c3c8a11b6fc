"""A small lake of the tests' own for faults: a table with a secret column, and a view that
sleeps 50 ms per row (500 rows: a whole scan takes 25 s), so a statement can run past its time
budget. pg_sleep never goes through the language: only this fixture's SQL creates the view.

    contract = install(dsn, schema="faults", prefix="ontoos_f_")   # tables, view, grants
"""

from __future__ import annotations

import psycopg

from ontoos_explore.contract import Contract, parse_contract
from ontoos_explore.engine import grants

CONTRACT = """
version: 1
datasets:
  things:
    relation: {schema}.things
    columns:
      id:    {{type: integer}}
      label: {{type: text}}
      token: {{type: text, secret: true}}
  slow:
    relation: {schema}.slow_things
    columns:
      id:    {{type: integer}}
      label: {{type: text}}
read_sets:
  all: [things, slow]
roles:
  hasty:   {{read_sets: [all], timeout_ms: 300, max_rows: 100}}
  patient: {{read_sets: [all], timeout_ms: 20000, max_rows: 100}}
"""


def contract_text(schema: str) -> str:
    return CONTRACT.format(schema=schema)


def contract(schema: str) -> Contract:
    return parse_contract(contract_text(schema), f"{schema}.yaml")


def fixture_sql(schema: str) -> list[str]:
    return [
        f"DROP SCHEMA IF EXISTS {schema} CASCADE",
        f"CREATE SCHEMA {schema}",
        f"CREATE TABLE {schema}.things (id integer PRIMARY KEY, label text, token text)",
        (f"INSERT INTO {schema}.things SELECT g, 'thing ' || g, 'ONTOOS-SECRET-' || md5(g::text) "
         "FROM generate_series(1, 500) g"),
        f"CREATE VIEW {schema}.slow_things AS SELECT id, label FROM {schema}.things WHERE pg_sleep(0.05) IS NOT NULL",
    ]


def install(dsn: str, schema: str, prefix: str) -> Contract:
    """Create the lake in `schema` of `dsn` (afresh) and grant its roles under `prefix`."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for stmt in fixture_sql(schema):
            conn.execute(stmt)
    found = contract(schema)
    with psycopg.connect(dsn) as conn:
        grants.apply(conn, found, prefix)
    return found
