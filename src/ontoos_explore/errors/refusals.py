"""Errors, the surfaces' own refusals: each built here from its row of the table, so every surface answers it alike."""

from __future__ import annotations

import math

from . import AuthError, BudgetError, ExploreError, InputError
from .codes import Codes

def _retry_after(e: ExploreError, wait_s: float) -> ExploreError:
    e.retry_after_s = max(1, math.ceil(wait_s))
    return e


def no_token(message: str = "a bearer token is required") -> ExploreError:
    return AuthError(Codes.NO_TOKEN, message,
                     hint="send one Authorization: Bearer <token> header (tokens are issued in the server configuration)")


def bad_cookie() -> ExploreError:
    return AuthError(Codes.BAD_COOKIE, "the sign-in cookie cannot be read",
                     hint="sign in again at /governance/login, or send an Authorization: Bearer <token> header")


def body_too_large(limit: int, size: int | None = None) -> ExploreError:
    return BudgetError(Codes.BODY_TOO_LARGE, "the body is too large" if size is None else f"the body is {size} bytes",
                       hint=f"send at most {limit} bytes")


def body_too_slow(timeout_s: float) -> ExploreError:
    return InputError(Codes.BODY_TOO_SLOW, f"the body did not arrive within {timeout_s:g} s",
                      hint="send the whole body at once, with a Content-Length that matches it")


def not_json(content_type: str) -> ExploreError:
    shown = content_type.encode("ascii", "replace").decode("ascii")[:60]
    return InputError(Codes.BODY_NOT_JSON, f"the body is sent as '{shown}', not as JSON",
                      hint="send Content-Type: application/json (UTF-8) with a JSON object, "
                      "e.g. curl -H 'Content-Type: application/json' -d '{\"dataset\": ...}'")


def rate_limited(principal: str, limit: str, wait_s: float) -> ExploreError:
    after = max(1, math.ceil(wait_s))
    e = ExploreError(Codes.RATE_LIMITED, f"{principal} has used its rate limit of {limit}",
                     hint=f"retry in {after} s (meta.retry_after_s; Retry-After over HTTP); spread the calls out, "
                     "or ask for a higher rate_limit in the server configuration", reason="RATE_LIMITED")
    return _retry_after(e, wait_s)


def flooded(wait_s: float) -> ExploreError:
    after = max(1, math.ceil(wait_s))
    e = ExploreError(Codes.FLOODED, "too many requests without a valid token from this address",
                     hint=f"retry in {after} s with one Authorization: Bearer <token> header "
                     "(tokens are issued in the server configuration)", reason="AUTH_FLOOD")
    return _retry_after(e, wait_s)


def too_many_sessions(principal: str, held: int) -> ExploreError:
    return ExploreError(Codes.TOO_MANY_SESSIONS, f"{principal} has {held} MCP sessions open, its most at once",
                        hint="reuse an open session (its mcp-session-id header), or end one you no longer use "
                        "with DELETE /mcp; idle sessions end after 30 minutes", reason="MCP_SESSIONS")


def too_many_in_flight(principal: str, cap: int) -> ExploreError:
    e = ExploreError(Codes.TOO_MANY_IN_FLIGHT, f"{principal} is running {cap} queries at once, its most",
                     hint="retry in 1 s (meta.retry_after_s; Retry-After over HTTP), once one of them has answered; "
                     "send queries one after another rather than all at once", reason="IN_FLIGHT")
    return _retry_after(e, 1.0)


def cancelled(surface: str) -> ExploreError:
    return ExploreError(Codes.CANCELLED, "the call was abandoned before its answer",
                        hint="the client disconnected or cancelled the call; nothing was returned",
                        reason="CLIENT_DISCONNECTED" if surface == "rest" else "CALL_CANCELLED")


def not_a_route(method: str, path: str, detail: str, status: int, routes: str) -> ExploreError:
    row = Codes.WRONG_METHOD if status == 405 else Codes.NO_ROUTE
    return InputError(row, f"{method} {path[:80]}: {detail}", hint=f"routes: {routes}")


def not_acceptable(asked: str, offered: tuple[str, ...]) -> ExploreError:
    return InputError(Codes.NOT_ACCEPTABLE, f"this route cannot answer as {asked[:80]!r}",
                      hint=f"ask for {' or '.join(offered)} (Accept header, or format="
                           f"{'|'.join(o.split('/')[1] for o in offered)})")


def self_approval(ident: str, principal: str) -> ExploreError:
    return AuthError(Codes.SELF_APPROVAL, f"{principal} promoted '{ident[:60]}' and cannot approve it too",
                     hint="another reviewer approves it (or the server configuration sets allow_self_approval: true)",
                     reason="SELF_APPROVAL")


def csrf_refused(why: str) -> ExploreError:
    """A dashboard POST refused before it is acted on: `why` (CROSS_ORIGIN, CROSS_SITE, NO_SESSION, BAD_CSRF) is the
    audit's reason; the caller sees one message."""
    return AuthError(Codes.CSRF_REFUSED, "the form was not sent from this dashboard's own page",
                     hint="reload /governance (sign in at /governance/login) and submit the form from there", reason=why)


def transport_refused(text: str, hint: str) -> ExploreError:
    """The MCP SDK refused a request in plain text (its own status: a bad Host, Origin or Accept)."""
    return InputError(Codes.TRANSPORT_REFUSED, text[:200], hint=hint)


def unknown_session(reason: str = "UNKNOWN_SESSION") -> ExploreError:
    """An mcp-session-id that names no session of the caller's: unknown, ended, or another principal's
    (`reason` FOREIGN_SESSION, for the audit only): answered alike, so an id's existence is not revealed."""
    return InputError(Codes.UNKNOWN_SESSION, "Session not found",
                      hint="the mcp-session-id names no open session of this token: it ended (DELETE /mcp, idle for "
                      "30 minutes, a restart) or was never opened; send initialize without an mcp-session-id to open "
                      "one", reason=reason)


def headers_too_slow(timeout_s: float) -> ExploreError:
    return InputError(Codes.HEADERS_TOO_SLOW, f"the request line and headers did not arrive within {timeout_s:g} s",
                      hint="send the request line and all its headers at once; the connection is closed")


def head_too_large(limit: int) -> ExploreError:
    return BudgetError(Codes.HEAD_TOO_LARGE, f"the request line and headers are over {limit // 1024} KB",
                       hint="send a long exploration as the JSON body of a POST (/api/v1/explore, or over MCP) "
                            "rather than in a GET's query string; the connection is closed")


def unknown_method() -> ExploreError:
    return InputError(Codes.WRONG_METHOD, "the request's method is not one HTTP/1.1 defines",
                      hint="GET or POST (DELETE ends an MCP session); the connection is closed")


def too_many_connections(cap: int) -> ExploreError:
    e = ExploreError(Codes.TOO_MANY_CONNECTIONS, f"this address has {cap} connections open to the server, its most",
                     hint="retry in 1 s on one of the connections already open (keep-alive), or close the idle ones",
                     reason="CONNECTIONS")
    return _retry_after(e, 1.0)


def shutting_down() -> ExploreError:
    """A request that reaches a server process while it drains (SIGTERM or SIGINT): nothing of it ran."""
    e = ExploreError(Codes.SHUTTING_DOWN, "this server process is shutting down",
                     hint="retry in 1 s: another process of the deployment (or this one, restarted) answers",
                     reason="DRAINING")
    return _retry_after(e, 1.0)
