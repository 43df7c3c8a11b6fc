"""Errors, every stage: one hierarchy, one table of refusals, one envelope.

Each refusal is an `ExploreError` carrying a row of `Codes` (code, type,
subtype, and how every surface answers it: the HTTP status, the JSON-RPC
code when a transport refuses a message itself, the CLI's exit code), a
message and an actionable hint. `to_envelope()` is the only place the
caller-visible shape is built. Surfaces translate a row into their wire
format (`row.status`, `row.rpc`, `row.exit`) and decide nothing else: a new
refusal is one row here, and every surface answers it.

A code is what callers see and is stable and never reused; a retired code
stays below as a comment. A few rows share a code where callers see one
meaning with a different transport status (EX102 "the request is
malformed" is 400, 408 when the body is too slow, 415 when it is not JSON);
rows that share a code share its type and subtype.

The internal `reason` (e.g. SECRET_COLUMN_DENIED) is kept on the exception for
the audit trail and is never part of the envelope, so a secret column and a
column that does not exist get byte-identical answers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# type: the caller-visible category of an error.
VALIDATION = "validation"
AUTH = "auth"
POLICY = "policy"
NETWORK = "network"
INTERNAL = "internal"

# The status of each type, unless a row says otherwise.
STATUS = {VALIDATION: 400, AUTH: 403, POLICY: 403, NETWORK: 503, INTERNAL: 500}
CLIENT_CLOSED = 499  # nginx's "client closed request": logged, never received
# JSON-RPC 2.0 error codes, for a refusal of the message itself (before any tool runs).
RPC_PARSE_ERROR, RPC_INVALID_REQUEST, RPC_SERVER_ERROR = -32700, -32600, -32000
REJECTED_TYPES = (VALIDATION, POLICY, AUTH)  # the caller's input: CLI exit 2; anything else exit 1


@dataclass(frozen=True, slots=True)
class ErrorCode:
    """One row of the table: a refusal and how each surface answers it."""

    code: str
    type: str
    subtype: str
    title: str
    status: int  # the HTTP status (REST, the dashboard's JSON, /mcp's own refusals)
    rpc: int  # the JSON-RPC error code when /mcp or stdio refuses a message before any tool runs

    @property
    def exit(self) -> int:
        """The CLI's exit code: 2 when the caller's input was refused, 1 for anything else."""
        return 2 if self.type in REJECTED_TYPES else 1


def _c(code: str, type_: str, subtype: str, title: str, status: int | None = None,
       rpc: int | None = None) -> ErrorCode:
    if rpc is None:
        rpc = RPC_INVALID_REQUEST if type_ == VALIDATION else RPC_SERVER_ERROR
    return ErrorCode(code, type_, subtype, title, STATUS[type_] if status is None else status, rpc)


class Codes:
    """The registry. Ranges: EX1xx input, EX2xx names, EX3xx meaning and types,
    EX4xx budgets, EX5xx auth, EX6xx upstream, EX9xx internal."""

    # EX1xx: the input could not be read
    SYNTAX_ERROR = _c("EX101", VALIDATION, "SYNTAX_ERROR", "the text form does not parse")
    INVALID_REQUEST = _c("EX102", VALIDATION, "INVALID_REQUEST", "the JSON or flag form is malformed")
    INVALID_NAME = _c("EX103", VALIDATION, "SYNTAX_ERROR", "a name is not an identifier")
    UNKNOWN_TOOL = _c("EX104", VALIDATION, "INVALID_REQUEST", "no such tool")

    # EX2xx: a name does not resolve (or is not readable: same answer)
    UNKNOWN_FIELD = _c("EX201", VALIDATION, "UNKNOWN_FIELD", "not a readable column")
    UNKNOWN_DATASET = _c("EX202", VALIDATION, "UNKNOWN_DATASET", "not a readable dataset")
    UNKNOWN_RELATION = _c("EX203", VALIDATION, "UNKNOWN_RELATION", "not a relation from the datasets in scope")
    RELATION_NOT_FOLLOWED = _c("EX204", VALIDATION, "UNKNOWN_RELATION", "a column names a relation not followed")
    DUPLICATE_RELATION = _c("EX205", VALIDATION, "UNSUPPORTED_QUERY", "a relation is followed twice")
    UNKNOWN_QUERY = _c("EX208", VALIDATION, "UNKNOWN_QUERY", "not a named query the role may run")
    UNKNOWN_READ_SET = _c("EX207", VALIDATION, "UNKNOWN_READ_SET", "not a read set of the contract")
    # EX206: unused, reserved

    # EX3xx: the exploration is well-formed but means something unsupported
    TYPE_MISMATCH = _c("EX301", VALIDATION, "TYPE_MISMATCH", "a literal does not fit its column's type")
    OPERATOR_TYPE = _c("EX302", VALIDATION, "TYPE_MISMATCH", "an operator does not apply to the column's type")
    AGGREGATE_TYPE = _c("EX303", VALIDATION, "TYPE_MISMATCH", "sum/avg of a non-numeric column")
    UNGROUPED_FIELD = _c("EX304", VALIDATION, "UNSUPPORTED_QUERY", "a plain field is not in group by")
    DUPLICATE_OUTPUT = _c("EX305", VALIDATION, "UNSUPPORTED_QUERY", "two fields have the same output name")
    INVALID_LIMIT = _c("EX306", VALIDATION, "UNSUPPORTED_QUERY", "limit below 1")
    ORDER_NOT_GROUPED = _c("EX307", VALIDATION, "UNSUPPORTED_QUERY", "order by a column outside group by")
    NO_FIELDS = _c("EX308", VALIDATION, "UNSUPPORTED_QUERY", "no fields")
    VALUE_REJECTED = _c("EX309", VALIDATION, "TYPE_MISMATCH", "PostgreSQL refused a value (SQLSTATE class 22)")

    # EX4xx: a budget of the role or dataset is exceeded
    TOO_MANY_FIELDS = _c("EX401", POLICY, "QUERY_BUDGET_EXCEEDED", "more fields than max_fields")
    TOO_MANY_PREDICATES = _c("EX402", POLICY, "QUERY_BUDGET_EXCEEDED", "more predicates than max_predicates")
    IN_LIST_TOO_LONG = _c("EX403", POLICY, "QUERY_BUDGET_EXCEEDED", "an IN list longer than max_in_list")
    TOO_MANY_RELATIONS = _c("EX404", POLICY, "QUERY_BUDGET_EXCEEDED", "more relations than max_relations")
    LITERAL_TOO_LONG = _c("EX405", POLICY, "QUERY_BUDGET_EXCEEDED", "a literal longer than max_literal_length")
    HEAVY_WITHOUT_FILTER = _c("EX406", POLICY, "QUERY_BUDGET_EXCEEDED", "a heavy dataset without a filter")
    LIMIT_OVER_BUDGET = _c("EX407", POLICY, "QUERY_BUDGET_EXCEEDED", "limit above the row budget (clamp_limit off)")
    INPUT_TOO_LARGE = _c("EX408", POLICY, "QUERY_BUDGET_EXCEEDED", "the input text is too long", 413)
    TOO_DEEP = _c("EX409", POLICY, "QUERY_BUDGET_EXCEEDED", "predicates nested too deeply")
    TIME_BUDGET = _c("EX410", POLICY, "QUERY_BUDGET_EXCEEDED", "the statement ran past the role's timeout_ms", 504)
    COST_BUDGET = _c("EX411", POLICY, "QUERY_BUDGET_EXCEEDED", "the planner's cost estimate is above max_cost")

    # EX5xx: who is asking
    UNKNOWN_ROLE = _c("EX501", AUTH, "AUTH_SCOPE_DENIED", "the role is not in the contract")
    NO_TOKEN = _c("EX502", AUTH, "AUTH_REQUIRED", "no bearer token, or not a valid one", 401)
    NOT_REVIEWER = _c("EX503", AUTH, "AUTH_SCOPE_DENIED", "the page is for reviewers")
    SELF_APPROVAL = _c("EX504", AUTH, "SELF_APPROVAL", "a reviewer approves a query they promoted themselves")
    CSRF_REFUSED = _c("EX505", AUTH, "CSRF_REFUSED",
                      "a dashboard form from another origin, or without its session's CSRF token")

    # EX6xx: the database
    UPSTREAM_UNAVAILABLE = _c("EX601", NETWORK, "UPSTREAM_UNAVAILABLE", "PostgreSQL cannot be reached")

    # Hardening (server surfaces): per-principal rate limits, and calls the caller abandoned.
    RATE_LIMITED = _c("EX412", POLICY, "QUERY_BUDGET_EXCEEDED", "more calls than the principal's rate limit allows",
                      429)
    CANCELLED = _c("EX602", NETWORK, "CANCELLED", "the caller disconnected or cancelled before the answer (audit only)",
                   CLIENT_CLOSED)

    # The surfaces' own refusals of a request, before any tool runs: codes shared with the rows above
    # (callers see the same meaning), statuses of their own.
    BODY_NOT_JSON = _c("EX102", VALIDATION, "INVALID_REQUEST", "the body is not sent as JSON (UTF-8)", 415)
    BODY_TOO_SLOW = _c("EX102", VALIDATION, "INVALID_REQUEST", "the body did not arrive within the body timeout", 408)
    BODY_TOO_LARGE = _c("EX408", POLICY, "QUERY_BUDGET_EXCEEDED", "the body is over the size limit", 413,
                        RPC_INVALID_REQUEST)
    JSON_TOO_LARGE = _c("EX408", POLICY, "QUERY_BUDGET_EXCEEDED", "the JSON text is over the size limit", 413,
                        RPC_PARSE_ERROR)
    NOT_JSON_RPC = _c("EX102", VALIDATION, "INVALID_REQUEST", "not one JSON-RPC message (a batch, a bad id)")
    JSON_UNREADABLE = _c("EX102", VALIDATION, "INVALID_REQUEST", "not JSON (malformed, not UTF-8, NaN, duplicate keys)",
                         rpc=RPC_PARSE_ERROR)
    NO_ROUTE = _c("EX102", VALIDATION, "INVALID_REQUEST", "no such route", 404)
    WRONG_METHOD = _c("EX102", VALIDATION, "INVALID_REQUEST", "the route does not take this method", 405)
    TRANSPORT_REFUSED = _c("EX102", VALIDATION, "INVALID_REQUEST",
                           "the MCP transport refused the request (its own status: Host, Origin, Accept)")
    FLOODED = _c("EX412", POLICY, "QUERY_BUDGET_EXCEEDED", "too many requests without a valid token from an address",
                 429)
    TOO_MANY_SESSIONS = _c("EX412", POLICY, "QUERY_BUDGET_EXCEEDED", "a principal holds its most MCP sessions", 429)
    TOO_MANY_IN_FLIGHT = _c("EX412", POLICY, "QUERY_BUDGET_EXCEEDED", "a principal runs its most queries at once", 429)
    BAD_COOKIE = _c("EX502", AUTH, "AUTH_REQUIRED", "the dashboard's sign-in cookie cannot be read", 401)
    UNKNOWN_SESSION = _c("EX102", VALIDATION, "INVALID_REQUEST",
                         "no MCP session of the caller has this id (never opened, ended, or another principal's)", 404)
    HEADERS_TOO_SLOW = _c("EX102", VALIDATION, "INVALID_REQUEST",
                          "the request line and headers did not arrive within the header timeout", 408)
    TOO_MANY_CONNECTIONS = _c("EX412", POLICY, "QUERY_BUDGET_EXCEEDED",
                              "a client address holds its most HTTP connections at once", 429)

    # EX9xx: not the caller's fault
    INTERNAL_ERROR = _c("EX901", INTERNAL, "INTERNAL_ERROR", "an unexpected failure")
    CONTRACT_INVALID = _c("EX902", INTERNAL, "CONTRACT_INVALID", "the contract file is invalid")
    GUARD_VIOLATION = _c("EX903", INTERNAL, "INTERNAL_ERROR", "the guard refused compiled SQL (a policy bug)")
    DATABASE_DENIED = _c("EX904", INTERNAL, "INTERNAL_ERROR", "PostgreSQL's grants refused a read (the third wall held)")
    DATABASE_ERROR = _c("EX905", INTERNAL, "INTERNAL_ERROR", "PostgreSQL failed in an unexpected way")
    DATABASE_SETUP = _c("EX906", INTERNAL, "DATABASE_SETUP", "the database lacks what the contract needs (roles)")
    SETTING_INVALID = _c("EX907", INTERNAL, "SETTING_INVALID", "a deployment setting (ONTOOS_*) is invalid")


def all_rows() -> list[ErrorCode]:
    """Every row of the table, in order."""
    return [v for v in vars(Codes).values() if isinstance(v, ErrorCode)]


def all_codes() -> list[ErrorCode]:
    """One row per code (the first that defines it): what callers can see."""
    seen: dict[str, ErrorCode] = {}
    for row in all_rows():
        seen.setdefault(row.code, row)
    return list(seen.values())


@dataclass(frozen=True, slots=True)
class Position:
    line: int
    column: int

    def to_json(self) -> dict[str, int]:
        return {"line": self.line, "column": self.column}


class ExploreError(Exception):
    """Root of every refusal. Render with `to_envelope()`, never `str()` for callers."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        *,
        hint: str | None = None,
        position: Position | None = None,
        retry_with: dict[str, Any] | None = None,
        reason: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.error_code = code
        self.message = message
        self.hint = hint
        self.position = position
        self.retry_with = retry_with
        # The true reason for the audit (SECRET_COLUMN_DENIED, ...); never rendered.
        self.reason = reason or code.subtype
        # What reviewers need beyond the reason (e.g. the secret column reached for); never rendered.
        self.detail = detail
        self.retry_after_s: int | None = None  # a 429's wait: meta.retry_after_s (Retry-After over HTTP)
        self.exploration: Any = None  # the parsed exploration a policy refusal was about (for the audit); never rendered

    @property
    def code(self) -> str:
        return self.error_code.code

    @property
    def type(self) -> str:
        return self.error_code.type

    @property
    def subtype(self) -> str:
        return self.error_code.subtype

    def to_error(self) -> dict[str, Any]:
        err: dict[str, Any] = {
            "type": self.type,
            "subtype": self.subtype,
            "code": self.code,
            "message": self.message,
        }
        if self.hint:
            err["hint"] = self.hint
        if self.position is not None:
            err["position"] = self.position.to_json()
        if self.retry_with is not None:
            err["retry_with"] = self.retry_with
        return err

    def to_envelope(self, **meta: Any) -> dict[str, Any]:
        """The error envelope every surface shows; `meta` adds exploration_id, contract_hash."""
        if self.retry_after_s is not None:
            meta.setdefault("retry_after_s", self.retry_after_s)
        return {"ok": False, "error": self.to_error(), "meta": {k: v for k, v in meta.items() if v is not None}}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code} {self.subtype}: {self.message})"


class InputError(ExploreError):
    """Parse stage: the text, JSON or flag form could not be read."""


class BindError(ExploreError):
    """Policy stage: a name, type or shape the contract does not allow."""


class BudgetError(ExploreError):
    """Policy stage: a budget of the role or dataset is exceeded."""


class AuthError(ExploreError):
    """Who is asking: unknown role, missing scope."""


class UpstreamError(ExploreError):
    """The database is down, restarting, or out of connections."""

    def __init__(self, message: str = "the database is unavailable", *, reason: str | None = None) -> None:
        super().__init__(
            Codes.UPSTREAM_UNAVAILABLE,
            message,
            hint="this is temporary: retry in a few seconds",
            reason=reason,
        )


class ContractError(ExploreError):
    """The contract file is invalid; `message` names the place in the file."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(Codes.CONTRACT_INVALID, message, hint=hint)


class InternalError(ExploreError):
    """A bug or an unexpected failure; the message never carries internals."""

    def __init__(self, message: str = "internal error", *, reason: str | None = None,
                 code: ErrorCode = Codes.INTERNAL_ERROR) -> None:
        super().__init__(
            code,
            message,
            hint="this is not caused by your input; the failure was recorded",
            reason=reason,
        )


class GuardViolation(InternalError):
    """The guard refused SQL the compiler produced: the policy let something through.

    The caller sees only that the exploration could not be verified; the
    violations stay on the exception (and in the log) for the maintainers.
    """

    def __init__(self, violations: list[dict[str, Any]]) -> None:
        super().__init__(
            "the exploration could not be verified and was not run",
            reason="GUARD_VIOLATION",
            code=Codes.GUARD_VIOLATION,
        )
        self.violations = violations


# ---------------------------------------------------------------- the surfaces' own refusals
# Each is built here, from its row, so every surface answers it alike.


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


def too_many_connections(cap: int) -> ExploreError:
    e = ExploreError(Codes.TOO_MANY_CONNECTIONS, f"this address has {cap} connections open to the server, its most",
                     hint="retry in 1 s on one of the connections already open (keep-alive), or close the idle ones",
                     reason="CONNECTIONS")
    return _retry_after(e, 1.0)
