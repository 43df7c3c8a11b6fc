"""Governance, audit tables: the schema `ontoos_audit` and the writes (events, gaps), static SQL only."""

from __future__ import annotations

import psycopg

from .events import COLUMNS, GAP_COLUMNS, Event, Gap

SCHEMA = """
CREATE SCHEMA IF NOT EXISTS ontoos_audit;
CREATE TABLE IF NOT EXISTS ontoos_audit.events (
  id            text PRIMARY KEY,
  at            timestamptz NOT NULL,
  principal     text NOT NULL,
  role          text,
  surface       text NOT NULL,
  dataset       text,
  exploration   text,
  fingerprint   text,
  outcome       text NOT NULL CHECK (outcome IN ('ok', 'refused', 'failed')),
  error_type    text,
  error_subtype text,
  error_code    text,
  reason        text,
  column_name   text,
  message       text,
  hint          text,
  rows          integer,
  truncated     boolean,
  elapsed_ms    double precision,
  cost          double precision
);
-- a store made before the cost column (the planner's estimate: for reviewers, never for callers)
ALTER TABLE ontoos_audit.events ADD COLUMN IF NOT EXISTS cost double precision;
CREATE INDEX IF NOT EXISTS events_at ON ontoos_audit.events (at);
CREATE INDEX IF NOT EXISTS events_fingerprint ON ontoos_audit.events (fingerprint, outcome);
CREATE TABLE IF NOT EXISTS ontoos_audit.gaps (
  id        text PRIMARY KEY,
  at        timestamptz NOT NULL,
  reason    text NOT NULL CONSTRAINT gaps_reason_check CHECK (reason IN ('QUEUE_FULL', 'REJECTED', 'AUTH_FLOOD')),
  events    integer NOT NULL,
  first_at  timestamptz,
  last_at   timestamptz,
  writer    text,
  detail    text
);
-- a store made before AUTH_FLOOD: its check widened once
DO $$ BEGIN
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_constraint WHERE conname = 'gaps_reason_check'
             AND conrelid = 'ontoos_audit.gaps'::regclass
             AND pg_catalog.pg_get_constraintdef(oid) NOT LIKE '%AUTH_FLOOD%') THEN
    ALTER TABLE ontoos_audit.gaps DROP CONSTRAINT gaps_reason_check;
    ALTER TABLE ontoos_audit.gaps ADD CONSTRAINT gaps_reason_check
      CHECK (reason IN ('QUEUE_FULL', 'REJECTED', 'AUTH_FLOOD'));
  END IF;
END $$;
"""
COPY = f"COPY ontoos_audit.events ({', '.join(COLUMNS)}) FROM STDIN"
BATCH_TABLE = "ontoos_audit_batch"  # per connection, temporary: the idempotent write goes through it
COPY_BATCH = f"COPY {BATCH_TABLE} ({', '.join(COLUMNS)}) FROM STDIN"
INSERT_BATCH = (f"INSERT INTO ontoos_audit.events ({', '.join(COLUMNS)}) SELECT {', '.join(COLUMNS)} "
                f"FROM {BATCH_TABLE} ON CONFLICT (id) DO NOTHING")
INSERT_GAP = (f"INSERT INTO ontoos_audit.gaps ({', '.join(GAP_COLUMNS)}) VALUES ({', '.join(['%s'] * len(GAP_COLUMNS))}) "
              "ON CONFLICT (id) DO NOTHING")

def ensure_schema(conn: psycopg.Connection) -> None:
    with conn.transaction():
        conn.execute(SCHEMA)


def write(conn: psycopg.Connection, events: list[Event]) -> None:
    """One COPY of the events, in one transaction (the CLI's and the tests' path)."""
    with conn.transaction():
        with conn.cursor() as cur, cur.copy(COPY) as copy:
            for e in events:
                copy.write_row(e.row())


def write_idempotent(conn: psycopg.Connection, events: list[Event]) -> int:
    """COPY into the connection's temporary batch table, then insert what is not there yet.

    Returns the rows inserted (fewer than the events when a retried batch had
    been committed already). The connection must come from `connection.connect`."""
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy(COPY_BATCH) as copy:
            for e in events:
                copy.write_row(e.row())
        cur.execute(INSERT_BATCH)
        return cur.rowcount


def write_gaps(conn: psycopg.Connection, gaps: list[Gap]) -> None:
    with conn.transaction(), conn.cursor() as cur:
        cur.executemany(INSERT_GAP, [g.row() for g in gaps])



def record_sync(dsn: str, events: list[Event]) -> None:
    """For one-shot surfaces (the CLI): write now, at the end of the command."""
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        ensure_schema(conn)
        write(conn, events)


