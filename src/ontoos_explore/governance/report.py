"""Governance, reports: the audit events -> what a reviewer needs to see.

One function per view, each a static, parameterized query over
`ontoos_audit.events`; filters (window, dataset, subtype) are parameters that
are NULL when unused, never SQL text. `report()` gathers them all for the
dashboard, the JSON API and `ontoos audit`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

# The filter every view shares: a time window, and optionally one dataset and one subtype.
WHERE = ("at >= now() - make_interval(days => %(days)s) "
         "AND (%(dataset)s::text IS NULL OR dataset = %(dataset)s) "
         "AND (%(subtype)s::text IS NULL OR error_subtype = %(subtype)s)")
REFUSED = "outcome = 'refused'"


@dataclass(frozen=True, slots=True)
class Filters:
    days: int = 14
    dataset: str | None = None
    subtype: str | None = None

    def params(self) -> dict[str, Any]:
        return {"days": self.days, "dataset": self.dataset, "subtype": self.subtype}

    def query(self) -> dict[str, str]:
        return {k: str(v) for k, v in (("days", self.days), ("dataset", self.dataset), ("subtype", self.subtype)) if v}


@dataclass(frozen=True, slots=True)
class Rule:
    """Promotion: a fingerprint used `min_uses` times by `min_principals` in `days`."""

    min_uses: int = 5
    min_principals: int = 2
    days: int = 14

    @classmethod
    def from_settings(cls, settings) -> "Rule":
        """The deployment's rule: ONTOOS_PROMOTE_USES, _PRINCIPALS and _DAYS (settings.py)."""
        return cls(settings.promote_uses, settings.promote_principals, settings.promote_days)

    @classmethod
    def from_env(cls, env=None) -> "Rule":
        """The rule from the environment (`env`, by default os.environ), read as every setting is:
        a bad value is refused (EX907) naming its variable."""
        from ..settings import read

        return cls.from_settings(read(env))


def _rows(conn: psycopg.Connection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(sql, params)
        return [{k: _plain(v) for k, v in row.items()} for row in cur.fetchall()]


def _plain(v: Any) -> Any:
    if isinstance(v, (dt.datetime, dt.date)):
        return v.isoformat()
    return v


def _count_sql(key: str, extra: str = "TRUE") -> str:
    return (f"SELECT {key} AS key, count(*) AS n FROM ontoos_audit.events "
            f"WHERE {REFUSED} AND {WHERE} AND {extra} GROUP BY {key} ORDER BY n DESC, key LIMIT 50")


# Composed once, at import, from fixed column names: no caller text ever reaches these.
COUNT_BY = {
    "error_subtype": _count_sql("error_subtype"),
    "dataset": _count_sql("dataset", "dataset IS NOT NULL"),
    "principal": _count_sql("principal"),
}


def _count_by(conn, key: str, f: Filters) -> list[dict[str, Any]]:
    return _rows(conn, COUNT_BY[key], f.params())


def by_subtype(conn, f: Filters):
    return _count_by(conn, "error_subtype", f)


def by_dataset(conn, f: Filters):
    return _count_by(conn, "dataset", f)


def by_principal(conn, f: Filters):
    return _count_by(conn, "principal", f)


def by_column(conn, f: Filters):
    """Which secret and hidden columns people reach for, and who."""
    return _rows(conn, f"SELECT dataset, column_name, reason, count(*) AS n, "
                       f"count(DISTINCT principal) AS principals, array_agg(DISTINCT principal) AS who "
                       f"FROM ontoos_audit.events WHERE {REFUSED} AND {WHERE} AND column_name IS NOT NULL "
                       f"GROUP BY dataset, column_name, reason ORDER BY n DESC, dataset, column_name LIMIT 50", f.params())


def by_day(conn, f: Filters):
    return _rows(conn, f"SELECT date_trunc('day', at)::date AS day, count(*) AS n FROM ontoos_audit.events "
                       f"WHERE {REFUSED} AND {WHERE} GROUP BY 1 ORDER BY 1", f.params())


def recent(conn, f: Filters, limit: int = 20):
    return _rows(conn, f"SELECT id, at, principal, role, surface, dataset, exploration, error_subtype AS subtype, "
                       f"error_code AS code, message, hint FROM ontoos_audit.events "
                       f"WHERE {REFUSED} AND {WHERE} ORDER BY at DESC LIMIT %(limit)s", {**f.params(), "limit": limit})


def recurring(conn, f: Filters, limit: int = 20):
    return _rows(conn, f"SELECT fingerprint, count(*) AS uses, count(DISTINCT principal) AS principals, "
                       f"count(*) FILTER (WHERE outcome = 'ok') AS ok, max(dataset) AS dataset, "
                       f"(array_agg(exploration ORDER BY at DESC))[1] AS example, max(at) AS last "
                       f"FROM ontoos_audit.events WHERE {WHERE} AND fingerprint IS NOT NULL "
                       f"GROUP BY fingerprint ORDER BY uses DESC, fingerprint LIMIT %(limit)s",
                 {**f.params(), "limit": limit})


def candidates(conn, rule: Rule, dataset: str | None = None):
    """Fingerprints answered at least min_uses times by at least min_principals principals."""
    return _rows(conn, "SELECT fingerprint, count(*) AS uses, count(DISTINCT principal) AS principals, "
                       "max(dataset) AS dataset, (array_agg(exploration ORDER BY at DESC))[1] AS example, "
                       "max(at) AS last FROM ontoos_audit.events "
                       "WHERE outcome = 'ok' AND fingerprint IS NOT NULL AND fingerprint NOT LIKE 'named:%%' "
                       "AND at >= now() - make_interval(days => %(days)s) "
                       "AND (%(dataset)s::text IS NULL OR dataset = %(dataset)s) "
                       "GROUP BY fingerprint HAVING count(*) >= %(uses)s AND count(DISTINCT principal) >= %(principals)s "
                       "ORDER BY uses DESC, fingerprint",
                 {"days": rule.days, "dataset": dataset, "uses": rule.min_uses, "principals": rule.min_principals})


def totals(conn, f: Filters):
    return _rows(conn, f"SELECT count(*) AS requests, count(*) FILTER (WHERE outcome = 'refused') AS refused, "
                       f"count(*) FILTER (WHERE outcome = 'failed') AS failed, count(DISTINCT principal) AS principals "
                       f"FROM ontoos_audit.events WHERE {WHERE}", f.params())[0]


VIEWS = ("totals", "by_subtype", "by_dataset", "by_column", "by_principal", "by_day", "recent", "recurring", "candidates")


def report(conn: psycopg.Connection, f: Filters, rule: Rule, promoted: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Every view; `promoted` fingerprints (already in the registry) are no longer candidates."""
    return {
        "filters": {"days": f.days, "dataset": f.dataset, "subtype": f.subtype},
        "totals": totals(conn, f),
        "by_subtype": by_subtype(conn, f),
        "by_dataset": by_dataset(conn, f),
        "by_column": by_column(conn, f),
        "by_principal": by_principal(conn, f),
        "by_day": by_day(conn, f),
        "recent": recent(conn, f),
        "recurring": recurring(conn, f),
        "candidates": [c for c in candidates(conn, rule, f.dataset) if c["fingerprint"] not in promoted],
        "rule": {"min_uses": rule.min_uses, "min_principals": rule.min_principals, "days": rule.days},
    }
