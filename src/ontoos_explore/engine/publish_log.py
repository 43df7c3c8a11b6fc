"""Engine, the publish log: an `EvidenceSpec` -> the SQL reading each source's current batch, and its rows.

The statement is the service's own, built as a sqlglot tree from the
contract's publish-log name (never from a caller's text), once per table:

    SELECT DISTINCT ON ("source") "source", "batch_id", "collected_at", "published_at", "as_of"
    FROM "lake"."publish_log" WHERE "source" IN ('gitlab', 'k8s') ORDER BY "source", "published_at" DESC

The sources are the contract's, one statement per set of them. The executor runs it in the exploration's
own transaction (REPEATABLE READ, so the rows and their evidence come from one
snapshot), in the same pipeline: no extra round trip. Whether the role may read
the log at all (`may_read_log`, a static statement) is asked first, at most
once a minute per role: a log that is missing or not granted leaves the
evidence unread rather than failing the answer.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence

import psycopg
from sqlglot import exp

from ..contract import PUBLISH_LOG_COLUMNS
from ..evidence import Batch


# Whether a database role (or, without query roles, the connecting user) may read the publish log's
# columns: a log that is missing, or not granted (`ontoos grants` not run again), leaves the evidence
# unread (unknown) rather than failing every answer.
CAN_READ_LOG = ("SELECT coalesce(bool_and(has_column_privilege(coalesce($1, current_user), "
                "to_regclass(quote_ident($2) || '.' || quote_ident($3)), c, 'SELECT')), false) "
                "FROM unnest($4::text[]) AS c")


async def may_read_log(conn, role: str | None, spec) -> bool:
    """Whether `role` (None: the connecting user) may read every column the evidence reads, of a
    publish log that exists (a log without one of them: no)."""
    cur = conn.cursor()
    try:
        await cur.execute(CAN_READ_LOG, [role, spec.schema, spec.table, list(PUBLISH_LOG_COLUMNS)])
        return bool((await cur.fetchone())[0])
    except psycopg.errors.UndefinedColumn:
        return False


@functools.lru_cache(maxsize=256)
def current_batches_sql(schema: str, table: str, sources: tuple[str, ...]) -> str:
    """The statement reading the current batch of each of `sources` (the contract's names, written as
    string literals by sqlglot: the statement has no parameter to adapt, which cost an answer ~25 µs of
    array dumping per call, and one text per set of sources keeps it prepared)."""
    col = functools.partial(exp.column, quoted=True)
    which = (exp.In(this=col("source"), expressions=[exp.Literal.string(s) for s in sources]) if sources
             else exp.false())
    query = (
        exp.select(*(col(c) for c in PUBLISH_LOG_COLUMNS))
        .distinct(col("source"))
        .from_(exp.table_(table, db=schema, quoted=True))
        .where(which)
        .order_by(exp.Ordered(this=col("source")), exp.Ordered(this=col("published_at"), desc=True))
    )
    return query.sql(dialect="postgres")


def batches(rows: Sequence[Sequence[str | None]]) -> list[Batch]:
    """The statement's rows (PostgreSQL's text: timestamptz as 'YYYY-MM-DD hh:mm:ss[.ffffff]+00') as
    `Batch`es; a row without a published_at it can read is no current batch (its source's evidence is
    then unknown). The same rows (the lake has not published since) are read once."""
    try:
        return list(_batches(tuple(tuple(r) for r in rows)))
    except TypeError:  # a value that cannot be hashed (a connection's own loader's): read it each time
        return list(_batches.__wrapped__(rows))


@functools.lru_cache(maxsize=256)
def _batches(rows) -> tuple[Batch, ...]:
    return tuple(Batch(source, batch_id, _time(collected), published, _time(as_of))
                 for source, batch_id, collected, published_text, as_of in rows
                 if (published := _time(published_text)) is not None)


def _time(text: str | dt.datetime | None) -> dt.datetime | None:
    """A timestamptz's text (or the datetime a connection's own loaders made of it) as an aware datetime;
    None for null, and for what is no point in time Python can age ('infinity', a BC date, a column
    without a time zone): unknown, never a failure."""
    if text is None:
        return None
    if isinstance(text, dt.datetime):
        t = text
    else:
        try:
            t = dt.datetime.fromisoformat(text)
        except (TypeError, ValueError):
            return None
    return t if t.tzinfo is not None else None
