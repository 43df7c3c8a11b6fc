"""Governance, template requests: what an agent needs and the language cannot say, for reviewers to answer.

    request = file(conn, principal="alice", role="analyst", surface="mcp", question="...", dataset="workloads")
    open_requests(conn)                      # the dashboard's list, newest first
    listing(conn, page) / get(conn, request_id)   # every request (open or closed), one request
    close(conn, request_id, by="rex", answered_by="workloads_by_owner")

A request records the question, who asked (principal, role, surface), the
dataset it is about (if any), and the fingerprints of that principal's
refusals of the last RECENT_HOURS (at most RECENT_MAX, newest first): what
it tried before asking. Stored beside the audit in `ontoos_audit.requests`,
static statements only. Filing one writes; it reads nothing of the lake.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg

from ..errors import Codes, InputError
from .audit.tables import SCHEMA as AUDIT_SCHEMA

RECENT_HOURS, RECENT_MAX = 24, 10
MAX_QUESTION = 2000  # characters kept of a question

SCHEMA = """
CREATE TABLE IF NOT EXISTS ontoos_audit.requests (
  id           text PRIMARY KEY,
  at           timestamptz NOT NULL,
  principal    text NOT NULL,
  role         text,
  surface      text NOT NULL,
  question     text NOT NULL,
  dataset      text,
  refusals     text[] NOT NULL DEFAULT '{}',
  status       text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
  closed_at    timestamptz,
  closed_by    text,
  answered_by  text
);
CREATE INDEX IF NOT EXISTS requests_open ON ontoos_audit.requests (status, at);
"""
RECENT_REFUSALS = (
    "SELECT fingerprint FROM ontoos_audit.events WHERE principal = %s AND outcome = 'refused' "
    "AND fingerprint IS NOT NULL AND at > now() - make_interval(hours => %s) "
    "GROUP BY fingerprint ORDER BY max(at) DESC LIMIT %s")
INSERT = ("INSERT INTO ontoos_audit.requests (id, at, principal, role, surface, question, dataset, refusals) "
          "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)")
OPEN = ("SELECT id, at, principal, role, surface, question, dataset, refusals FROM ontoos_audit.requests "
        "WHERE status = 'open' ORDER BY at DESC LIMIT %s")
CLOSE = ("UPDATE ontoos_audit.requests SET status = 'closed', closed_at = now(), closed_by = %s, answered_by = %s "
         "WHERE id = %s AND status = 'open'")
COLUMNS = ("id", "at", "principal", "role", "surface", "question", "dataset", "refusals")
ALL_COLUMNS = COLUMNS + ("status", "closed_at", "closed_by", "answered_by")
_ALL = f"SELECT {', '.join(ALL_COLUMNS)} FROM ontoos_audit.requests"
PAGE = f"{_ALL} ORDER BY at DESC, id LIMIT %s OFFSET %s"
COUNT = "SELECT count(*) FROM ontoos_audit.requests"
ONE = f"{_ALL} WHERE id = %s"


def question_of(value: Any) -> str:
    """The question as asked: a string with some words in it; EX102 otherwise."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(Codes.INVALID_REQUEST, "'question' must be the question, in words",
                         hint='e.g. {"question": "which workloads read the payments tables, by team?"}')
    return value.strip()[:MAX_QUESTION]


def file(conn: psycopg.Connection, *, principal: str, role: str | None, surface: str, question: str,
         dataset: str | None) -> dict[str, Any]:
    """Record a request (its schema made if missing); returns it as the caller is shown it."""
    with conn.transaction():
        conn.execute(AUDIT_SCHEMA)  # the events it reads the refusals from, should nothing be recorded yet
        conn.execute(SCHEMA)
        refusals = [f for (f,) in conn.execute(RECENT_REFUSALS, [principal, RECENT_HOURS, RECENT_MAX]).fetchall()]
        ident = uuid.uuid4().hex[:16]
        at = dt.datetime.now(dt.timezone.utc)
        conn.execute(INSERT, [ident, at, principal, role, surface, question, dataset, refusals])
    return {"request_id": ident, "at": at.isoformat().replace("+00:00", "Z"), "question": question,
            "dataset": dataset, "recent_refusals": refusals, "status": "open"}


def open_requests(conn: psycopg.Connection, limit: int = 50) -> list[dict[str, Any]]:
    _ready(conn)
    return [dict(zip(COLUMNS, row)) for row in conn.execute(OPEN, [limit]).fetchall()]


def close(conn: psycopg.Connection, request_id: str, by: str, answered_by: str | None = None) -> bool:
    """Close an open request (False: no open request has that id)."""
    with conn.transaction():
        _ready(conn)
        return conn.execute(CLOSE, [by, answered_by, request_id]).rowcount == 1


def _ready(conn: psycopg.Connection) -> None:
    conn.execute(AUDIT_SCHEMA)
    conn.execute(SCHEMA)


def listing(conn: psycopg.Connection, limit: int, offset: int = 0) -> tuple[list[dict[str, Any]], int]:
    """(a page of every request, open or closed, newest first; how many there are)."""
    _ready(conn)
    rows = [dict(zip(ALL_COLUMNS, row)) for row in conn.execute(PAGE, [limit, offset]).fetchall()]
    return rows, conn.execute(COUNT).fetchone()[0]


def get(conn: psycopg.Connection, request_id: str) -> dict[str, Any] | None:
    _ready(conn)
    row = conn.execute(ONE, [request_id]).fetchone()
    return dict(zip(ALL_COLUMNS, row)) if row else None
