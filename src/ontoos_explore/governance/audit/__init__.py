"""Governance, audit: every request -> one Event -> a queue -> batched into PostgreSQL.

`events.py` makes an `Event` of an answer, `tables.py` holds the schema and the
writes, `writer.py` the queue and its background task (`AuditWriter`),
`connection.py` the writer's connection to the store, `spool.py` the copy of
the queue on local disk.

Events go to the schema `ontoos_audit` (the exploration database by default,
or `ONTOOS_AUDIT_DSN`). Recording never touches the database on the caller's
path: `AuditWriter.record()` only enqueues; a background task writes batches
(one COPY per batch) every `interval` seconds or `batch` events, keeps them
queued while the store is down, and `close()` flushes whatever is queued on a
clean shutdown. The service answers whether or not the store is up (the service stays
up; the audit is how reviewers see what happened, not a gate).

Every event is accounted for, never lost silently:

    recorded == written + queued + dropped + rejected (+ lost, after close)

- `queued`: waiting in memory; bounded by `queue_max` events and
  `queue_max_bytes` (an estimate of the events' text).
- `dropped`: the queue was full when the event was recorded (a long outage of
  the store): the newest events are dropped, counted, logged once per episode,
  and the episode is written to `ontoos_audit.gaps` (QUEUE_FULL, how many,
  first and last drop) as soon as the store takes writes again.
- `rejected`: the store refused the event itself (not the batch: a failing
  batch is split until the event at fault is found, and the others are
  written); counted, logged, and written to `ontoos_audit.gaps` (REJECTED).
  Text that PostgreSQL cannot store (NUL, unpaired surrogates) is escaped
  first, so a hostile input cannot stop the trail.
- `lost`: still queued when `close()` gave up (the store was down at
  shutdown) and not spooled: logged.

A server's writer also keeps each queued event in a spool on local disk
(`spool.py`) until it is settled: a process killed outright leaves its
events there, and the next server to start on the machine (a supervisor's
restart, another worker) claims them and writes them first; events still
queued at a shutdown that gave up stay there the same way (`left`). So

    recorded + recovered == written + queued + dropped + rejected + lost + left

Requests the HTTP layer answers 429 for having no valid token past the
per-address limit are never recorded one by one: `unrecorded()` writes one
AUTH_FLOOD gap per episode (how many, from where, first and last).

Writes are idempotent (COPY into a temporary table, then INSERT ... ON
CONFLICT (id) DO NOTHING): a batch whose commit succeeded but whose answer
was lost is retried without a duplicate and without failing forever.
"""

from .events import COLUMNS, EVENT_OVERHEAD, GAP_COLUMNS, MAX_TEXT, TEXT_COLUMNS, Event, Gap, as_dict, event_for
from .tables import (
    SCHEMA,
    ensure_schema,
    record_sync,
    write,
    write_gaps,
    write_idempotent,
)
from .spool import Spool, directory_for as spool_directory
from .writer import AuditWriter

__all__ = ["AuditWriter", "Spool", "spool_directory", "COLUMNS", "EVENT_OVERHEAD", "Event", "GAP_COLUMNS", "Gap", "MAX_TEXT", "SCHEMA",
           "TEXT_COLUMNS", "as_dict", "ensure_schema", "event_for", "record_sync", "write", "write_gaps",
           "write_idempotent"]
