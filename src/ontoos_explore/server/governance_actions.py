"""Server, governance actions: a reviewer's POST (promote, approve, sign in, sign out) -> done and audited, or refused.

Mixed into `governance_routes.Governance`, whose state (sessions, store, audit) it uses.
"""

from __future__ import annotations

import asyncio
import json
import re
import urllib.parse
from typing import Any

import psycopg
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..errors import AuthError, Codes, ExploreError, InputError, csrf_refused, flooded
from ..governance import promote as promotion
from ..governance import requests as template_requests
from .config import Principal
from .governance_forms import Form, LOGIN_DONE, _chosen, _describe, _done, _form, _ident, _notice
from .sessions import COOKIE, Session

REQUEST_ID = re.compile(r"[0-9a-f]{16}")


class Actions:

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

    async def retire(self, request: Request) -> Response:
        return await self._change_status(request, "retire", promotion.retire, "retired", "RETIRED")

    async def reject(self, request: Request) -> Response:
        return await self._change_status(request, "reject", promotion.reject, "rejected", "REJECTED")

    async def _change_status(self, request: Request, name: str, change, done: str, reason: str) -> Response:
        """Retire an approved query or reject a pending one, from its page; back to its page."""
        async def act(form: Form, principal: Principal, session: Session):
            ident = _ident(form.one("id"))
            self._registry_configured()
            entry = await asyncio.to_thread(change, self.store, ident, principal.name)
            self._reload_registry()
            written = str(entry.get("id", ident))
            return (f"{name} {written}", _done(done, written, f"/governance/queries/{urllib.parse.quote(written)}"),
                    reason)

        return await self._action(request, name, act)

    async def close_request(self, request: Request) -> Response:
        async def act(form: Form, principal: Principal, session: Session):
            ident = form.one("id")
            if not REQUEST_ID.fullmatch(ident or ""):
                raise InputError(Codes.INVALID_REQUEST, "'id' must be a request's id", hint="close it from its row")
            answered_by = form.one_or_none("answered_by") or None
            if answered_by is not None:
                answered_by = _ident(answered_by)

            def write():
                with psycopg.connect(self._dsn(), connect_timeout=5) as conn:
                    return template_requests.close(conn, ident, principal.name, answered_by)

            if not await asyncio.to_thread(write):
                raise InputError(Codes.INVALID_REQUEST, f"no open request {ident}",
                                 hint="it is closed already, or was never filed: reload the page")
            return (f"close request {ident}" + (f", answered by {answered_by}" if answered_by else ""),
                    _done("closed", ident), "CLOSED")

        return await self._action(request, "close request", act)

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
            return await self._failed_login(request, None, e)
        principal = self.auth.authenticate(token)
        if principal is None:
            return await self._failed_login(request, None, AuthError(
                Codes.NO_TOKEN, "That token is not valid.", reason="BAD_TOKEN",
                hint="tokens are issued in the server configuration; the token is the one your bearer header sends"))
        if not principal.reviewer:
            return await self._failed_login(request, principal, AuthError(
                Codes.NOT_REVIEWER, "The governance pages are for reviewers.",
                hint="ask for a reviewer principal in the server configuration"))
        self.sessions.end(request.cookies.get(COOKIE))  # a new sign-in never keeps an id the browser had
        session = self.sessions.open(principal)
        self._record(principal, "sign in", done="SIGNED_IN")
        response = RedirectResponse("/governance", status_code=303)
        response.set_cookie(COOKIE, session.id, max_age=max(1, int(self.sessions.lifetime_s)), path="/governance",
                            secure=self._secure(request), httponly=True, samesite="strict")
        return response

    async def _failed_login(self, request: Request, principal: Principal | None, e: ExploreError) -> Response:
        if principal is None and self.floods is not None:
            wait = await self.floods.take((request.client.host if request.client else None) or "unknown")
            if wait > 0:
                return self._refusal(flooded(wait), request, back="/governance/login")
        self._record(principal, "sign in", e)
        accept = request.headers.get("accept", "")
        if "application/json" in accept and "text/html" not in accept:
            return self._refusal(e, request)
        return self._login_page(e.error_code.status, error=e)
