"""Shared helpers for the governance tests: the audit table, synthetic events (ports: tests/serving.py)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ontoos_explore.governance import audit


def reset_audit(dsn: str) -> None:
    """An empty `ontoos_audit.events` (the schema is created if missing)."""
    with psycopg.connect(dsn) as conn:
        audit.ensure_schema(conn)
        with conn.transaction():
            conn.execute("TRUNCATE ontoos_audit.events")


def fetch_events(dsn: str, where: str = "TRUE", params: Any = None) -> list[dict[str, Any]]:
    with psycopg.connect(dsn) as conn, conn.cursor(row_factory=dict_row) as cur:
        cur.execute(f"SELECT * FROM ontoos_audit.events WHERE {where} ORDER BY at, id", params)
        return cur.fetchall()


def count_events(dsn: str, where: str = "TRUE", params: Any = None) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT count(*) FROM ontoos_audit.events WHERE {where}", params).fetchone()[0]


NOW = dt.datetime.now(dt.timezone.utc)


def ev(principal: str, *, ago: dt.timedelta = dt.timedelta(minutes=5), outcome: str = "ok", role: str | None = "analyst",
       surface: str = "mcp", **fields: Any) -> audit.Event:
    """A synthetic audit event `ago` before now."""
    return audit.Event(id=uuid.uuid4().hex[:16], at=dt.datetime.now(dt.timezone.utc) - ago, principal=principal,
                       role=role, surface=surface, outcome=outcome, **fields)


def refusal(principal: str, subtype: str, code: str, *, dataset: str | None = None, column: str | None = None,
            reason: str | None = None, message: str = "refused", hint: str | None = "a hint",
            error_type: str = "validation", **kw: Any) -> audit.Event:
    return ev(principal, outcome="refused", dataset=dataset, error_type=error_type, error_subtype=subtype,
              error_code=code, reason=reason or subtype, column_name=column, message=message, hint=hint, **kw)


def insert(dsn: str, events: list[audit.Event]) -> None:
    with psycopg.connect(dsn) as conn:
        audit.ensure_schema(conn)
        audit.write(conn, events)


def in_threads(work, n: int) -> list[BaseException]:
    """`work(i)` for i in range(n), each on a thread of its own, all at once: what they raised."""
    import threading

    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as e:  # noqa: BLE001 - returned to the test
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
