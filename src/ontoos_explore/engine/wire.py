"""Engine, one transaction's statements in one libpq pipeline through psycopg.pq, without cursors.

psycopg's async pipeline costs this process about 480 µs of CPU for an exploration's five
statements (BEGIN, the budgets, the query, the publish log, ROLLBACK), a cursor each; the same
statements sent through `psycopg.pq` (psycopg's documented libpq wrapper) and read with psycopg's
own loaders (`psycopg.adapt.Transformer`: the types `rows` takes as text, as the pool configures
them) cost about 145 (`benchmarks/pipeline_bench.py`). `pipeline(conn, statements)` does only that:

- each statement is prepared once per connection (Parse in the same pipeline, the first time), by a
  name of its own (`ontoos_<n>`, never reused on a connection); the last `MOST` are kept, an older
  one is closed (libpq's close-prepared message) in the connection's next pipeline;
- the parameters go as psycopg's dumpers make them (its types and formats), the results come as text;
- every statement's result is read, in order, to the pipeline's sync. A statement the server refused
  raises psycopg's own error for it (`psycopg.errors.error_from_result`) once the pipeline is read:
  the connection is usable, its transaction possibly failed (the caller rolls back, as after a cursor).
  Anything else (cancelled, the connection lost) leaves the connection busy with its results unread:
  the pool drops a connection it gets back busy.

The SQL sent is the caller's text, byte for byte. `sent` and `answered` are the two waits of any
connection driven this way on the event loop (the shared limits' `server.state_wire` too).
"""

from __future__ import annotations

import asyncio
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from psycopg import OperationalError, errors, pq
from psycopg.adapt import PyFormat, Transformer

MOST = 64  # prepared statements kept per connection (psycopg's own keeps 100)
_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)


class Prepared:
    """The statements prepared on one connection: (text, parameter types) -> name, least recently used first."""

    def __init__(self) -> None:
        self.names: OrderedDict[tuple[str, tuple[int, ...]], bytes] = OrderedDict()
        self.closing: list[bytes] = []  # evicted: closed in the next pipeline
        self.made = 0

    def name(self, key: tuple[str, tuple[int, ...]]) -> tuple[bytes, bool]:
        """The name for `key`, and whether it must be prepared first."""
        found = self.names.get(key)
        if found is not None:
            self.names.move_to_end(key)
            return found, False
        self.made += 1
        made = self.names[key] = b"ontoos_%d" % self.made
        if len(self.names) > MOST:
            self.closing.append(self.names.popitem(last=False)[1])
        return made, True


_prepared: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


async def pipeline(conn, statements: Sequence[tuple[str, Sequence[Any]]], retry: bool = True) -> list[pq.PGresult]:
    """Run `statements` ((text, parameters) each) in one pipeline on `conn`: their results, in order.
    If the first one failed because the session had lost its prepared statements (a `DEALLOCATE ALL`
    or `DISCARD ALL` sent by someone else), nothing ran: they are prepared again, once."""
    pg = conn.pgconn
    tx = Transformer(conn)
    cache = _prepared.get(conn)
    if cache is None:
        cache = _prepared[conn] = Prepared()
    kinds: list[Any] = []  # what each result answers: None (a close), a key (a Parse), an int (a statement)
    made: list[tuple[str, tuple[int, ...]]] = []
    keys: list[tuple[str, tuple[int, ...]]] = []  # each statement's
    pg.enter_pipeline_mode()
    try:
        closing, cache.closing = cache.closing, []
        for name in closing:
            pg.send_close_prepared(name)
            kinds.append(None)
        for i, (sql, params) in enumerate(statements):
            if params:
                values = tx.dump_sequence(params, [PyFormat.AUTO] * len(params))
                types, formats = tuple(tx.types), list(tx.formats)
            else:
                values, types, formats = [], (), None
            key = (sql, types)
            keys.append(key)
            name, new = cache.name(key)
            if new:
                made.append(key)
                pg.send_prepare(name, sql.encode(), param_types=types or None)
                kinds.append(key)
            pg.send_query_prepared(name, values, param_formats=formats, result_format=pq.Format.TEXT)
            kinds.append(i)
        pg.pipeline_sync()
        results = await _read(pg)
    except BaseException:  # its results unread: the connection is dropped by the pool; these names are unknown
        for key in made:
            cache.names.pop(key, None)
        raise
    pg.exit_pipeline_mode()
    out: list[pq.PGresult] = []
    refused = None
    for kind, result in zip(kinds, results):
        ok = result.status in _OK
        if isinstance(kind, tuple):
            if not ok:  # not made (aborted, or refused): prepared again next time, by another name
                cache.names.pop(kind, None)
        elif isinstance(kind, int):
            out.append(result)
            if result.status == pq.ExecStatus.FATAL_ERROR:
                _forget(cache, keys[kind], _state(result))
        if result.status == pq.ExecStatus.FATAL_ERROR and refused is None:
            refused = result
    if refused is not None:
        if retry and refused is results[kinds.index(0)] and _state(refused) == b"26000":
            return await pipeline(conn, statements, retry=False)  # nothing ran: prepared afresh, once
        raise errors.error_from_result(refused, encoding=conn.info.encoding)
    return out


def _state(result: pq.PGresult) -> bytes | None:
    return result.error_field(pq.DiagnosticField.SQLSTATE)


def _forget(cache: Prepared, key, state: bytes | None) -> None:
    """After a prepared statement failed: the names the server no longer has are forgotten."""
    if state == b"26000":  # the session's statements are gone (DEALLOCATE ALL, DISCARD ALL): all of them
        cache.names.clear()
        cache.closing.clear()
    elif state == b"0A000":  # "cached plan must not change result type": a table changed under it
        name = cache.names.pop(key, None)
        if name is not None:
            cache.closing.append(name)


async def _read(pg: pq.PGconn) -> list[pq.PGresult]:
    """Every result up to the pipeline's sync (the sync itself left out)."""
    await sent(pg)
    results = []
    while True:
        await answered(pg)
        result = pg.get_result()
        if result is None:  # the end of one statement's results
            if pg.status != pq.ConnStatus.OK:  # none will follow: libpq is idle on a broken connection
                raise OperationalError("the connection was lost in a pipeline")
            continue
        if result.status == pq.ExecStatus.PIPELINE_SYNC:
            return results
        results.append(result)


# The waits of a connection driven through psycopg.pq on the running event loop (also the shared limits')

async def sent(pg: pq.PGconn) -> None:
    """What was queued is on the socket: while its buffer is full, wait until it can be written,
    reading what the server sends meanwhile (so that it never waits on us)."""
    loop = asyncio.get_running_loop()
    while pg.flush():
        await _ready(loop, pg.socket, loop.add_writer, loop.remove_writer)
        pg.consume_input()


async def answered(pg: pq.PGconn) -> None:
    """The next result can be taken without blocking (`pg.get_result()`)."""
    if pg.is_busy():
        loop = asyncio.get_running_loop()
        while pg.is_busy():
            await _ready(loop, pg.socket, loop.add_reader, loop.remove_reader)
            pg.consume_input()


async def _ready(loop, fd: int, add, remove) -> None:
    waiter = loop.create_future()
    add(fd, lambda: waiter.done() or waiter.set_result(None))
    try:
        await waiter
    finally:
        remove(fd)


def rows(conn, result: pq.PGresult) -> list[tuple]:
    """A result's rows, loaded by the connection's loaders (as a cursor would)."""
    tx = Transformer(conn)
    tx.set_pgresult(result)
    return tx.load_rows(0, result.ntuples, tuple)
