"""Governance, reports: the audit events -> what a reviewer needs to see.

Every view is a static, parameterized query over `ontoos_audit.events`,
composed once at import from fixed fragments; the filters (window, dataset,
subtype, principal, surface, outcome, and for the investigation pages a
column and fingerprints) are parameters that are NULL when unused, never SQL
text. A view pages (`Page`: LIMIT/OFFSET) and counts what it would list, so no
table is ever capped silently: `table(conn, view, f, page)` -> `Table` (its
rows and its total). `report()` gathers the first rows of every view for the
dashboard's summary, the JSON API and `ontoos audit`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
from psycopg.rows import dict_row


# The filter every view shares. `column` and `fingerprints` narrow the investigation pages.
WHERE = ("at >= now() - make_interval(days => %(days)s) "
         "AND (%(dataset)s::text IS NULL OR dataset = %(dataset)s) "
         "AND (%(subtype)s::text IS NULL OR error_subtype = %(subtype)s) "
         "AND (%(principal)s::text IS NULL OR principal = %(principal)s) "
         "AND (%(surface)s::text IS NULL OR surface = %(surface)s) "
         "AND (%(outcome)s::text IS NULL OR outcome = %(outcome)s) "
         "AND (%(column)s::text IS NULL OR column_name = %(column)s) "
         "AND (%(fingerprints)s::text[] IS NULL OR fingerprint = ANY(%(fingerprints)s))")
REFUSED = "outcome = 'refused'"
MAX_DAYS = 365


@dataclass(frozen=True, slots=True)
class Filters:
    days: int = 14
    dataset: str | None = None
    subtype: str | None = None
    principal: str | None = None
    surface: str | None = None
    outcome: str | None = None
    column: str | None = None
    fingerprints: tuple[str, ...] | None = None

    def params(self) -> dict[str, Any]:
        return {"days": self.days, "dataset": self.dataset, "subtype": self.subtype, "principal": self.principal,
                "surface": self.surface, "outcome": self.outcome, "column": self.column,
                "fingerprints": list(self.fingerprints) if self.fingerprints is not None else None}

    def query(self) -> dict[str, str]:
        """The filters as a URL's query parameters (`window=14d`, and each one that is set, by its name)."""
        return {"window": f"{self.days}d", **{k: v for k in ("dataset", "subtype", "principal", "surface", "outcome")
                                             if (v := getattr(self, k))}}

    def shown(self) -> dict[str, Any]:
        return {"days": self.days, **{k: getattr(self, k) for k in
                                             ("dataset", "subtype", "principal", "surface", "outcome")}}


@dataclass(frozen=True, slots=True)
class Page:
    number: int = 1
    size: int = 20

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.size


@dataclass(slots=True)
class Table:
    view: str
    columns: tuple[str, ...]
    rows: list[dict[str, Any]]
    total: int
    page: Page = field(default_factory=Page)

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.page.size))

    def shown(self) -> dict[str, Any]:
        """What the JSON answers say of the page: which rows of how many."""
        return {"number": self.page.number, "size": self.page.size, "total": self.total, "pages": self.pages,
                "first_row": self.page.offset + 1 if self.rows else 0, "last_row": self.page.offset + len(self.rows)}


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


@dataclass(frozen=True, slots=True)
class View:
    """One listing: `body` is its SELECT without ORDER BY (counted as a subquery), `order` its order."""

    columns: tuple[str, ...]
    body: str
    order: str

    @property
    def sql(self) -> str:
        return f"{self.body} ORDER BY {self.order} LIMIT %(limit)s OFFSET %(offset)s"

    @property
    def count_sql(self) -> str:
        return f"SELECT count(*) FROM ({self.body}) AS listed"


def _counted(key: str, extra: str = "TRUE") -> View:
    return View(("key", "n"), f"SELECT {key} AS key, count(*) AS n FROM ontoos_audit.events "
                              f"WHERE {REFUSED} AND {WHERE} AND {extra} GROUP BY {key}", "n DESC, key")


# what the caller saw (the true reason and the column reached for are on the event's own page)
EVENT_COLUMNS = ("id", "at", "principal", "role", "surface", "dataset", "outcome", "subtype", "code", "message", "hint",
                 "exploration", "fingerprint")
_EVENTS = ("SELECT id, at, principal, role, surface, dataset, outcome, error_subtype AS subtype, error_code AS code, "
           "message, hint, exploration, fingerprint FROM ontoos_audit.events WHERE {where}")

# Composed once, at import, from fixed fragments: no caller text ever reaches these.
VIEW_SQL: dict[str, View] = {
    "by_subtype": _counted("error_subtype"),
    "by_dataset": _counted("dataset", "dataset IS NOT NULL"),
    "by_principal": _counted("principal"),
    "by_column": View(("dataset", "column_name", "reason", "n", "principals", "who", "first", "last"),
                      "SELECT dataset, column_name, reason, count(*) AS n, count(DISTINCT principal) AS principals, "
                      "array_agg(DISTINCT principal) AS who, min(at) AS first, max(at) AS last "
                      f"FROM ontoos_audit.events WHERE {REFUSED} AND {WHERE} AND column_name IS NOT NULL "
                      "GROUP BY dataset, column_name, reason", "n DESC, dataset, column_name"),
    "recent": View(EVENT_COLUMNS, _EVENTS.format(where=f"{REFUSED} AND {WHERE}"), "at DESC, id"),
    "events": View(EVENT_COLUMNS, _EVENTS.format(where=WHERE), "at DESC, id"),
    "recurring": View(("fingerprint", "uses", "principals", "ok", "dataset", "example", "last"),
                      "SELECT fingerprint, count(*) AS uses, count(DISTINCT principal) AS principals, "
                      "count(*) FILTER (WHERE outcome = 'ok') AS ok, max(dataset) AS dataset, "
                      "(array_agg(exploration ORDER BY at DESC))[1] AS example, max(at) AS last "
                      f"FROM ontoos_audit.events WHERE {WHERE} AND fingerprint IS NOT NULL GROUP BY fingerprint",
                      "uses DESC, fingerprint"),
    # who reached for a column, or ran a fingerprint: each principal's attempts, first and last
    "who": View(("principal", "n", "first", "last"),
                "SELECT principal, count(*) AS n, min(at) AS first, max(at) AS last FROM ontoos_audit.events "
                f"WHERE {WHERE} GROUP BY principal", "n DESC, principal"),
    # each distinct exploration text of a fingerprint (its literals differ), with how often and when
    "examples": View(("exploration", "n", "ok", "last"),
                     "SELECT exploration, count(*) AS n, count(*) FILTER (WHERE outcome = 'ok') AS ok, max(at) AS last "
                     f"FROM ontoos_audit.events WHERE {WHERE} AND exploration IS NOT NULL GROUP BY exploration",
                     "last DESC, exploration"),
}
# days are UTC days, as every time the pages show is UTC (whatever the session's TimeZone)
BY_DAY = (f"SELECT (at AT TIME ZONE 'UTC')::date AS day, count(*) AS n FROM ontoos_audit.events "
          f"WHERE {REFUSED} AND {WHERE} GROUP BY 1 ORDER BY 1")
BY_DAY_SUBTYPE = (f"SELECT (at AT TIME ZONE 'UTC')::date AS day, error_subtype AS subtype, count(*) AS n "
                  f"FROM ontoos_audit.events WHERE {REFUSED} AND {WHERE} GROUP BY 1, 2 ORDER BY 1, 2")
TOTALS = ("SELECT count(*) AS requests, count(*) FILTER (WHERE outcome = 'refused') AS refused, "
          "count(*) FILTER (WHERE outcome = 'failed') AS failed, count(DISTINCT principal) AS principals, "
          f"min(at) AS first, max(at) AS last FROM ontoos_audit.events WHERE {WHERE}")
EVENT = ("SELECT id, at, principal, role, surface, dataset, exploration, fingerprint, outcome, error_type, "
         "error_subtype AS subtype, error_code AS code, reason, column_name, message, hint, rows, truncated, "
         "elapsed_ms, cost FROM ontoos_audit.events WHERE id = %(id)s")
CANDIDATES = ("SELECT fingerprint, count(*) AS uses, count(DISTINCT principal) AS principals, "
              "max(dataset) AS dataset, (array_agg(exploration ORDER BY at DESC))[1] AS example, "
              "max(at) AS last FROM ontoos_audit.events "
              "WHERE outcome = 'ok' AND fingerprint IS NOT NULL AND fingerprint NOT LIKE 'named:%%' "
              "AND at >= now() - make_interval(days => %(days)s) "
              "AND (%(dataset)s::text IS NULL OR dataset = %(dataset)s) "
              "GROUP BY fingerprint HAVING count(*) >= %(uses)s AND count(DISTINCT principal) >= %(principals)s "
              "ORDER BY uses DESC, fingerprint")
VIEWS = ("totals", "by_subtype", "by_dataset", "by_column", "by_principal", "by_day", "recent", "recurring", "candidates")


def _rows(conn: psycopg.Connection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(sql, params)
        return [{k: plain(v) for k, v in row.items()} for row in cur.fetchall()]


def plain(v: Any) -> Any:
    if isinstance(v, (dt.datetime, dt.date)):
        return v.isoformat()
    return v


def table(conn: psycopg.Connection, view: str, f: Filters, page: Page = Page()) -> Table:
    """One page of a view and how many rows it has in all (VIEW_SQL names the views)."""
    v = VIEW_SQL[view]
    params = f.params()
    rows = _rows(conn, v.sql, {**params, "limit": page.size, "offset": page.offset})
    if page.offset == 0 and len(rows) < page.size:
        total = len(rows)  # the whole of it is here: no count to ask for
    else:
        total = conn.execute(v.count_sql, params).fetchone()[0]
    return Table(view, v.columns, rows, total, page)


def by_day(conn, f: Filters):
    return _rows(conn, BY_DAY, f.params())


def by_day_and_subtype(conn, f: Filters):
    return _rows(conn, BY_DAY_SUBTYPE, f.params())


def event(conn, ident: str) -> dict[str, Any] | None:
    rows = _rows(conn, EVENT, {"id": ident})
    return rows[0] if rows else None


def candidates(conn, rule: Rule, dataset: str | None = None):
    """Fingerprints answered at least min_uses times by at least min_principals principals."""
    return _rows(conn, CANDIDATES, {"days": rule.days, "dataset": dataset, "uses": rule.min_uses,
                                    "principals": rule.min_principals})


def totals(conn, f: Filters):
    return _rows(conn, TOTALS, f.params())[0]


def report(conn: psycopg.Connection, f: Filters, rule: Rule, promoted: frozenset[str] = frozenset(), *,
           rows: int = 50) -> dict[str, Any]:
    """The first `rows` of every view (20 of the recent rejections and recurring explorations), and in
    `counts` how many each has in all; `promoted` fingerprints (in the registry) are no longer candidates."""
    t = totals(conn, f)  # first: a report never counts more than its tables show (the audit flushes meanwhile)
    tables = {view: table(conn, view, f, Page(1, rows if view not in ("recent", "recurring") else 20))
              for view in ("by_subtype", "by_dataset", "by_column", "by_principal", "recent", "recurring")}
    listed = [c for c in candidates(conn, rule, f.dataset) if c["fingerprint"] not in promoted]
    return {
        "filters": f.shown(),
        "totals": {k: t[k] for k in ("requests", "refused", "failed", "principals")},
        **{view: tab.rows for view, tab in tables.items()},
        "by_day": by_day(conn, f),
        "candidates": listed,
        "counts": {**{view: tab.total for view, tab in tables.items()}, "candidates": len(listed)},
        "rule": {"min_uses": rule.min_uses, "min_principals": rule.min_principals, "days": rule.days},
    }


def narrowed(f: Filters, **changes: Any) -> Filters:
    return replace(f, **changes)
