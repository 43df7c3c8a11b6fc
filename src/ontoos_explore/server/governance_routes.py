"""Server, governance: the reviewers' dashboard (server-rendered HTML) and its JSON API.

    GET  /governance                     the summary; ?window=&dataset=&subtype=&principal=&surface=&outcome=
    GET  /governance/<listing>[/<id>]    the pages every row leads to (server/dashboard_pages.py)
    GET  /governance/login, POST         a token form for browsers: opens a session (server/sessions.py)
    POST /governance/logout              csrf -> the session ended
    GET  /governance/promote             ?fingerprint= -> the promote form: the entry, every example it would keep
    POST /governance/promote             csrf, fingerprint, id, title, keep... -> a pending named query
    POST /governance/approve             csrf, id -> approved (not by the reviewer who promoted it)
    POST /governance/reject, /retire     csrf, id -> rejected (pending), retired (approved)
    GET  /api/v1/governance/report       everything on the page, as JSON
    GET  /api/v1/governance/{view}       one view (by_column, candidates, recent, ...); a table pages, and CSV

Only principals marked `reviewer: true` may use any of it. Works without
JavaScript: filters are a GET form, actions are POST forms that redirect.

Who the caller is, is decided in one place, `middleware.BearerAuth`: a bearer
header, or on /governance paths the session cookie, which it resolves through
`Governance.principal_for_session` (the session table of this object). The
cookie holds a random session id, never the token. Every POST that changes
something (promote, approve, logout) is refused (403 CSRF_REFUSED) unless it
carries the CSRF token of the caller's own session, and any POST (the login
too) whose `Origin` is present and not this server's own, or whose
`Sec-Fetch-Site` says another site, is refused before its form is read
(`Origin: null`, which browsers send for the pages' own forms under
`no-referrer`, only with `Sec-Fetch-Site: same-origin`). Each
page is sent with a restrictive Content-Security-Policy (no script at all;
the one stylesheet is inline, allowed by its hash), `X-Frame-Options: DENY`,
`nosniff`, `Referrer-Policy: no-referrer` and `Cache-Control: no-store`.

A sign-in without a valid token draws on the server's per-address limit of
requests without a valid token (`limits.AuthFloods`, as `BearerAuth` does):
past it, 429. Every attempt under it, every sign-out, promotion and approval
(done or refused) is an audit event of surface `dashboard` naming who and
what. Form input is checked before it is used (UTF-8, no control characters,
bounded lengths, an identifier for an id, 16 hex digits for a fingerprint):
a 400, never a 500. The page's messages are keys of a fixed table
(`?done=approved&id=...`, the id an identifier), never text from the URL.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import json
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ..errors import AuthError, Codes, ExploreError, InputError
from ..governance import promote as promotion
from ..governance import report as rep
from ..governance import requests as template_requests
from ..names import did_you_mean
from .config import Authenticator, Principal
from .governance_actions import Actions
from . import chart
from . import dashboard_views as dv
from .dashboard_pages import Pages
from .governance_forms import DONE, _notice, _origin, _shown, _suggest_id, _suggest_title
from .sessions import COOKIE, Session, Sessions

SURFACE = "dashboard"  # the audit's surface of every governance action
SUMMARY_ROWS = 10  # rows of each table on the summary (the recent rejections and recurring explorations: 20)
SUMMARY_TABLES = {"by_column": dv.LISTINGS["columns"], "by_subtype": dv.LISTINGS["subtypes"],
                  "by_dataset": dv.LISTINGS["datasets"], "by_principal": dv.LISTINGS["principals"],
                  "recurring": dv.LISTINGS["fingerprints"]}
_env = Environment(loader=PackageLoader("ontoos_explore.server", "templates"), autoescape=select_autoescape(["html"]))
CSS = _env.loader.get_source(_env, "dashboard.css")[0]
STYLE_HASH = "sha256-" + base64.b64encode(hashlib.sha256(CSS.encode("utf-8")).digest()).decode("ascii")
CSP = ("default-src 'self'; script-src 'none'; style-src '" + STYLE_HASH + "'; img-src 'self'; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

class Governance(Actions, Pages):
    """`audit_dsn` is where the reports read the audit (the deployment's audit database, else the
    exploration database), `audit` whether it is on; the registry file is read and written through
    its `RegistryStore`, and `tools.registry` (a `LiveRegistry`) is refreshed after every change.
    `sessions` is the table of sign-ins; `floods` the server's AuthFloods (set by `app.build_app`),
    which failed sign-ins draw on; `allow_self_approval`, `secure_cookies` from the server config."""

    def __init__(self, tools, authenticator: Authenticator, registry_path: Path | None, rule: rep.Rule, *,
                 audit_dsn: str | None = None, audit: bool = True, sessions: Sessions | None = None,
                 allow_self_approval: bool = False, secure_cookies: bool = False, floods=None) -> None:
        from ..governance.store import RegistryStore

        self.tools = tools
        self.auth = authenticator
        self.store = registry_path if isinstance(registry_path, RegistryStore) else RegistryStore(registry_path)
        self.registry_path = self.store.path
        self.rule = rule
        self.audit_dsn = audit_dsn
        self.audit = audit
        self.sessions = sessions if sessions is not None else Sessions()
        self.allow_self_approval = allow_self_approval
        self.secure_cookies = secure_cookies
        self.floods = floods

    # ------------------------------------------------------------ who is asking

    def principal_for_session(self, session_id: str | None) -> Principal | None:
        """Who the dashboard's session cookie signs in, or None (unknown, expired, ended). Asked by
        `middleware.BearerAuth` on /governance paths: the one place that decides who the caller is."""
        return self.sessions.principal_for(session_id)

    def _reviewer(self, request: Request) -> Principal:
        from .mcp_server import PRINCIPAL_KEY

        principal = request.scope.get(PRINCIPAL_KEY)
        if principal is None or not principal.reviewer:
            raise AuthError(Codes.NOT_REVIEWER, "the governance pages are for reviewers",
                            hint="ask for a reviewer principal in the server configuration")
        return principal

    def _session(self, request: Request, principal: Principal) -> Session | None:
        """The caller's own session (the cookie's, signing in this same principal), if any."""
        session = self.sessions.get(request.cookies.get(COOKIE))
        return session if session is not None and session.principal.name == principal.name else None

    def _own_origins(self, request: Request) -> set[str]:
        host = (request.headers.get("host") or "").strip().lower()
        if not host:
            return set()
        schemes = {request.url.scheme} | ({"https"} if self.secure_cookies else set())
        return {_origin(f"{scheme}://{host}") for scheme in schemes}

    def _cross_origin(self, request: Request) -> str | None:
        """Why a POST may not come from this dashboard's own page (the audit's reason), else None.
        `Sec-Fetch-Site`, when a browser sends it, must say same-origin; a present Origin must be the
        server's own (a missing one is fine: the CSRF token decides). `Origin: null` is what a browser
        sends for the pages' own forms under `Referrer-Policy: no-referrer`, and also from an opaque
        origin (a sandboxed frame): it passes only with `Sec-Fetch-Site: same-origin`, which no page
        of another origin can make a browser send."""
        site = [v.strip().lower() for v in request.headers.getlist("sec-fetch-site")]
        if site and (len(site) > 1 or site[0] not in ("same-origin", "none")):
            return "CROSS_SITE"
        origins = request.headers.getlist("origin")
        if not origins:
            return None
        if len(origins) > 1:
            return "CROSS_ORIGIN"
        if origins[0].strip() == "null":
            return None if site == ["same-origin"] else "CROSS_ORIGIN"
        if _origin(origins[0]) not in self._own_origins(request):
            return "CROSS_ORIGIN"
        return None

    def _secure(self, request: Request) -> bool:
        return self.secure_cookies or request.url.scheme == "https"

    # ------------------------------------------------------------ the audit

    def _record(self, principal: Principal | None, what: str, error: ExploreError | None = None,
                done: str | None = None) -> None:
        """One audit event of a governance action: who, what, and how it ended (`done` is the reason
        of one that went through: SIGNED_IN, SIGNED_OUT, PROMOTED, APPROVED)."""
        audit = self.tools.audit
        if audit is None:
            return
        from ..envelope import new_id
        from ..governance.audit import Event

        try:
            fields: dict[str, Any] = {"outcome": "ok", "reason": done}
            if error is not None:
                fields = {"outcome": "refused" if error.type in ("validation", "policy", "auth") else "failed",
                          "error_type": error.type, "error_subtype": error.subtype, "error_code": error.code,
                          "reason": error.reason, "message": error.message, "hint": error.hint}
            audit.record(Event(id=new_id(), at=dt.datetime.now(dt.timezone.utc),
                               principal=principal.name if principal else "anonymous",
                               role=principal.role if principal else None, surface=SURFACE, exploration=what,
                               **fields))
        except Exception:  # the audit must never break an answer
            import logging

            logging.getLogger("ontoos_explore.audit").exception("could not record a governance event")

    # ------------------------------------------------------------ helpers

    def _dsn(self) -> str:
        if not self.audit or self.audit_dsn is None:
            raise InputError(Codes.INVALID_REQUEST, "the audit is off on this server", hint="start it with ONTOOS_AUDIT=on")
        return self.audit_dsn

    def _report(self, f: rep.Filters, rows: int = 50, chart_rows: bool = False) -> dict[str, Any]:
        with psycopg.connect(self._dsn(), connect_timeout=5) as conn:
            from ..governance.audit import ensure_schema

            ensure_schema(conn)
            data = rep.report(conn, f, self.rule, promotion.promoted_fingerprints(self.store), rows=rows)
            data["requests"] = [{k: rep.plain(v) for k, v in r.items()} for r in template_requests.open_requests(conn)]
            if chart_rows:
                data["by_day_and_subtype"] = rep.by_day_and_subtype(conn, f)
        for c in data["candidates"]:
            c["suggested_id"] = _suggest_id(c)
            c["suggested_title"] = _suggest_title(c)
        return data

    def _queries(self) -> list[dict[str, Any]]:
        from ..governance.store import RegistryFileError

        try:
            return self.store.listed()
        except RegistryFileError:  # the page still shows the report; a change to the file is refused
            return []

    def _reload_registry(self) -> None:
        """The tools serve the change at once (a LiveRegistry would within a second anyway)."""
        refresh = getattr(self.tools.registry, "refresh", None)
        if refresh is not None:
            refresh()
        elif self.registry_path is not None:  # a plain Registry: replaced by the file as it is now
            from ..governance.registry import Registry

            self.tools.registry = Registry.load(self.store, self.tools.contract)

    def _render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = _env.get_template(template).render(css=Markup(CSS), **context)
        return HTMLResponse(html, status_code=status)

    def _refusal(self, e: ExploreError, request: Request, *, back: str = "/governance") -> Response:
        """A refusal with the status of its row: the envelope for the JSON API, for a refused body
        (too large, too slow: as the body limit in front of every route answers it) and for a client
        that asks for JSON; else a page naming it."""
        accept = request.headers.get("accept", "")
        if (request.url.path.startswith("/api/") or e.error_code in (Codes.BODY_TOO_SLOW, Codes.BODY_TOO_LARGE)
                or e.error_code is Codes.INPUT_TOO_LARGE or ("application/json" in accept and "text/html" not in accept)):
            from ..envelope import Answer
            from .rest import answer_response

            return answer_response(Answer.refusal(e))
        response = self._render("error.html", e.error_code.status, e=e, back=back)
        if e.retry_after_s is not None:
            response.headers["Retry-After"] = str(e.retry_after_s)
        return response

    def _upstream(self) -> ExploreError:
        return ExploreError(Codes.UPSTREAM_UNAVAILABLE, "the audit store is unavailable", hint="retry in a few seconds")

    # ------------------------------------------------------------ pages

    async def page(self, request: Request) -> Response:
        """The summary: the first rows of every table, each leading to the whole of it."""
        try:
            principal = self._reviewer(request)
            f = dv.filters_of(request.query_params, extra=("done", "id"))
            data = await asyncio.to_thread(self._report, f, SUMMARY_ROWS, True)
        except ExploreError as e:
            return self._refusal(e, request)
        except psycopg.Error:
            return self._refusal(self._upstream(), request)
        session = self._session(request, principal)
        contract = self.tools.contract
        query = f.query()
        tables = {view: [dv.cells(listing, row, f) for row in data[view]]
                  for view, listing in SUMMARY_TABLES.items()}
        exports = {view: {fmt: dv.url(f"/governance/{listing.path}", {**query, "format": fmt}) for fmt in ("csv", "json")}
                   for view, listing in SUMMARY_TABLES.items()}
        exports["recent"] = {fmt: dv.url("/governance/events", {**query, "outcome": "refused", "format": fmt})
                             for fmt in ("csv", "json")}
        return self._render(
            "governance.html", principal=principal.name, contract_hash=contract.hash, r=data, filters=f,
            rule=self.rule, facets=self._facets(), tables=tables, exports=exports, chart=chart.build(
                data["by_day_and_subtype"]), queries=self._queries(), notice=_notice(request, DONE), query=query,
            query_string=urllib.parse.urlencode(query), url=dv.url, when=dv.when, as_of=dv.as_of(),
            csrf=session.csrf if session is not None else None, self_approval=self.allow_self_approval)

    async def api(self, request: Request) -> Response:
        """One view (or the whole report) as the JSON envelope, or one view as CSV (Accept or format=);
        a view pages with `page` and `size`."""
        from .negotiate import CSV, JSON, choose

        try:
            self._reviewer(request)
            view = request.path_params.get("view", "report")
            if view not in rep.VIEWS + ("report",):
                hint, _ = did_you_mean(view[:40], ("report",) + rep.VIEWS, "views")
                raise InputError(Codes.INVALID_REQUEST, "no view of that name", hint=hint)
            q = request.query_params
            fmt = q.get("format")
            dv.check_names(q, dv.FILTERS + dv.PAGING + ("days",))
            dv.no_blanks(q)
            wanted = choose(request.headers.get("accept"), (JSON, CSV) if view in rep.VIEW_SQL else (JSON,), fmt)
            if wanted is None:
                from ..errors import not_acceptable

                raise not_acceptable(request.headers.get("accept") or f"format={fmt}", ("application/json",) + (
                    ("text/csv",) if view in rep.VIEW_SQL else ()))
            f, page = dv.filters_of(q), dv.page_of(q)
            if view in rep.VIEW_SQL:
                def read():
                    with psycopg.connect(self._dsn(), connect_timeout=5) as conn:
                        from ..governance.audit import ensure_schema

                        ensure_schema(conn)
                        return rep.table(conn, view, f, page if wanted == JSON else rep.Page(1, dv.EXPORT_MAX))
                table = await asyncio.to_thread(read)
                if wanted == CSV:
                    return dv.export(table, "csv", view, f, dv.as_of())
                body = {view: table.rows, "page": table.shown()}
            else:
                data = await asyncio.to_thread(self._report, f)
                body = data if view == "report" else {view: data[view]}
        except ExploreError as e:
            return self._refusal(e, request)
        except psycopg.Error:
            return self._refusal(self._upstream(), request)
        return JSONResponse({"ok": True, "data": body, "meta": {"contract_hash": self.tools.contract.hash,
                                                                "filters": f.shown()}})

    async def promote_form(self, request: Request) -> Response:
        """The promote form: the entry as it would be written, each parameter with every example it
        could keep (the safe kinds ticked, free text not), for the reviewer to choose from."""
        try:
            principal = self._reviewer(request)
            if set(request.query_params) - {"fingerprint"} or len(request.query_params.getlist("fingerprint")) != 1:
                raise InputError(Codes.INVALID_REQUEST, "the promote form takes one fingerprint",
                                 hint="/governance/promote?fingerprint=<16 hex digits>")
            fingerprint = promotion.check_fingerprint(request.query_params["fingerprint"])

            def build():
                with psycopg.connect(self._dsn(), connect_timeout=5) as conn:
                    entry = promotion.preview(conn, self.tools.contract, fingerprint, "preview", "preview")
                    dataset = conn.execute("SELECT max(dataset) FROM ontoos_audit.events WHERE fingerprint = %s "
                                           "AND outcome = 'ok'", [fingerprint]).fetchone()[0]  # as the candidates say
                return entry, dataset

            entry, dataset = await asyncio.to_thread(build)
        except ExploreError as e:
            return self._refusal(e, request)
        except psycopg.Error:
            return self._refusal(self._upstream(), request)
        candidate = {"dataset": dataset, "fingerprint": fingerprint}
        parameters = []
        for p in entry.parameters:
            raw = p.model_dump(mode="json")
            parameters.append({**raw, "free_text": promotion.free_text(raw),
                               "examples": [{"key": json.dumps([p.name, ex], ensure_ascii=False), "shown": _shown(ex)}
                                            for ex in raw["examples"]]})
        session = self._session(request, principal)
        return self._render("promote.html", principal=principal.name, fingerprint=fingerprint, entry=entry,
                            parameters=parameters, suggested_id=_suggest_id(candidate),
                            suggested_title=_suggest_title(candidate), max_example=promotion.MAX_EXAMPLE,
                            csrf=session.csrf if session is not None else None,
                            self_approval=self.allow_self_approval)

    def routes(self) -> list[Route]:
        return [
            Route("/governance", _secured(self.page), methods=["GET"]),
            Route("/governance/login", _secured(self.login_form), methods=["GET"]),
            Route("/governance/login", _secured(self.login), methods=["POST"]),
            Route("/governance/logout", _secured(self.logout), methods=["POST"]),
            Route("/governance/promote", _secured(self.promote_form), methods=["GET"]),
            Route("/governance/promote", _secured(self.promote), methods=["POST"]),
            Route("/governance/approve", _secured(self.approve), methods=["POST"]),
            Route("/governance/retire", _secured(self.retire), methods=["POST"]),
            Route("/governance/reject", _secured(self.reject), methods=["POST"]),
            *[Route(f"/governance/{name}", _secured(self.listing), methods=["GET"]) for name in dv.LISTINGS],
            Route("/governance/events/{id}", _secured(self.event_page), methods=["GET"]),
            Route("/governance/columns/{dataset}/{column}", _secured(self.column_page), methods=["GET"]),
            Route("/governance/fingerprints/{fingerprint}", _secured(self.fingerprint_page), methods=["GET"]),
            Route("/governance/candidates", _secured(self.candidates_page), methods=["GET"]),
            Route("/governance/queries", _secured(self.queries_page), methods=["GET"]),
            Route("/governance/queries/{id}", _secured(self.query_page), methods=["GET"]),
            Route("/governance/requests", _secured(self.requests_page), methods=["GET"]),
            Route("/governance/requests/{id}", _secured(self.request_page), methods=["GET"]),
            Route("/governance/requests/close", _secured(self.close_request), methods=["POST"]),
            Route("/api/v1/governance/{view}", _secured(self.api), methods=["GET"]),
        ]


def _secured(handler):
    """The route, its every answer sent with the dashboard's security headers."""
    async def route(request: Request) -> Response:
        response = await handler(request)
        for k, v in SECURITY_HEADERS.items():
            response.headers.setdefault(k, v)
        return response

    route.__name__ = handler.__name__
    return route
