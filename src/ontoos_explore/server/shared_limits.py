"""Server, limits every process of a deployment holds together: rate-limit buckets and in-flight slots.

With `ONTOOS_SHARED_LIMITS=on` (which `serve --workers N` with N > 1 turns
on) a principal's rate limit and its `max_in_flight` hold across all the
processes at once, kept in the audit database (the primary: `ONTOOS_AUDIT_DSN`,
else the exploration database) with atomic statements:

- a bucket is a row of `ontoos_state.buckets` (UNLOGGED: a crash of the
  database refills every bucket, which errs on the caller's side), taken by
  one upsert that refills it for the time since it was last counted and takes
  a token if there is one, in the row's own lock: two processes taking at
  once are serialized by PostgreSQL, never both given the last token;
- an in-flight slot is a PostgreSQL advisory lock held by this process's
  state connection: slot i of principal p is the lock of a hash of (p, i); a
  call takes the first slot of its principal's `max_in_flight` that no
  session holds (one statement; the slots this process holds already are not
  asked for, since a session may take its own lock twice) and gives it back
  when it ends. A process that dies, or whose connection breaks, gives back
  its slots with its session: nothing leaks.

The same connection writes and reads the dashboard's sign-outs
(`shared_sessions.py`, through psycopg). One connection per process; statements go one at a time.
The limits' own statements are prepared when it connects and sent through `state_wire.py` (libpq
through `psycopg.pq`, without the async cursor's machinery): about 0.15 ms a call on a local socket
(`benchmarks/shared_limits_bench.py` measures them). When
the state database cannot be reached, the process keeps its own buckets and
counts (the limits are then per process for that while; logged once) and
connects again at most once a second.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import time

import psycopg

from .state_wire import Broken, Refused, Wire, text_array

log = logging.getLogger("ontoos_explore.limits")

SCHEMA = """
SELECT pg_advisory_xact_lock(7212504301);
CREATE SCHEMA IF NOT EXISTS ontoos_state;
CREATE UNLOGGED TABLE IF NOT EXISTS ontoos_state.buckets (
  key    text PRIMARY KEY,
  tokens double precision NOT NULL,
  at     timestamptz NOT NULL,
  taken  boolean NOT NULL
);
CREATE TABLE IF NOT EXISTS ontoos_state.ended_sessions (
  key   bytea PRIMARY KEY,
  until timestamptz NOT NULL,
  at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
"""
# $1 key, $2 burst, $3 tokens per second: refilled for the time since `at`, then one taken if there is one
_REFILLED = "least($2::float8, b.tokens + extract(epoch FROM now() - b.at)::float8 * $3::float8)"
TAKE = (f"INSERT INTO ontoos_state.buckets AS b (key, tokens, at, taken) VALUES ($1, $2::float8 - 1, now(), true) "
        f"ON CONFLICT (key) DO UPDATE SET tokens = CASE WHEN {_REFILLED} >= 1 THEN {_REFILLED} - 1 ELSE {_REFILLED} END, "
        f"taken = {_REFILLED} >= 1, at = now() RETURNING taken, tokens")
ACQUIRE = ("SELECT k.slot FROM unnest($1::int8[], $2::int4[]) AS k(key, slot) "
           "WHERE pg_catalog.pg_try_advisory_lock(k.key) LIMIT 1")
# a token and, only when one was taken, a slot ($4 keys, $5 slots): one round trip for a call that queries
TAKE_AND_ACQUIRE = (f"WITH t AS ({TAKE}) SELECT t.taken, t.tokens, CASE WHEN t.taken THEN "
                    "(SELECT k.slot FROM unnest($4::int8[], $5::int4[]) AS k(key, slot) "
                    "WHERE pg_catalog.pg_try_advisory_lock(k.key) LIMIT 1) END FROM t")
RELEASE = "SELECT pg_catalog.pg_advisory_unlock($1::int8)"
# prepared on each state connection, and sent through `state_wire` (a call's round trip costs half as much)
HOT = {b"ontoos_take": TAKE, b"ontoos_acquire": ACQUIRE, b"ontoos_take_and_acquire": TAKE_AND_ACQUIRE,
       b"ontoos_release": RELEASE}
RETRY_S = 1.0


def _float(v: float) -> bytes:
    return repr(float(v)).encode()


def _slot(v: bytes | None) -> int | None:
    return None if v is None else int(v)


@functools.lru_cache(maxsize=4096)
def slot_key(principal: str, slot: int) -> int:
    """The advisory lock of a principal's in-flight slot (a signed 64-bit hash)."""
    digest = hashlib.blake2b(f"ontoos:in-flight:{principal}:{slot}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class Unavailable(Exception):
    """The state database cannot be asked now: the caller uses its own process's limits."""


class SharedLimits:
    def __init__(self, dsn: str, connect_timeout_s: float = 2.0) -> None:
        self.dsn = dsn
        self.connect_timeout_s = connect_timeout_s
        self._conn: psycopg.AsyncConnection | None = None
        self._wire: Wire | None = None
        self._lock = asyncio.Lock()
        self._held: dict[tuple[str, int], int] = {}  # (principal, slot) -> the connection generation it was taken on
        self._generation = 0
        self._retry_at = 0.0
        self._down_logged = False

    async def _connection(self) -> psycopg.AsyncConnection:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        if time.monotonic() < self._retry_at:
            raise Unavailable()
        try:
            conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True, connect_timeout=self.connect_timeout_s,
                                                         cursor_factory=psycopg.AsyncRawCursor)
            try:
                async with conn.transaction():
                    await conn.execute(SCHEMA)
                wire = Wire(conn)
                await wire.prepare(HOT)
            except BaseException:
                await conn.close()
                raise
        except (psycopg.Error, OSError, Broken, Refused):
            self._retry_at = time.monotonic() + RETRY_S
            if not self._down_logged:
                log.warning("the shared limits' database cannot be reached: this process keeps its own limits "
                            "until it can")
                self._down_logged = True
            raise Unavailable() from None
        if self._down_logged:
            log.warning("the shared limits' database answers again: the limits are the deployment's")
            self._down_logged = False
        self._conn, self._wire = conn, wire
        self._generation += 1
        self._held.clear()  # slots of a connection that broke were given back with its session
        return conn

    async def ask(self, sql: str, params: list) -> list[tuple]:
        async with self._lock:
            conn = await self._connection()
            try:
                cur = await conn.execute(sql, params, prepare=True)
                return await cur.fetchall()
            except psycopg.Error:  # the connection, or the state table (a grant, an older schema): our own limits
                log.warning("the shared limits' database refused a statement: this process keeps its own limits "
                            "for now", exc_info=log.isEnabledFor(logging.DEBUG))
                await self._drop()
                raise Unavailable() from None

    async def call(self, name: bytes, params: list[bytes | None], abandoned=None) -> list[tuple[bytes | None, ...]]:
        """A statement of `HOT` through the wire: its rows, as text (`abandoned`: `Wire.ask`'s)."""
        async with self._lock:
            await self._connection()
            try:
                return await self._wire.ask(name, params, abandoned)
            except (Broken, Refused) as e:
                log.warning("the shared limits' database refused a statement (%s): this process keeps its own "
                            "limits for now", "the connection is gone" if isinstance(e, Broken) else
                            f"SQLSTATE {e.sqlstate}")
                await self._drop()
                raise Unavailable() from None

    async def _drop(self) -> None:
        self._wire = None
        conn, self._conn = self._conn, None
        self._held.clear()
        self._retry_at = time.monotonic() + RETRY_S
        if conn is not None:
            try:
                await conn.close()
            except psycopg.Error:
                pass

    async def take(self, key: str, burst: int, per_second: float) -> float:
        """One token of `key`'s bucket: 0.0 to go ahead, else the seconds until there is one.
        Unavailable when the database cannot be asked."""
        return (await self.take_counted(key, burst, per_second))[0]

    async def take_counted(self, key: str, burst: int, per_second: float) -> tuple[float, float]:
        """`take`, and the tokens the bucket holds after it: (the wait, the tokens left)."""
        ((taken, tokens),) = await self.call(b"ontoos_take", [key.encode(), _float(burst), _float(per_second)])
        tokens = float(tokens)
        return (0.0 if taken == b"t" else (1.0 - tokens) / per_second), tokens

    def _free(self, principal: str, cap: int) -> list[int]:
        """The principal's slots this process does not hold (a session would take its own lock again)."""
        return [i for i in range(cap) if (principal, i) not in self._held]

    def _taken(self, principal: str, slot: int | None) -> tuple[int, int] | None:
        if slot is None:
            return None
        self._held[(principal, slot)] = self._generation
        return slot, self._generation

    def _abandoned(self, principal: str, column: int):
        """What gives back the slot a statement took for a caller cancelled meanwhile (its rows come in
        the background: the slot is recorded, then released, never left held)."""
        def give_back(rows: list[tuple[bytes | None, ...]]) -> None:
            taken = self._taken(principal, _slot(rows[0][column]) if rows else None)
            if taken is not None:
                asyncio.ensure_future(self.release(principal, taken))
        return give_back

    async def acquire(self, principal: str, cap: int) -> tuple[int, int] | None:
        """One of the principal's `cap` in-flight slots, as (slot, generation) to give back, or None when
        all are held (by any process). Unavailable when the database cannot be asked."""
        free = self._free(principal, cap)
        if not free:
            return None
        rows = await self.call(b"ontoos_acquire", [text_array([slot_key(principal, i) for i in free]),
                                                   text_array(free)], self._abandoned(principal, 0))
        return self._taken(principal, _slot(rows[0][0]) if rows else None)

    async def take_and_acquire(self, key: str, burst: int, per_second: float, principal: str,
                               cap: int) -> tuple[float, tuple[int, int] | None, float]:
        """`take`, and `acquire` when the token was taken, in one statement: (the wait, the slot or None,
        the tokens left)."""
        free = self._free(principal, cap)
        if not free:  # every slot is this process's own: the token alone
            wait, tokens = await self.take_counted(key, burst, per_second)
            return wait, None, tokens
        ((taken, tokens, slot),) = await self.call(
            b"ontoos_take_and_acquire", [key.encode(), _float(burst), _float(per_second),
                                         text_array([slot_key(principal, i) for i in free]), text_array(free)],
            self._abandoned(principal, 2))
        tokens = float(tokens)
        return (0.0 if taken == b"t" else (1.0 - tokens) / per_second), self._taken(principal, _slot(slot)), tokens

    async def release(self, principal: str, taken: tuple[int, int]) -> None:
        """Give a slot back (a slot of a connection since broken was given back with it). This process holds
        it until the database has it back, so no call of its own asks for it meanwhile."""
        slot, generation = taken
        if self._held.get((principal, slot)) != generation:
            return
        try:
            await self.call(b"ontoos_release", [str(slot_key(principal, slot)).encode()])
        except Unavailable:
            pass
        if self._held.get((principal, slot)) == generation:
            del self._held[(principal, slot)]

    async def close(self) -> None:
        async with self._lock:
            await self._drop()
