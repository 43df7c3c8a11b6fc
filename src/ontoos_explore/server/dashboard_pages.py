"""Server, dashboard pages: where every row of the governance summary leads (reviewers only, read-only GETs).

    GET /governance/events                      every event, filtered and paged (?principal=, ?column=, ...)
    GET /governance/events/{id}                 one event: as written, who, where, when, and the true reason
    GET /governance/columns[/{dataset}/{col}]   the columns reached for; one column's attempts over time
    GET /governance/fingerprints[/{fp}]         recurring explorations; one's uses, variants and promotion
    GET /governance/subtypes|datasets|principals   the rejection counts, whole
    GET /governance/queries[/{id}]              named queries; one's SQL, parameters, history and actions
    GET /governance/requests[/{id}]             template requests; one and the refusals it followed

Every table takes the filters and `page`/`size` of `dashboard_views`, and
`format=csv|json` downloads it whole. Mixed into `governance_routes.Governance`.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import psycopg
from starlette.requests import Request
from starlette.responses import Response

from ..errors import Codes, ExploreError, InputError
from ..governance import report as rep
from ..governance import requests as template_requests
from ..governance.vocabulary import OUTCOMES, SURFACES
from ..names import fold, is_identifier
from . import dashboard_views as dv

EVENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
FINGERPRINT = re.compile(r"[A-Za-z0-9_:.-]{1,80}")
REQUEST_ID = re.compile(r"[0-9a-f]{16}")
QUERY_COLUMNS = ("id", "title", "status", "promoted_by", "promoted_at", "approved_by", "approved_at")
NUMERIC = ("n", "uses", "ok", "principals")
CANDIDATES = dv.Listing("candidates", "candidates", "Promotion candidates",
                        ("example", "uses", "principals", "dataset", "last", "fingerprint"),
                        ("exploration (the newest use)", "uses", "principals", "dataset", "last used", "fingerprint"))
REQUEST_COLUMNS = ("at", "principal", "surface", "question", "dataset", "status", "answered_by")


class Pages:

    async def _read(self, request: Request, work) -> Response:
        """A reviewer's GET: `work(principal)` in a thread -> the response, or the refusal's page."""
        try:
            principal = self._reviewer(request)
            return await asyncio.to_thread(work, principal)
        except ExploreError as e:
            return self._refusal(e, request)
        except psycopg.Error:
            return self._refusal(self._upstream(), request)

    def _connect(self) -> psycopg.Connection:
        from ..governance.audit import ensure_schema

        conn = psycopg.connect(self._dsn(), connect_timeout=5)
        ensure_schema(conn)
        return conn

    def _page(self, template: str, request: Request, **context: Any) -> Response:
        from .mcp_server import PRINCIPAL_KEY

        session = self._session(request, request.scope[PRINCIPAL_KEY])
        return self._render(template, principal=request.scope[PRINCIPAL_KEY].name, as_of=dv.as_of(),
                            csrf=session.csrf if session is not None else None, url=dv.url, when=dv.when,
                            **context)

    def _table_page(self, request: Request, listing: dv.Listing, table: rep.Table, f: rep.Filters,
                    fmt: str | None, **context: Any) -> Response:
        """A table's page, or (with format=) its download."""
        if fmt is not None:
            return dv.export(table, fmt, listing.path, f, dv.as_of())
        narrowing = context.get("narrowing") or {}
        hidden = {k if k == "column" else "fingerprint": v if k == "column" else v[0] for k, v in narrowing.items()}
        return self._page(context.pop("template", "listing.html"), request, listing=listing, table=table,
                          rows=[dv.cells(listing, r, f) for r in table.rows], filters=f, request_path=request.url.path,
                          pager=pager(request, table), exports=exports(request), hidden_narrowing=hidden,
                          numeric_columns=tuple(i for i, c in enumerate(listing.columns) if c in NUMERIC), **context)

    # ------------------------------------------------------------ listings

    async def listing(self, request: Request) -> Response:
        listing = dv.LISTINGS[request.url.path.rstrip("/").rsplit("/", 1)[1]]

        def work(principal):
            q = request.query_params
            narrow = ("column", "fingerprint") if listing.path == "events" else ()
            f = dv.filters_of(q, extra=narrow)
            f = rep.narrowed(f, **_narrowing(q)) if narrow else f
            fmt, page = dv.format_and_page(q)
            with self._connect() as conn:
                table = rep.table(conn, listing.view, f, page)
            return self._table_page(request, listing, table, f, fmt, facets=self._facets(), narrowing=_narrowing(q))

        return await self._read(request, work)

    def _facets(self) -> dict[str, Any]:
        from .governance_forms import _codes

        return {"windows": dv.WINDOWS, "datasets": sorted(self.tools.contract.datasets),
                "subtypes": sorted({c.subtype for c in _codes()}), "outcomes": OUTCOMES,
                "surfaces": SURFACES}

    async def candidates_page(self, request: Request) -> Response:
        """The promotion candidates (the rule's window; a dataset narrows them), whole, or downloaded."""
        def work(principal):
            q = request.query_params
            dv.check_names(q, ("dataset", "format"))
            f = dv.filters_of(q)
            fmt = dv.export_format(q)
            from ..governance import promote as promotion

            with self._connect() as conn:
                promoted = promotion.promoted_fingerprints(self.store)
                rows = [c for c in rep.candidates(conn, self.rule, f.dataset) if c["fingerprint"] not in promoted]
            table = rep.Table("candidates", CANDIDATES.columns, rows, len(rows), rep.Page(1, max(1, len(rows))))
            return self._table_page(request, CANDIDATES, table, f, fmt, facets=None, narrowing={})

        return await self._read(request, work)

    # ------------------------------------------------------------ one event

    async def event_page(self, request: Request) -> Response:
        ident = request.path_params["id"]

        def work(principal):
            dv.check_names(request.query_params, ())
            if not EVENT_ID.fullmatch(ident):
                raise _not_found("event", "an event's id is what an answer's meta.exploration_id says")
            with self._connect() as conn:
                event = rep.event(conn, ident)
            if event is None:
                raise _not_found("event", "it may be older than the audit keeps, or not written yet: retry shortly")
            return self._page("event.html", request, e=event, links=_event_links(event))

        return await self._read(request, work)

    # ------------------------------------------------------------ one column

    async def column_page(self, request: Request) -> Response:
        dataset, column = request.path_params["dataset"], request.path_params["column"]

        def work(principal):
            q = request.query_params
            if not (is_identifier(dataset) and is_identifier(column)):
                raise _not_found("column", "open it from the columns reached for")
            f = rep.narrowed(dv.filters_of(q), dataset=dataset, column=column, outcome="refused")
            fmt, page = dv.format_and_page(q)
            with self._connect() as conn:
                attempts = rep.table(conn, "events", f, page)
                if fmt is not None:
                    return dv.export(attempts, fmt, f"{dataset}-{column}-attempts", f, dv.as_of())
                totals, who = _summed(conn, f)
                reasons = rep.table(conn, "by_column", f, rep.Page(1, 10)).rows
                days = rep.by_day(conn, f)
            return self._table_page(request, dv.LISTINGS["events"], attempts, f, None, template="column.html",
                                    dataset=dataset, column=column, totals=totals, who=who, reasons=reasons,
                                    days=days)

        return await self._read(request, work)

    # ------------------------------------------------------------ one fingerprint

    async def fingerprint_page(self, request: Request) -> Response:
        fp = request.path_params["fingerprint"]

        def work(principal):
            q = request.query_params
            if not FINGERPRINT.fullmatch(fp):
                raise _not_found("fingerprint", "open it from the recurring explorations")
            f = rep.narrowed(dv.filters_of(q), fingerprints=(fp,))
            fmt, page = dv.format_and_page(q)
            with self._connect() as conn:
                uses = rep.table(conn, "events", f, page)
                if fmt is not None:
                    return dv.export(uses, fmt, f"fingerprint-{fp}", f, dv.as_of())
                totals, who = _summed(conn, f)
                variants = rep.table(conn, "examples", f, rep.Page(1, 20))
                candidate = any(c["fingerprint"] == fp for c in rep.candidates(conn, self.rule))
            promoted = [e for e in self._queries() if e.get("origin_fingerprint") == fp]
            return self._table_page(request, dv.LISTINGS["events"], uses, f, None, template="fingerprint.html",
                                    fp=fp, totals=totals, who=who, variants=variants, candidate=candidate,
                                    promoted=promoted, rule=self.rule)

        return await self._read(request, work)

    # ------------------------------------------------------------ named queries

    async def queries_page(self, request: Request) -> Response:
        def work(principal):
            q = request.query_params
            dv.check_names(q, ("format",))
            fmt = dv.export_format(q)
            entries = self._queries()
            rows = [{c: e.get(c) for c in QUERY_COLUMNS} for e in entries]
            table = rep.Table("queries", QUERY_COLUMNS, rows, len(rows), rep.Page(1, max(1, len(rows))))
            if fmt is not None:
                return dv.export(table, fmt, "queries", rep.Filters(), dv.as_of())
            return self._page("queries.html", request, queries=entries, exports=exports(request),
                              self_approval=self.allow_self_approval)

        return await self._read(request, work)

    async def query_page(self, request: Request) -> Response:
        ident = request.path_params["id"]

        def work(principal):
            dv.check_names(request.query_params, ("done", "id"))
            entry = next((e for e in self._queries() if fold(str(e.get("id", ""))) == fold(ident)), None)
            if entry is None or not is_identifier(ident):
                raise InputError(Codes.UNKNOWN_QUERY, "the registry has no query of that id",
                                 hint="the named queries are listed at /governance/queries")
            with self._connect() as conn:
                runs = rep.totals(conn, rep.Filters(days=rep.MAX_DAYS, fingerprints=(f"named:{entry['id']}",)))
            from .governance_forms import DONE, _notice

            return self._page("query.html", request, q=entry, runs=runs, notice=_notice(request, DONE),
                              self_approval=self.allow_self_approval, params=_params(entry))

        return await self._read(request, work)

    # ------------------------------------------------------------ template requests

    async def requests_page(self, request: Request) -> Response:
        def work(principal):
            q = request.query_params
            dv.check_names(q, dv.PAGING)
            fmt, page = dv.format_and_page(q)
            with self._connect() as conn:
                rows, total = template_requests.listing(conn, page.size, page.offset)
            rows = [{k: rep.plain(v) for k, v in r.items()} for r in rows]
            table = rep.Table("requests", template_requests.ALL_COLUMNS, rows, total, page)
            if fmt is not None:
                return dv.export(table, fmt, "requests", rep.Filters(), dv.as_of())
            return self._page("requests.html", request, table=table, pager=pager(request, table),
                              exports=exports(request), columns=REQUEST_COLUMNS)

        return await self._read(request, work)

    async def request_page(self, request: Request) -> Response:
        ident = request.path_params["id"]

        def work(principal):
            q = request.query_params
            dv.check_names(q, dv.PAGING)
            if not REQUEST_ID.fullmatch(ident):
                raise _not_found("template request", "the requests are listed at /governance/requests")
            fmt, page = dv.format_and_page(q)
            with self._connect() as conn:
                req = template_requests.get(conn, ident)
                if req is None:
                    raise _not_found("template request", "the requests are listed at /governance/requests")
                f = rep.Filters(days=rep.MAX_DAYS, principal=req["principal"], outcome="refused",
                                fingerprints=tuple(req["refusals"] or ()) or ("",))
                refusals = rep.table(conn, "events", f, page)
            return self._table_page(request, dv.LISTINGS["events"], refusals, f, fmt, template="request.html",
                                    req=req)

        return await self._read(request, work)


def _summed(conn, f: rep.Filters) -> tuple[dict[str, Any], rep.Table]:
    """The totals of what the filters select, and who made it (each principal's count, first, last)."""
    return rep.totals(conn, f), rep.table(conn, "who", f, rep.Page(1, dv.MAX_SIZE))


def _not_found(what: str, hint: str) -> InputError:
    return InputError(Codes.NOT_FOUND, f"no such {what}", hint=hint)


def _narrowing(q) -> dict[str, Any]:
    """The events listing's narrowing to one column or one fingerprint (checked as the paths are)."""
    out: dict[str, Any] = {}
    column, fp = dv.one(q, "column"), dv.one(q, "fingerprint")
    if column is not None:
        if not is_identifier(column):
            raise InputError(Codes.INVALID_REQUEST, "'column' must be a column's name", hint="e.g. column=env_dump")
        out["column"] = column
    if fp is not None:
        if not FINGERPRINT.fullmatch(fp):
            raise InputError(Codes.INVALID_REQUEST, "'fingerprint' must be a fingerprint",
                             hint="e.g. fingerprint=3f2a9c0d1e4b5a6f")
        out["fingerprints"] = (fp,)
    return out


def _event_links(e: dict[str, Any]) -> dict[str, str]:
    f = rep.Filters(days=rep.MAX_DAYS)
    links = {"principal": dv.events_url(rep.Filters(), principal=e["principal"])}
    if e.get("fingerprint"):
        fp = e["fingerprint"]
        links["fingerprint"] = dv.query_url(fp[6:]) if fp.startswith("named:") else dv.fingerprint_url(fp, f)
    if e.get("column_name") and e.get("dataset"):
        links["column_name"] = dv.column_url(e["dataset"], e["column_name"], f)
    if e.get("subtype"):
        links["subtype"] = dv.events_url(rep.Filters(), subtype=e["subtype"])
    return links


def _params(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The parameters of a registry entry, in either of its shapes (`params` as authored, `parameters`)."""
    raw = entry.get("params") or entry.get("parameters") or []
    return [p for p in raw if isinstance(p, dict)]


def pager(request: Request, table: rep.Table) -> dict[str, Any]:
    """'21-40 of 153', and the previous and next pages' URLs (the same filters)."""
    page, pages = table.page.number, table.pages

    def at(n: int) -> str:
        params = {k: v for k, v in request.query_params.items() if k != "page"}
        return dv.url(request.url.path, {**params, "page": n if n > 1 else None})

    return {**table.shown(), "prev": at(page - 1) if page > 1 else None,
            "next": at(page + 1) if page < pages else None, "first": at(1) if page > 1 else None}


def exports(request: Request) -> dict[str, str]:
    params = {k: v for k, v in request.query_params.items() if k not in ("page", "size", "format", "done", "id")}
    return {fmt: dv.url(request.url.path, {**params, "format": fmt}) for fmt in ("csv", "json")}
