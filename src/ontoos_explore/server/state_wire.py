"""Server, the shared limits' statements straight over libpq: prepared once, each call one send and one wait.

A shared rate limit asks the state database on every call, so the cost of
one round trip is the cost of the limit. Through psycopg's async cursor that
round trip costs the client about 130 µs of Python before the statement does
anything (the cursor, its generators, a reader and a future per wait); sent
with `psycopg.pq` (psycopg's documented libpq wrapper) on the same connection
it costs about 60 (`benchmarks/shared_limits_bench.py`). `Wire` does only
that: statements prepared by name when the connection is made, parameters
and results as text, one statement at a time (its caller holds a lock). A
caller cancelled halfway leaves its statement's results to be read in the
background, before the next statement is sent, so the connection (and the
advisory locks its session holds) stays; a failure leaves it to be dropped:
`Broken` (a statement the server refused: `Refused`, the connection still
good). psycopg's own `execute` may still be used on the connection between
two calls (nothing is left pending).
"""

from __future__ import annotations

import asyncio

import psycopg
from psycopg import pq

from ..engine.wire import answered, sent

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)


class Broken(Exception):
    """The connection cannot be used again (gone, or left halfway through a statement)."""


class Refused(Exception):
    """The server refused the statement (its SQLSTATE); the connection is still good."""

    def __init__(self, sqlstate: str | None) -> None:
        super().__init__(sqlstate or "no SQLSTATE")
        self.sqlstate = sqlstate


def text_array(values: list[int]) -> bytes:
    """Integers as a PostgreSQL array literal, in text."""
    return b"{" + b",".join(str(int(v)).encode() for v in values) + b"}"


class Wire:
    def __init__(self, conn: psycopg.AsyncConnection) -> None:
        self.pg = conn.pgconn
        self.broken = False
        self._draining: asyncio.Future | None = None  # the results of a statement whose caller was cancelled

    async def prepare(self, statements: dict[bytes, str]) -> None:
        for name, sql in statements.items():
            await self._run(lambda: self.pg.send_prepare(name, sql.encode()))

    async def ask(self, name: bytes, params: list[bytes | None], abandoned=None) -> list[tuple[bytes | None, ...]]:
        """The rows of the prepared statement `name` (values as text bytes, None for NULL). `abandoned(rows)`:
        called with them if the caller was cancelled after sending it (what it took is then given back)."""
        return _rows(await self._run(lambda: self.pg.send_query_prepared(name, params), abandoned))

    async def _run(self, send, abandoned=None) -> pq.PGresult:
        if self._draining is not None:  # a statement cancelled before: its results first
            await asyncio.shield(self._draining)
        if self.broken:
            raise Broken()
        try:
            send()
            last = await self._finish()
        except asyncio.CancelledError:  # sent: read what it answers in the background, the connection stays good
            self._draining = asyncio.ensure_future(self._drain(abandoned))
            raise
        except psycopg.Error as e:
            self.broken = True
            raise Broken() from e
        if last is None or self.pg.status != pq.ConnStatus.OK:
            self.broken = True
            raise Broken()
        if last.status not in _OK:
            state = last.error_field(pq.DiagnosticField.SQLSTATE)
            raise Refused(state.decode() if state else None)
        return last

    async def _finish(self) -> pq.PGresult | None:
        """The rest of the statement sent: flush it, then read every result; the last one."""
        await sent(self.pg)
        last = None
        while True:
            await answered(self.pg)
            result = self.pg.get_result()
            if result is None:
                return last
            last = result

    async def _drain(self, abandoned) -> None:
        try:
            last = await self._finish()
        except BaseException:  # noqa: BLE001 - gone, or cancelled again: the connection is not to be used
            self.broken = True
            return
        finally:
            self._draining = None
        if abandoned is not None and last is not None and last.status in _OK:
            abandoned(_rows(last))


def _rows(result: pq.PGresult) -> list[tuple[bytes | None, ...]]:
    return [tuple(result.get_value(r, c) for c in range(result.nfields)) for r in range(result.ntuples)]
