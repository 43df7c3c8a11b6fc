"""Server, governance: the reviewers' dashboard (server-rendered HTML) and its JSON API.

    GET  /governance                     the page; ?days=&dataset=&subtype= filter it
    GET  /governance/login, POST         a token form for browsers: opens a session (server/sessions.py)
    POST /governance/logout              csrf -> the session ended
    GET  /governance/promote             ?fingerprint= -> the promote form: the entry, every example it would keep
    POST /governance/promote             csrf, fingerprint, id, title, keep... -> a pending named query
    POST /governance/approve             csrf, id -> approved (not by the reviewer who promoted it)
    GET  /api/v1/governance/report       everything on the page, as JSON
    GET  /api/v1/governance/{view}       one view (by_column, candidates, recent, ...)

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
import re
import unicodedata
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import AuthError, BudgetError, Codes, ExploreError, InputError, csrf_refused, flooded
from ..governance import promote as promotion
from ..governance import report as rep
from ..names import fold, is_identifier
from .config import Authenticator, Principal
from .sessions import COOKIE, Session, Sessions

SURFACE = "dashboard"  # the audit's surface of every governance action
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

# The page's messages: a key of the redirect (`?done=...&id=...`) -> its text; nothing else is shown.
DONE = {
    "promoted": "promoted {id} (pending): it runs once a reviewer approves it below",
    "approved": "approved {id}: agents can run it with ontoos_run_query",
}
LOGIN_DONE = {"signed_out": "You are signed out: the session has ended."}

MAX_FORM = 64 * 1024
MAX_FIELDS = 300
FIELD_LIMITS = {"token": 4096, "csrf": 200, "fingerprint": 64, "id": 63, "title": promotion.MAX_TITLE, "keep": 2000}
SUBTYPE = re.compile(r"[A-Z][A-Z_]{0,39}")
DAYS = re.compile(r"[0-9]{1,3}")
# what a field may not hold: control characters (C0, DEL, C1), surrogates, private use, and the bidi controls
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class Governance:
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
        self.registry_path = registry_path
        self.store = RegistryStore(registry_path)
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

    def _filters(self, request: Request) -> rep.Filters:
        q = request.query_params
        days, dataset, subtype = q.get("days") or "14", q.get("dataset") or None, q.get("subtype") or None
        if not DAYS.fullmatch(days):
            raise InputError(Codes.INVALID_REQUEST, "'days' must be a number of days", hint="e.g. days=7")
        if dataset is not None and not is_identifier(dataset):
            raise InputError(Codes.INVALID_REQUEST, "'dataset' must be a dataset's name", hint="e.g. dataset=workloads")
        if subtype is not None and not SUBTYPE.fullmatch(subtype):
            raise InputError(Codes.INVALID_REQUEST, "'subtype' must be an error subtype", hint="e.g. subtype=UNKNOWN_FIELD")
        return rep.Filters(days=max(1, min(365, int(days))), dataset=dataset, subtype=subtype)

    def _report(self, f: rep.Filters) -> dict[str, Any]:
        with psycopg.connect(self._dsn(), connect_timeout=5) as conn:
            from ..governance.audit import ensure_schema

            ensure_schema(conn)
            data = rep.report(conn, f, self.rule, promotion.promoted_fingerprints(self.registry_path))
        for c in data["candidates"]:
            c["suggested_id"] = _suggest_id(c)
            c["suggested_title"] = _suggest_title(c)
        return data

    def _queries(self) -> list[dict[str, Any]]:
        from ..governance.store import RegistryFileError

        try:
            return [q for q in self.store.entries() if isinstance(q, dict)]
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
        try:
            principal = self._reviewer(request)
            f = self._filters(request)
            data = await asyncio.to_thread(self._report, f)
        except ExploreError as e:
            return self._refusal(e, request)
        except psycopg.Error:
            return self._refusal(self._upstream(), request)
        session = self._session(request, principal)
        contract = self.tools.contract
        return self._render(
            "governance.html", principal=principal.name, contract_hash=contract.hash, r=data, filters=f,
            rule=self.rule, datasets=sorted(contract.datasets), subtypes=sorted({c.subtype for c in _codes()}),
            queries=self._queries(), notice=_notice(request, DONE), query=urllib.parse.urlencode(f.query()),
            csrf=session.csrf if session is not None else None, self_approval=self.allow_self_approval)

    async def api(self, request: Request) -> JSONResponse:
        try:
            self._reviewer(request)
            view = request.path_params.get("view", "report")
            if view not in rep.VIEWS + ("report",):
                raise InputError(Codes.INVALID_REQUEST, f"no view '{view[:40]}'", hint=f"views: report, {', '.join(rep.VIEWS)}")
            data = await asyncio.to_thread(self._report, self._filters(request))
        except ExploreError as e:
            return self._refusal(e, request)
        except psycopg.Error:
            return self._refusal(self._upstream(), request)
        body = data if view == "report" else {view: data[view]}
        return JSONResponse({"ok": True, "data": body, "meta": {"contract_hash": self.tools.contract.hash}})

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

    # ------------------------------------------------------------ actions

    async def _action(self, request: Request, name: str, act) -> Response:
        """A reviewer's POST form that changes something: refused before anything is done unless it
        comes from this dashboard's page of the caller's own session (Origin, CSRF token); then
        `act(form, principal, session)` -> (what, response), audited with who and what either way."""
        from .mcp_server import PRINCIPAL_KEY

        principal: Principal | None = request.scope.get(PRINCIPAL_KEY)
        what = name
        try:
            if (why := self._cross_origin(request)) is not None:
                raise csrf_refused(why)
            principal = self._reviewer(request)
            form = await _form(request)
            what = _describe(name, form)
            session = self._session(request, principal)
            if session is None:
                raise csrf_refused("NO_SESSION")
            if not session.csrf_matches(form.one("csrf")):
                raise csrf_refused("BAD_CSRF")
            what, response, done = await act(form, principal, session)
        except ExploreError as e:
            self._record(principal, what, e)
            return self._refusal(e, request)
        except psycopg.Error:
            e = self._upstream()
            self._record(principal, what, e)
            return self._refusal(e, request)
        self._record(principal, what, done=done)
        return response

    async def promote(self, request: Request) -> Response:
        async def act(form: Form, principal: Principal, session: Session):
            fingerprint = promotion.check_fingerprint(form.one("fingerprint"))
            ident = _ident(form.one("id"))
            title = form.one("title") or ident
            chosen = _chosen(form.all("keep"))
            self._registry_configured()

            def write():
                with psycopg.connect(self._dsn(), connect_timeout=5) as conn:
                    return promotion.promote(conn, self.tools.contract, self.store, fingerprint, ident, title,
                                             examples=promotion.Examples(chosen=chosen), promoted_by=principal.name)

            entry = await asyncio.to_thread(write)
            self._reload_registry()
            kept = {p.name: list(p.examples) for p in entry.parameters}
            what = f"promote {entry.id} from {fingerprint}, examples kept: {json.dumps(kept, ensure_ascii=False)}"
            return what, _done("promoted", entry.id), "PROMOTED"

        return await self._action(request, "promote", act)

    async def approve(self, request: Request) -> Response:
        async def act(form: Form, principal: Principal, session: Session):
            ident = _ident(form.one("id"))
            self._registry_configured()
            entry = await asyncio.to_thread(promotion.approve, self.store, ident, principal.name,
                                            allow_self=self.allow_self_approval)
            self._reload_registry()
            promoted_by = entry.get("promoted_by") or "nobody recorded"
            return f"approve {entry.get('id', ident)} (promoted by {promoted_by})", _done("approved", str(entry.get("id", ident))), "APPROVED"

        return await self._action(request, "approve", act)

    async def logout(self, request: Request) -> Response:
        async def act(form: Form, principal: Principal, session: Session):
            self.sessions.end(request.cookies.get(COOKIE))
            response = RedirectResponse("/governance/login?done=signed_out", status_code=303)
            response.delete_cookie(COOKIE, path="/governance", secure=self._secure(request), httponly=True,
                                   samesite="strict")
            return "sign out", response, "SIGNED_OUT"

        return await self._action(request, "sign out", act)

    def _registry_configured(self) -> None:
        if self.registry_path is None:
            raise InputError(Codes.INVALID_REQUEST, "no registry file is configured", hint="start with --queries FILE")

    # ------------------------------------------------------------ signing in

    async def login_form(self, request: Request) -> Response:
        return self._login_page(notice=_notice(request, LOGIN_DONE))

    def _login_page(self, status: int = 200, **context: Any) -> Response:
        return self._render("login.html", status, hours=f"{self.sessions.lifetime_s / 3600:g}", **context)

    async def login(self, request: Request) -> Response:
        """A token -> a session. Every attempt is audited, except past the per-address limit of attempts
        without a valid token (429, counted as one AUTH_FLOOD gap per episode, as BearerAuth does)."""
        try:
            if (why := self._cross_origin(request)) is not None:
                raise csrf_refused(why)
            form = await _form(request)
            token = form.one("token")
        except ExploreError as e:
            if e.error_code in (Codes.BODY_TOO_SLOW, Codes.BODY_TOO_LARGE, Codes.INPUT_TOO_LARGE):
                return self._refusal(e, request, back="/governance/login")  # the body itself: the envelope
            return self._failed_login(request, None, e)
        principal = self.auth.authenticate(token)
        if principal is None:
            return self._failed_login(request, None, AuthError(
                Codes.NO_TOKEN, "That token is not valid.", reason="BAD_TOKEN",
                hint="tokens are issued in the server configuration; the token is the one your bearer header sends"))
        if not principal.reviewer:
            return self._failed_login(request, principal, AuthError(
                Codes.NOT_REVIEWER, "The governance pages are for reviewers.",
                hint="ask for a reviewer principal in the server configuration"))
        self.sessions.end(request.cookies.get(COOKIE))  # a new sign-in never keeps an id the browser had
        session = self.sessions.open(principal)
        self._record(principal, "sign in", done="SIGNED_IN")
        response = RedirectResponse("/governance", status_code=303)
        response.set_cookie(COOKIE, session.id, max_age=max(1, int(self.sessions.lifetime_s)), path="/governance",
                            secure=self._secure(request), httponly=True, samesite="strict")
        return response

    def _failed_login(self, request: Request, principal: Principal | None, e: ExploreError) -> Response:
        if principal is None and self.floods is not None:
            wait = self.floods.admit((request.client.host if request.client else None) or "unknown")
            if wait > 0:
                return self._refusal(flooded(wait), request, back="/governance/login")
        self._record(principal, "sign in", e)
        accept = request.headers.get("accept", "")
        if "application/json" in accept and "text/html" not in accept:
            return self._refusal(e, request)
        return self._login_page(e.error_code.status, error=e)

    def routes(self) -> list[Route]:
        return [
            Route("/governance", _secured(self.page), methods=["GET"]),
            Route("/governance/login", _secured(self.login_form), methods=["GET"]),
            Route("/governance/login", _secured(self.login), methods=["POST"]),
            Route("/governance/logout", _secured(self.logout), methods=["POST"]),
            Route("/governance/promote", _secured(self.promote_form), methods=["GET"]),
            Route("/governance/promote", _secured(self.promote), methods=["POST"]),
            Route("/governance/approve", _secured(self.approve), methods=["POST"]),
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


def _origin(value: str) -> str:
    """An origin as compared: lower case, without its scheme's default port."""
    v = value.strip().lower()
    for scheme, port in (("http://", ":80"), ("https://", ":443")):
        if v.startswith(scheme) and v.endswith(port):
            return v[: -len(port)]
    return v


def _codes():
    from ..errors import all_codes

    return all_codes()


def _suggest_id(candidate: dict[str, Any]) -> str:
    base = fold(candidate.get("dataset") or "exploration")
    return f"{base}_{candidate['fingerprint'][:6]}"


def _suggest_title(candidate: dict[str, Any]) -> str:
    return f"{candidate.get('dataset') or 'exploration'} ({candidate['fingerprint'][:6]})"


def _shown(example: Any) -> str:
    return example if isinstance(example, str) else json.dumps(example)


def _ident(value: str) -> str:
    if not is_identifier(value):
        raise InputError(Codes.INVALID_NAME, "the id must be an identifier (letters, digits and _, at most 63)",
                         hint="e.g. workloads_by_namespace")
    return value


def _chosen(keep: list[str]) -> dict[str, frozenset[str]]:
    """The examples ticked on the promote form: `keep` values, each the JSON [parameter, example]."""
    chosen: dict[str, set[str]] = {}
    for raw in keep:
        try:
            name, value = json.loads(raw)
        except (ValueError, TypeError):
            raise InputError(Codes.INVALID_REQUEST, "a kept example is not one the promote form offers",
                             hint="promote from the form at /governance/promote?fingerprint=...") from None
        if not isinstance(name, str) or isinstance(value, (dict, list)):
            raise InputError(Codes.INVALID_REQUEST, "a kept example is not one the promote form offers",
                             hint="promote from the form at /governance/promote?fingerprint=...")
        chosen.setdefault(name, set()).add(promotion.example_key(value))
    return {k: frozenset(v) for k, v in chosen.items()}


def _describe(name: str, form: Form) -> str:
    """What an action was asked to do, for the audit (ids and fingerprints as sent, cut short)."""
    parts = [name] + [f"{k}={form.one_or_none(k)[:70]!r}" for k in ("id", "fingerprint") if form.one_or_none(k)]
    return " ".join(parts)


def _done(key: str, ident: str) -> RedirectResponse:
    return RedirectResponse("/governance?" + urllib.parse.urlencode({"done": key, "id": ident}), status_code=303)


def _notice(request: Request, table: dict[str, str]) -> str | None:
    """The message of `?done=<key>` (with `id`, an identifier, where the message names one); else none."""
    text = table.get(request.query_params.get("done") or "")
    if text is None:
        return None
    if "{id}" in text:
        ident = request.query_params.get("id")
        if not is_identifier(ident):
            return None
        return text.format(id=ident)
    return text


# ---------------------------------------------------------------- forms


class Form:
    """A form's fields, read and checked once (`_form`)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs = pairs

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.pairs if k == name]

    def one_or_none(self, name: str) -> str | None:
        values = self.all(name)
        return values[0] if len(values) == 1 else None

    def one(self, name: str) -> str:
        """The field sent once ('' when not sent); sent twice, a 400 (which one counts is ambiguous)."""
        values = self.all(name)
        if len(values) > 1:
            raise InputError(Codes.INVALID_REQUEST, f"'{name}' is sent more than once", hint="send each field once")
        return values[0] if values else ""


async def _form(request: Request) -> Form:
    """The body as an HTML form: application/x-www-form-urlencoded, UTF-8, at most MAX_FORM bytes and
    MAX_FIELDS fields; each field within its length and free of control characters, surrogates and
    bidi controls (400, naming the field, never echoing it)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    chunks, size = [], 0
    async for chunk in request.stream():  # refused as soon as it is too large, not after reading it all
        size += len(chunk)
        if size > MAX_FORM:
            raise BudgetError(Codes.INPUT_TOO_LARGE, "the form is too large", hint="send at most 64 KiB")
        chunks.append(chunk)
    if ctype != "application/x-www-form-urlencoded":
        raise InputError(Codes.INVALID_REQUEST, "the body is not an HTML form",
                         hint="send Content-Type: application/x-www-form-urlencoded, as the dashboard's forms do")
    try:
        text = b"".join(chunks).decode("utf-8")
        pairs = urllib.parse.parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FIELDS, encoding="utf-8",
                                       errors="strict")
    except UnicodeDecodeError:
        raise InputError(Codes.INVALID_REQUEST, "the form is not UTF-8", hint="send the form as UTF-8") from None
    except ValueError:
        raise InputError(Codes.INVALID_REQUEST, f"the form has more than {MAX_FIELDS} fields",
                         hint="send the dashboard's form as it is") from None
    for name, value in pairs:
        if name not in FIELD_LIMITS:
            continue  # a field no route reads (a browser's button name, ...): never used
        if len(value) > FIELD_LIMITS[name]:
            raise InputError(Codes.INVALID_REQUEST, f"'{name}' is longer than {FIELD_LIMITS[name]} characters",
                             hint=f"send at most {FIELD_LIMITS[name]} characters")
        if bad := next((c for c in value if c in _BIDI or unicodedata.category(c) in ("Cc", "Cs", "Co")), None):
            raise InputError(Codes.INVALID_REQUEST, f"'{name}' holds a control character (U+{ord(bad):04X})",
                             hint="send printable text only")
    return Form(pairs)
