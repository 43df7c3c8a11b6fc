"""Errors, the table: one row per refusal (code, type, subtype, and how every surface answers it)."""

from __future__ import annotations

from dataclasses import dataclass

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
    EX4xx budgets, EX5xx auth, EX6xx upstream, EX7xx the lake (evidence, drift), EX9xx internal."""

    # EX1xx: the input could not be read
    SYNTAX_ERROR = _c("EX101", VALIDATION, "SYNTAX_ERROR", "the text form does not parse")
    INVALID_REQUEST = _c("EX102", VALIDATION, "INVALID_REQUEST", "the JSON or flag form is malformed")
    INVALID_NAME = _c("EX103", VALIDATION, "SYNTAX_ERROR", "a name is not an identifier")
    UNKNOWN_TOOL = _c("EX104", VALIDATION, "CAPABILITY_NOT_FOUND", "no such tool (or not one the role may call)")

    # EX2xx: a name does not resolve (or is not readable: same answer)
    UNKNOWN_FIELD = _c("EX201", VALIDATION, "UNKNOWN_FIELD", "not a readable column")
    UNKNOWN_DATASET = _c("EX202", VALIDATION, "UNKNOWN_DATASET", "not a readable dataset")
    UNKNOWN_RELATION = _c("EX203", VALIDATION, "UNKNOWN_RELATION", "not a relation from the datasets in scope")
    RELATION_NOT_FOLLOWED = _c("EX204", VALIDATION, "UNKNOWN_RELATION", "a column names a relation not followed")
    DUPLICATE_RELATION = _c("EX205", VALIDATION, "UNSUPPORTED_QUERY", "a relation is followed twice")
    UNKNOWN_QUERY = _c("EX208", VALIDATION, "CAPABILITY_NOT_FOUND", "not a named query the role may run")
    UNKNOWN_READ_SET = _c("EX207", VALIDATION, "UNKNOWN_READ_SET", "not a read set of the contract")
    UNKNOWN_NAME = _c("EX209", VALIDATION, "UNKNOWN_NAME",
                      "not a dataset, column, enum value or relation the role may read (a catalog lookup)")
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
    METRICS_DENIED = _c("EX503", AUTH, "AUTH_SCOPE_DENIED",
                        "/metrics is for operators: loopback, or a principal marked metrics")
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
    SHUTTING_DOWN = _c("EX603", NETWORK, "SHUTTING_DOWN", "the server process is stopping: it finishes what it "
                       "runs and takes nothing new (retry: another process answers)")

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
    NOT_FOUND = _c("EX102", VALIDATION, "INVALID_REQUEST", "a dashboard page names an event, column, fingerprint "
                   "or request there is none of", 404)
    WRONG_METHOD = _c("EX102", VALIDATION, "INVALID_REQUEST", "the route does not take this method", 405)
    NOT_ACCEPTABLE = _c("EX102", VALIDATION, "INVALID_REQUEST", "the Accept header (or format=) names no media type "
                        "the route gives", 406)
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
    HEAD_TOO_LARGE = _c("EX408", POLICY, "QUERY_BUDGET_EXCEEDED", "the request line and headers are over the size limit",
                        431)
    TOO_MANY_CONNECTIONS = _c("EX412", POLICY, "QUERY_BUDGET_EXCEEDED",
                              "a client address holds its most HTTP connections at once", 429)

    # EX7xx: the lake as it is: the caller's requirement on the evidence, what drift made unavailable
    CONSISTENCY_UNVERIFIED = _c("EX701", POLICY, "CONSISTENCY_UNVERIFIED",
                                "the evidence cannot show the freshness or consistency the caller required", 412)
    DEGRADED = _c("EX702", POLICY, "DEGRADED",
                  "the database no longer has a dataset, column or relation as the contract describes it (drift)", 503)
    RESULT_EXPIRED = _c("EX703", POLICY, "RESULT_EXPIRED",
                        "a cursor that is not this caller's, of another contract, altered, too old, or of data "
                        "republished since its first page", 410)

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
