"""Server, governance: the reviewers' dashboard (server-rendered HTML) and its JSON API.

    GET  /governance                     the page; ?days=&dataset=&subtype= filter it
    GET  /governance/login, POST         a token form for browsers (sets an HttpOnly cookie)
    POST /governance/promote             fingerprint, id, title -> a pending named query
    POST /governance/approve             id -> approved
    GET  /api/v1/governance/report       everything on the page, as JSON
    GET  /api/v1/governance/{view}       one view (by_column, candidates, recent, ...)

Only principals marked `reviewer: true` may use any of it. Works without
JavaScript: filters are a GET form, actions are POST forms that redirect.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ..errors import AuthError, BudgetError, Codes, ExploreError, InputError
from ..governance import promote as promotion
from ..governance import report as rep
from ..names import fold
from .config import Authenticator, Principal

COOKIE = "ontoos_token"
_env = Environment(loader=PackageLoader("ontoos_explore.server", "templates"), autoescape=select_autoescape(["html"]))


class Governance:
    """`audit_dsn` is where the reports read the audit (the deployment's audit database, else the
    exploration database), `audit` whether it is on; the registry file is read and written through
    its `RegistryStore`, and `tools.registry` (a `LiveRegistry`) is refreshed after every change."""

    def __init__(self, tools, authenticator: Authenticator, registry_path: Path | None, rule: rep.Rule, *,
                 audit_dsn: str | None = None, audit: bool = True) -> None:
        from ..governance.store import RegistryStore

        self.tools = tools
        self.auth = authenticator
        self.registry_path = registry_path
        self.store = RegistryStore(registry_path)
        self.rule = rule
        self.audit_dsn = audit_dsn
        self.audit = audit

    # ------------------------------------------------------------ helpers

    def _dsn(self) -> str:
        if not self.audit or self.audit_dsn is None:
            raise InputError(Codes.INVALID_REQUEST, "the audit is off on this server", hint="start it with ONTOOS_AUDIT=on")
        return self.audit_dsn

    def _reviewer(self, request: Request) -> Principal:
        from .mcp_server import PRINCIPAL_KEY

        principal = request.scope.get(PRINCIPAL_KEY)
        if principal is None or not principal.reviewer:
            raise AuthError(Codes.NOT_REVIEWER, "the governance pages are for reviewers",
                            hint="ask for a reviewer principal in the server configuration")
        return principal

    def _filters(self, request: Request) -> rep.Filters:
        q = request.query_params
        try:
            days = max(1, min(365, int(q.get("days") or 14)))
        except ValueError:
            raise InputError(Codes.INVALID_REQUEST, "'days' must be a number of days", hint="e.g. days=7") from None
        return rep.Filters(days=days, dataset=q.get("dataset") or None, subtype=q.get("subtype") or None)

    def _report(self, f: rep.Filters) -> dict[str, Any]:
        with psycopg.connect(self._dsn(), connect_timeout=5) as conn:
            from ..governance.audit import ensure_schema

            ensure_schema(conn)
            data = rep.report(conn, f, self.rule, promotion.promoted_fingerprints(self.registry_path))
        for c in data["candidates"]:
            c["suggested_id"] = _suggest_id(c)
            c["suggested_title"] = f"{c['dataset'] or 'exploration'} ({c['fingerprint'][:6]})"
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

    # ------------------------------------------------------------ routes

    async def page(self, request: Request) -> Response:
        try:
            principal = self._reviewer(request)
            f = self._filters(request)
            data = await asyncio.to_thread(self._report, f)
        except ExploreError as e:
            return _refusal(e, page=True)
        except psycopg.Error:
            return _refusal(ExploreError(Codes.UPSTREAM_UNAVAILABLE, "the audit store is unavailable",
                                         hint="retry in a few seconds"), page=True)
        contract = self.tools.contract
        html = _env.get_template("governance.html").render(
            principal=principal.name, contract_hash=contract.hash, r=data, filters=f, rule=self.rule,
            datasets=sorted(contract.datasets), subtypes=sorted({c.subtype for c in _codes()}),
            queries=self._queries(), flash=request.query_params.get("msg"),
            flash_error=request.query_params.get("error") == "1", query=urllib.parse.urlencode(f.query()),
        )
        return HTMLResponse(html)

    async def api(self, request: Request) -> JSONResponse:
        try:
            self._reviewer(request)
            view = request.path_params.get("view", "report")
            if view not in rep.VIEWS + ("report",):
                raise InputError(Codes.INVALID_REQUEST, f"no view '{view[:40]}'", hint=f"views: report, {', '.join(rep.VIEWS)}")
            data = await asyncio.to_thread(self._report, self._filters(request))
        except ExploreError as e:
            return _refusal(e)
        except psycopg.Error:
            return _refusal(ExploreError(Codes.UPSTREAM_UNAVAILABLE, "the audit store is unavailable",
                                         hint="retry in a few seconds"))
        body = data if view == "report" else {view: data[view]}
        return JSONResponse({"ok": True, "data": body, "meta": {"contract_hash": self.tools.contract.hash}})

    async def _registry_action(self, request: Request, act) -> Response:
        """A reviewer's POST form that changes the registry: run `act(form)` (in a thread), reload,
        and redirect back to the page with its message (or the refusal's message and hint)."""
        try:
            self._reviewer(request)
            form = await _form(request)
            if self.registry_path is None:
                raise InputError(Codes.INVALID_REQUEST, "no registry file is configured", hint="start with --queries FILE")
            message = await asyncio.to_thread(act, form)
            self._reload_registry()
            return _back(message)
        except AuthError as e:
            return _refusal(e, page=True)
        except ExploreError as e:
            if e.error_code is Codes.BODY_TOO_SLOW:  # the form never arrived: the envelope, the connection closed
                return _refusal(e)
            return _back(f"{e.message}: {e.hint or ''}", error=True)

    async def promote(self, request: Request) -> Response:
        def act(form: dict[str, str]) -> str:
            with psycopg.connect(self._dsn(), connect_timeout=5) as conn:
                entry = promotion.promote(conn, self.tools.contract, self.store, form.get("fingerprint", ""),
                                          form.get("id", ""), form.get("title", "") or form.get("id", ""))
            return f"promoted {entry.id} (pending): approve it below"

        return await self._registry_action(request, act)

    async def approve(self, request: Request) -> Response:
        def act(form: dict[str, str]) -> str:
            promotion.set_status(self.store, form.get("id", ""), "approved")
            return f"approved {form.get('id')}: agents can run it with ontoos_run_query"

        return await self._registry_action(request, act)

    async def login_form(self, request: Request) -> Response:
        return HTMLResponse(
            "<!doctype html><html><head><meta charset='utf-8'><title>Sign in</title></head><body>"
            "<h1>Governance sign-in</h1><form method='post' action='/governance/login'>"
            "<label>Token <input type='password' name='token' autocomplete='off'></label> "
            "<button type='submit'>Sign in</button></form></body></html>")

    async def login(self, request: Request) -> Response:
        try:
            form = await _form(request)
        except ExploreError as e:  # the envelope, as the body limit in front of every route answers it
            return _refusal(e)
        principal = self.auth.authenticate(form.get("token", ""))
        if principal is None:
            return HTMLResponse("<!doctype html><p>That token is not valid. <a href='/governance/login'>Try again</a></p>",
                                status_code=401)
        response = RedirectResponse("/governance", status_code=303)
        response.set_cookie(COOKIE, form["token"], httponly=True, samesite="strict", path="/governance")
        return response

    def routes(self) -> list[Route]:
        return [
            Route("/governance", self.page, methods=["GET"]),
            Route("/governance/login", self.login_form, methods=["GET"]),
            Route("/governance/login", self.login, methods=["POST"]),
            Route("/governance/promote", self.promote, methods=["POST"]),
            Route("/governance/approve", self.approve, methods=["POST"]),
            Route("/api/v1/governance/{view}", self.api, methods=["GET"]),
        ]


def _codes():
    from ..errors import all_codes

    return all_codes()


def _suggest_id(candidate: dict[str, Any]) -> str:
    base = fold(candidate.get("dataset") or "exploration")
    return f"{base}_{candidate['fingerprint'][:6]}"


MAX_FORM = 64 * 1024


async def _form(request: Request) -> dict[str, str]:
    chunks, size = [], 0
    async for chunk in request.stream():  # refused as soon as it is too large, not after reading it all
        size += len(chunk)
        if size > MAX_FORM:
            raise BudgetError(Codes.INPUT_TOO_LARGE, "the form is too large", hint="send at most 64 KiB")
        chunks.append(chunk)
    body = b"".join(chunks)
    parsed = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in parsed.items()}


def _back(message: str, error: bool = False) -> RedirectResponse:
    query = urllib.parse.urlencode({"msg": message[:300], **({"error": "1"} if error else {})})
    return RedirectResponse(f"/governance?{query}", status_code=303)


def _refusal(e: ExploreError, page: bool = False) -> Response:
    """A refusal as the dashboard answers it, with the status of its row: a page for a browser's page
    (`page`), else the envelope (the JSON API, a form's body), as every other route answers it."""
    if not page:
        from ..envelope import Answer
        from .rest import answer_response

        return answer_response(Answer.refusal(e))
    from html import escape

    return HTMLResponse(f"<!doctype html><html><body><h1>{escape(e.subtype)}</h1><p>{escape(e.message)}</p>"
                        f"<p>{escape(e.hint or '')}</p></body></html>", status_code=e.error_code.status)
