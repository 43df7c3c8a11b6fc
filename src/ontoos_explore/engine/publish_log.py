"""Engine, the publish log: an `EvidenceSpec` -> the SQL reading each source's current batch, and its rows.

The statement is the service's own, built as a sqlglot tree from the
contract's publish-log name (never from a caller's text), once per table:

    SELECT DISTINCT ON ("source") "source", "batch_id", "collected_at", "published_at", "as_of"
    FROM "lake"."publish_log" WHERE "source" = ANY($1) ORDER BY "source", "published_at" DESC NULLS LAST

`$1` is the sources, a text array. The executor runs it in the exploration's
own transaction (REPEATABLE READ, so the rows and their evidence come from one
snapshot), in the same pipeline: no extra round trip.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Sequence

from sqlglot import exp

from ..contract import PUBLISH_LOG_COLUMNS
from ..evidence import Batch


@functools.lru_cache(maxsize=64)
def current_batches_sql(schema: str, table: str) -> str:
    """The statement reading the current batch of each source in `$1`."""
    col = functools.partial(exp.column, quoted=True)
    query = (
        exp.select(*(col(c) for c in PUBLISH_LOG_COLUMNS))
        .distinct(col("source"))
        .from_(exp.table_(table, db=schema, quoted=True))
        .where(exp.EQ(this=col("source"),
                      expression=exp.Any(this=exp.Paren(this=exp.Parameter(this=exp.Literal.number(1))))))
        .order_by(exp.Ordered(this=col("source")), exp.Ordered(this=col("published_at"), desc=True))
    )
    return query.sql(dialect="postgres")


def batches(rows: Sequence[Sequence[str | None]]) -> list[Batch]:
    """The statement's rows (PostgreSQL's text: timestamptz as 'YYYY-MM-DD hh:mm:ss[.ffffff]+00') as
    `Batch`es; a row without a published_at is no current batch."""
    return [Batch(source, batch_id, _time(collected), published, _time(as_of))
            for source, batch_id, collected, published_text, as_of in rows
            if (published := _time(published_text)) is not None]


def _time(text: str | None) -> dt.datetime | None:
    return None if text is None else dt.datetime.fromisoformat(text)
