"""Engine, translation: a psycopg or pool failure -> the refusal every surface shows. Never the server's text.

PostgreSQL's error texts can carry data values, so they are read here (to
tell a statement timeout from a cancel) and never relayed: each SQLSTATE
class becomes a row of the error table, its true reason kept for the audit.
"""

from __future__ import annotations

import logging

import psycopg
from psycopg import errors as pgerr
from psycopg_pool import PoolTimeout

from ..compiler import CompiledQuery
from ..errors import Codes, ExploreError, InternalError, UpstreamError
from ..names import quote_list

log = logging.getLogger("ontoos_explore.engine")


def time_budget(q: CompiledQuery, reason: str = "STATEMENT_TIMEOUT") -> ExploreError:
    """The answer for every way a time budget runs out; `reason` (for the audit) says which."""
    return ExploreError(
        Codes.TIME_BUDGET,
        f"the exploration ran longer than its time budget of {q.plan.timeout_ms} ms",
        hint="add a filter, follow fewer relations, or lower the limit "
        f"(role {q.plan.role} may run {q.plan.timeout_ms} ms)",
        reason=reason,
    )


def cost_budget(q: CompiledQuery, cost: float, ceiling: float) -> ExploreError:
    """Over the cost budget. The planner's figure is for the audit (`detail`), never the caller: it
    depends on rows the caller may not see (always-filtered ones), so it would be an oracle on them."""
    dataset = q.datasets[0]
    useful = q.plan.hint_columns(dataset)
    return ExploreError(
        Codes.COST_BUDGET,
        f"the exploration would cost more than the budget of {ceiling:,.0f} for role {q.plan.role}",
        hint=f"filter {dataset}" + (f" (e.g. on {quote_list(useful)})" if useful else "")
        + ", follow fewer relations, or lower the limit",
        reason="COST_BUDGET",
        detail={"cost": cost},
    )


def translate_plain(e: BaseException) -> ExploreError:
    """A failure of the service's own statement (not a caller's query): unavailable, or internal."""
    state = getattr(e, "sqlstate", None) or ""
    if isinstance(e, (PoolTimeout, psycopg.OperationalError)) or state[:2] in ("08", "53", "57"):
        return UpstreamError(reason=f"SQLSTATE_{state or 'NONE'}")
    return InternalError("the publish log could not be read", reason=f"SQLSTATE_{state}", code=Codes.DATABASE_ERROR)


def translate(e: BaseException, q: CompiledQuery) -> ExploreError:
    """A psycopg or pool failure -> an envelope error. Never the server's text."""
    if isinstance(e, PoolTimeout):
        return UpstreamError("no database connection is available", reason="POOL_TIMEOUT")
    state = getattr(e, "sqlstate", None) or ""
    if isinstance(e, pgerr.LockNotAvailable):
        return time_budget(q, "LOCK_TIMEOUT")
    if isinstance(e, pgerr.QueryCanceled):  # the server's words are read here, never relayed
        timeout = "statement timeout" in (getattr(e.diag, "message_primary", None) or "")
        return time_budget(q, "STATEMENT_TIMEOUT" if timeout else "CANCELLED_ON_SERVER")
    if isinstance(e, pgerr.InsufficientPrivilege):
        log.error("the database refused a read for %s (%s): the third wall held", q.fingerprint, q.shape)
        return InternalError("the exploration could not be run", reason="DATABASE_DENIED", code=Codes.DATABASE_DENIED)
    if state.startswith("22"):
        return ExploreError(
            Codes.VALUE_REJECTED,
            "PostgreSQL could not use one of the values",
            hint="check the literals against the column types (ontoos catalog DATASET)",
            reason=f"SQLSTATE_{state}",
        )
    if isinstance(e, psycopg.OperationalError) or state[:2] in ("08", "53", "57"):
        log.warning("the database could not answer %s: %s SQLSTATE %s", q.fingerprint, type(e).__name__,
                    state or "none")
        return UpstreamError(reason=f"SQLSTATE_{state or 'NONE'}")
    log.error("unexpected database failure for %s: %s SQLSTATE %s", q.fingerprint, type(e).__name__, state)
    return InternalError("the exploration failed in the database", reason=f"SQLSTATE_{state}", code=Codes.DATABASE_ERROR)


# SQLSTATEs of a connection that went, not of the statement: class 08 (connection exception), and the
# server shutting down or crashing (57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now)
LOST = ("57P01", "57P02", "57P03")


def connection_lost(e: BaseException, conn) -> bool:
    """Whether `e` says the connection was lost (so another may answer), not that the statement failed."""
    if not isinstance(e, psycopg.OperationalError) or isinstance(e, PoolTimeout):  # (no connection came: no retry)
        return False
    state = getattr(e, "sqlstate", None) or ""
    if state == "57014":  # query_canceled: the statement timeout, the caller's own budget
        return False
    # no SQLSTATE: the client's own failure (the socket closed under a pipeline, which may end in
    # PipelineAborted before the connection is marked broken), never a statement the server refused
    return not state or state.startswith("08") or state in LOST or (conn is not None and conn.broken)
