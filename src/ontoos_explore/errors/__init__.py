"""Errors, every stage: one hierarchy, one table of refusals, one envelope.

Each refusal is an `ExploreError` carrying a row of `Codes` (code, type,
subtype, and how every surface answers it: the HTTP status, the JSON-RPC
code when a transport refuses a message itself, the CLI's exit code), a
message and an actionable hint. `to_envelope()` is the only place the
caller-visible shape is built. Surfaces translate a row into their wire
format (`row.status`, `row.rpc`, `row.exit`) and decide nothing else: a new
refusal is one row here, and every surface answers it. The table is `codes.py`; the surfaces' own refusals,
built from it, are `refusals.py`; the hierarchy and the envelope are here.

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

from dataclasses import dataclass
from typing import Any

from .codes import (  # noqa: F401 (the table, re-exported: `from ontoos_explore.errors import Codes`)
    VALIDATION,
    AUTH,
    POLICY,
    NETWORK,
    INTERNAL,
    STATUS,
    CLIENT_CLOSED,
    RPC_PARSE_ERROR,
    RPC_INVALID_REQUEST,
    RPC_SERVER_ERROR,
    REJECTED_TYPES,
    ErrorCode,
    Codes,
    all_rows,
    all_codes,
)


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
        self.retry_after_s: int | None = None  # a 429's or 503's wait: meta.retry_after_s (Retry-After over HTTP)
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

    RETRY_AFTER_S = 2  # what a caller is told to wait (meta.retry_after_s; Retry-After over HTTP)

    def __init__(self, message: str = "the database is unavailable", *, reason: str | None = None) -> None:
        super().__init__(
            Codes.UPSTREAM_UNAVAILABLE,
            message,
            hint=f"this is temporary: retry in {self.RETRY_AFTER_S} s (meta.retry_after_s; Retry-After over HTTP)",
            reason=reason,
        )
        self.retry_after_s = self.RETRY_AFTER_S


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


from .refusals import (  # noqa: E402,F401 (built on the classes above)
    no_token,
    bad_cookie,
    body_too_large,
    body_too_slow,
    not_json,
    rate_limited,
    flooded,
    too_many_sessions,
    too_many_in_flight,
    cancelled,
    not_a_route,
    not_acceptable,
    self_approval,
    csrf_refused,
    transport_refused,
    unknown_session,
    headers_too_slow,
    head_too_large,
    unknown_method,
    shutting_down,
    too_many_connections,
)
