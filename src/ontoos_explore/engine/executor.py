"""Engine, execution: CompiledQuery -> Outcome, on PostgreSQL through psycopg 3.

Each exploration runs in its own READ ONLY transaction whose budgets
(statement, lock and idle timeouts) and database role are set with one
`set_config(..., true)` statement, sent with BEGIN, the query and ROLLBACK in
one pipeline: a single round trip (two when the cost is checked first).
The query text is exactly the guarded text, sent with the extended protocol
(in pipeline mode psycopg always uses it, parameters or not), so no second
statement can ride along. Results come in text format: PostgreSQL writes
dates, timestamps and numerics in C, and `rows.json_rows` mostly passes its
text through (see there).

When the plan has evidence to read (the publish log's sources of the
datasets read), the transaction is REPEATABLE READ and the current batch of
each source is read after the query, in the same pipeline: the rows and the
batches they came from are one snapshot, at no extra round trip.

Where a cost ceiling applies, the planner's estimate for these values
(`EXPLAIN`, no `ANALYZE`) is asked for first, in the same pipeline; the
answer is kept per (role, SQL text, values) for `cost_cache_s`, so an
exploration asked again is checked without a second round trip. (A generic
plan's estimate would be the same for every value, but it misjudges the
selectivity of constants such as always-filters: a query the values' own
plan puts at 157,000 came out at 64,000, under a 100,000 ceiling.)

PostgreSQL's error texts never reach the caller (they can carry data
values): SQLSTATEs are translated into envelopes in `translate.py`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import errors as pgerr
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..compiler import CompiledQuery
from ..evidence import Batch
from . import wire
from .publish_log import batches, current_batches_sql, may_read_log
from .translate import connection_lost, cost_budget, time_budget, translate, translate_plain
from .rows import json_rows
from .settings import Settings

log = logging.getLogger("ontoos_explore.engine")

# Static statements. The variable SQL is the guarded exploration text, and the publish-log statement
# of its evidence (engine/publish_log.py: a sqlglot tree of the contract's names, never a caller's text).
BEGIN = "BEGIN READ ONLY"
BEGIN_SNAPSHOT = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"  # the rows and their evidence, one snapshot
END = "ROLLBACK"
PING = "SELECT pg_catalog.current_setting('server_version'), pg_catalog.pg_is_in_recovery()"
BUDGET = ("SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true), "
          "set_config('idle_in_transaction_session_timeout', $3, true)")
BUDGET_AND_ROLE = BUDGET + ", set_config('role', $4, true)"
EXPLAIN = "EXPLAIN (FORMAT JSON) "  # prefixed to the guarded text, byte for byte
# How far a hot standby's data is behind its primary, in seconds: none when it has replayed all it received
# (an idle primary sends nothing, and a standby caught up is not behind however long ago the last commit was)
REPLAY_LAG = ("SELECT CASE WHEN NOT pg_catalog.pg_is_in_recovery() THEN NULL "
              "WHEN pg_catalog.pg_last_wal_receive_lsn() = pg_catalog.pg_last_wal_replay_lsn() THEN 0 "
              "ELSE extract(epoch FROM now() - pg_catalog.pg_last_xact_replay_timestamp())::float8 END")
LOG_CHECK_S = 60.0  # how long a role's answer is kept (grants applied meanwhile are seen within this)
LOST_RETRIES = 2  # an exploration whose connection was lost is asked again this many times at most

CLIENT_MARGIN_S = 2.0  # past the statement timeout, the client gives up and cancels


@dataclass(frozen=True, slots=True)
class Outcome:
    rows: list[list[Any]]
    truncated: bool
    masked_columns: list[str]
    elapsed_ms: float
    cost: float | None = None  # the planner's estimate of the work (`work`), when it was asked: for the audit
    batches: list[Batch] | None = None  # the current batch of each source of the plan's evidence (None: not read)
    consistent: bool = False  # the batches were read in the rows' own snapshot
    replay_lag_s: float | None = None  # read on a hot standby: how far behind its primary (None: on a primary)


class CostCache:
    """Planner estimates per (role, SQL text, values), each kept for `ttl` seconds; bounded."""

    def __init__(self, ttl: float, size: int = 4096) -> None:
        self.ttl, self.size = ttl, size
        self._entries: dict[tuple, tuple[float, float]] = {}  # key -> (expires, cost)
        self.hits = self.misses = 0  # since start (/metrics)

    @staticmethod
    def key(q: CompiledQuery) -> tuple:
        return (q.plan.role, q.sql, tuple(map(type, q.params)), tuple(q.params))  # typed: True is not 1

    def get(self, key: tuple) -> float | None:
        found = self._entries.get(key)
        if found is None or found[0] < time.monotonic():
            self.misses += 1
            return None
        self.hits += 1
        return found[1]

    def put(self, key: tuple, cost: float) -> None:
        if self.ttl <= 0:
            return
        while len(self._entries) >= self.size:
            self._entries.pop(next(iter(self._entries)), None)
        self._entries[key] = (time.monotonic() + self.ttl, cost)


class Executor:
    """Runs compiled queries as their `Plan` says; knows the database, never the contract."""

    def __init__(self, pool: AsyncConnectionPool, settings: Settings) -> None:
        self.pool = pool
        self.settings = settings
        self.costs = CostCache(settings.cost_cache_s)
        self._log_readable: dict[tuple[str | None, str, str], tuple[float, bool]] = {}  # -> (checked at, may read)

    def db_role(self, role_name: str) -> str:
        return f"{self.settings.role_prefix}{role_name}"

    async def _may_read_log(self, conn, db_role: str | None, spec) -> bool:
        """Whether `db_role` may read the publish log, asked at most every LOG_CHECK_S per role (one round
        trip then); a role that may not is logged once a check, and its answers' evidence is unknown."""
        key = (db_role, spec.schema, spec.table)
        known = self._log_readable.get(key)
        if known is not None and time.monotonic() - known[0] < LOG_CHECK_S:
            return known[1]
        may = await may_read_log(conn, db_role, spec)
        self._log_readable[key] = (time.monotonic(), may)
        if not may:
            log.warning("%s cannot read the publish log %s.%s (missing, or not granted: run ontoos grants); "
                        "answers say their freshness is unknown", db_role or "the connecting user", spec.schema,
                        spec.table)
        return may

    async def ping(self, timeout_s: float = 2.0) -> dict[str, Any]:
        """Whether the database answers now: {"reachable", "version", "standby"} (a static statement)."""
        try:
            async with asyncio.timeout(timeout_s):
                async with self.pool.connection(timeout=timeout_s) as conn:
                    cur = await conn.execute(PING)
                    version, standby = await cur.fetchone()
        except (psycopg.Error, PoolTimeout, TimeoutError, OSError):
            return {"reachable": False}
        return {"reachable": True, "version": version, "standby": bool(standby)}

    async def read_batches(self, spec, role: str) -> list[Batch] | None:
        """The current batch of each of `spec`'s sources, read as `role`'s database role in a READ ONLY
        transaction of its own (no rows with them: `ontoos stats`); None when the role may not read the log."""
        if spec is None or not spec.sources:
            return None
        db_role = self.db_role(role) if self.settings.query_roles else None
        try:
            async with self.pool.connection(timeout=self.settings.pool_timeout_s) as conn:
                if not await self._may_read_log(conn, db_role, spec):
                    return None
                control, evidence = conn.cursor(), conn.cursor()
                async with conn.pipeline():
                    await control.execute(BEGIN)
                    budget = ["5000", "2000", "10000"]  # a few index lookups: 5 s is far past any
                    if db_role is None:
                        await control.execute(BUDGET, budget)
                    else:
                        await control.execute(BUDGET_AND_ROLE, [*budget, db_role])
                    await evidence.execute(current_batches_sql(spec.schema, spec.table, spec.sources), [])
                    await control.execute(END)
                    return batches(await evidence.fetchall())
        except (psycopg.Error, PoolTimeout) as e:
            raise translate_plain(e) from None

    async def run(self, q: CompiledQuery, *, dry_run: bool = False, lost: int = 0) -> Outcome:
        """Run (or, with dry_run, only plan) one compiled exploration. A connection that turns out lost
        (its server restarted, a standby gone, the backend terminated) is no answer: the exploration,
        a read, is asked again on another connection, which a multi-host DSN may find on another host,
        up to LOST_RETRIES times (a connection made as a standby began to stop is lost too)."""
        started = time.perf_counter()
        timeout_s = q.plan.timeout_ms / 1000 + CLIENT_MARGIN_S
        ceiling = None if dry_run else q.plan.max_cost
        known = None if ceiling is None else self.costs.get(CostCache.key(q))
        if known is not None and known > ceiling:
            raise cost_budget(q, known, ceiling)  # this exploration's estimate is known: refused without a round trip
        conn = None
        try:
            # getconn/putconn, not `pool.connection()`: that also enters the connection's own context, whose
            # exit takes its lock to commit an idle connection (each transaction here ends in ROLLBACK), and
            # tries a rollback on a busy one after a cancel; the pool puts right or drops what comes back unidle
            conn = await self.pool.getconn(timeout=self.settings.pool_timeout_s)
            try:
                async with asyncio.timeout(timeout_s):  # cheaper than wait_for: no extra task
                    return await self._transaction(conn, q, dry_run, started, ceiling, known)
            except (asyncio.CancelledError, TimeoutError):
                await asyncio.shield(_cancel(conn))
                raise
            except psycopg.Error:
                await _rollback(conn)
                raise
            finally:
                await self.pool.putconn(conn)
        except TimeoutError:  # the client's deadline: PostgreSQL did not answer STATEMENT_TIMEOUT in time
            raise time_budget(q, "CLIENT_DEADLINE") from None
        except (psycopg.Error, PoolTimeout) as e:
            if self._log_lost(q, e):  # the publish log went (or its grant) since it was checked: once more, without
                return await self.run(q, dry_run=dry_run, lost=lost)
            if connection_lost(e, conn):  # a read: asked again on another connection (host)
                if lost < LOST_RETRIES:
                    log.info("a pooled connection was lost (%s): the exploration is asked again on another",
                             type(e).__name__)
                    await self._drop_lost()
                    return await self.run(q, dry_run=dry_run, lost=lost + 1)
                log.warning("connections were lost %d times in a row (%s): the exploration is answered unavailable",
                            lost + 1, type(e).__name__)
            raise translate(e, q) from None

    async def _drop_lost(self) -> None:
        """The pool's idle connections checked, the dead ones replaced: when a server goes (a standby
        stopped), every connection to it is dead, and the retry must not be handed another of them."""
        try:
            await self.pool.check()
        except Exception:  # the check is a courtesy to the retry: it never fails the request itself
            log.debug("pool check after a lost connection failed", exc_info=True)

    def _log_lost(self, q: CompiledQuery, e: BaseException) -> bool:
        """Whether `e` may be the publish log's read failing (its table or grant gone since the last check,
        which said it could be read): then the log is taken as unreadable, and the answer is asked again
        without it. Were it the query's own failure, that answer fails as this one would have."""
        spec = q.plan.evidence
        if spec is None or not isinstance(e, (pgerr.InsufficientPrivilege, pgerr.UndefinedTable, pgerr.UndefinedColumn)):
            return False
        key = (self._query_role(q), spec.schema, spec.table)
        if not self._log_readable.get(key, (0.0, False))[1]:
            return False
        self._log_readable[key] = (time.monotonic(), False)
        log.warning("the publish log %s.%s could not be read (dropped, or its grant revoked); answers say their "
                    "freshness is unknown", spec.schema, spec.table)
        return True

    def _query_role(self, q: CompiledQuery) -> str | None:
        return self.db_role(q.plan.role) if self.settings.query_roles else None

    async def _transaction(self, conn, q: CompiledQuery, dry_run: bool, started: float,
                           ceiling: float | None, estimate) -> Outcome:
        t = q.plan.timeout_ms
        budget = [str(t), str(max(1, min(t // 2, 2000))), str(t * 2)]
        sql_budget = BUDGET
        if self.settings.query_roles:
            budget.append(self.db_role(q.plan.role))
            sql_budget = BUDGET_AND_ROLE
        params = list(q.params)
        spec = q.plan.evidence
        reads_log = spec is not None and bool(spec.sources)
        if reads_log:
            reads_log = await self._may_read_log(conn, self._query_role(q), spec)
        # on a hot standby (PostgreSQL reports it at connect and on promotion) the evidence says how far behind
        behind = reads_log and conn.pgconn.parameter_status(b"in_hot_standby") == b"on"
        if estimate is not None or (ceiling is None and not dry_run):  # nothing to plan first: one libpq pipeline
            if ceiling is not None and estimate > ceiling:
                raise cost_budget(q, estimate, ceiling)
            sent = [(BEGIN_SNAPSHOT if reads_log else BEGIN, ()), (sql_budget, budget), (q.sql, params)]
            if reads_log:
                sent.append((current_batches_sql(spec.schema, spec.table, spec.sources), ()))
            if behind:
                sent.append((REPLAY_LAG, ()))
            results = await wire.pipeline(conn, [*sent, (END, ())])
            found = batches(wire.rows(conn, results[3])) if reads_log else None
            lagged = wire.rows(conn, results[4])[0][0] if behind else None
            return self._outcome(q, wire.rows(conn, results[2]), [results[2].ftype(i) for i in range(results[2].nfields)],
                                 started, estimate, found, lagged)
        evidence = conn.cursor() if reads_log else None
        lag = conn.cursor() if behind else None
        control, query = conn.cursor(), conn.cursor()
        async with conn.pipeline():
            await control.execute(BEGIN if evidence is None else BEGIN_SNAPSHOT)
            await control.execute(sql_budget, budget)
            if estimate is None and (ceiling is not None or dry_run):  # these values' own plan
                await query.execute(EXPLAIN + q.sql, params)
                plan = json.loads((await query.fetchone())[0])[0]["Plan"]
                estimate = work(plan)
                if dry_run:  # the plan, and the batches it would read
                    if evidence is not None:
                        await evidence.execute(current_batches_sql(spec.schema, spec.table, spec.sources), [])
                    await control.execute(END)
                    found = None if evidence is None else batches(await evidence.fetchall())
                    return Outcome([], False, [], _ms(started), estimate, batches=found)  # no rows: not consistent
                self.costs.put(CostCache.key(q), estimate)
            if ceiling is not None and estimate > ceiling:
                await control.execute(END)
                raise cost_budget(q, estimate, ceiling)
            await query.execute(q.sql, params)
            if evidence is not None:  # after the query, in its snapshot: the batches its rows came from
                await evidence.execute(current_batches_sql(spec.schema, spec.table, spec.sources), [])
            if lag is not None:
                await lag.execute(REPLAY_LAG)
            await control.execute(END)
            rows = await query.fetchall()
            oids = [c.type_code for c in query.description]
            found = None if evidence is None else batches(await evidence.fetchall())
            lagged = None if lag is None else (await lag.fetchone())[0]
        return self._outcome(q, rows, oids, started, estimate, found, lagged)

    @staticmethod
    def _outcome(q: CompiledQuery, rows: list, oids: list[int], started: float, estimate, found, lagged) -> Outcome:
        masked = q.plan.masked
        return Outcome(
            rows=json_rows(rows[: q.limit], oids, masked),
            truncated=len(rows) > q.limit,
            masked_columns=[q.columns[i] for i in sorted(masked)],
            elapsed_ms=_ms(started),
            cost=estimate,
            batches=found,
            consistent=found is not None,
            replay_lag_s=None if lagged is None else round(float(lagged), 3),
        )


def work(plan: dict) -> float:
    """The work a plan can do: the largest total cost of any of its nodes. A Limit's own cost is
    pro-rated by the rows it expects to need (`limit 1` over a join whose filter never matches is
    estimated at ~100 while it would enumerate the whole join), so the nodes beneath it count."""
    most, stack = 0.0, [plan]
    while stack:
        node = stack.pop()
        most = max(most, float(node.get("Total Cost", 0.0)))
        stack.extend(node.get("Plans", ()))
    return most


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


async def _cancel(conn) -> None:
    """Cancel the running statement on the server; the pool then drops the connection."""
    try:
        await conn.cancel_safe(timeout=2.0)
    except Exception:  # the connection may be gone already; the pool discards it either way
        log.debug("cancel failed", exc_info=True)


async def _rollback(conn) -> None:
    try:
        if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            await conn.rollback()
    except psycopg.Error:
        log.debug("rollback after a failed exploration failed", exc_info=True)
