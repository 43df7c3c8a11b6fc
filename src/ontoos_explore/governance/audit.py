"""Governance, audit: every request -> one Event -> a queue -> batched into PostgreSQL.

Events go to the schema `ontoos_audit` (the embedded server by default, or
`--audit-dsn`). Recording never touches the database on the caller's path:
`AuditWriter.record()` only enqueues; a background task inserts batches (one
COPY per batch) every `interval` seconds or `batch` events, retries while the
store is down, and `close()` flushes whatever is queued on a clean shutdown.
On a crash, events still queued (at most one interval's worth, or more while
the store is down) are lost; the README says so.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg

from ..contract import Contract
from ..errors import ExploreError
from ..service import Answer, new_id

log = logging.getLogger("ontoos_explore.audit")

SCHEMA = """
CREATE SCHEMA IF NOT EXISTS ontoos_audit;
CREATE TABLE IF NOT EXISTS ontoos_audit.events (
  id            text PRIMARY KEY,
  at            timestamptz NOT NULL,
  principal     text NOT NULL,
  role          text,
  surface       text NOT NULL,
  dataset       text,
  exploration   text,
  fingerprint   text,
  outcome       text NOT NULL CHECK (outcome IN ('ok', 'refused', 'failed')),
  error_type    text,
  error_subtype text,
  error_code    text,
  reason        text,
  column_name   text,
  message       text,
  hint          text,
  rows          integer,
  truncated     boolean,
  elapsed_ms    double precision
);
CREATE INDEX IF NOT EXISTS events_at ON ontoos_audit.events (at);
CREATE INDEX IF NOT EXISTS events_fingerprint ON ontoos_audit.events (fingerprint, outcome);
"""
COLUMNS = ("id", "at", "principal", "role", "surface", "dataset", "exploration", "fingerprint", "outcome",
           "error_type", "error_subtype", "error_code", "reason", "column_name", "message", "hint", "rows",
           "truncated", "elapsed_ms")
COPY = f"COPY ontoos_audit.events ({', '.join(COLUMNS)}) FROM STDIN"
MAX_TEXT = 4000


@dataclass(frozen=True, slots=True)
class Event:
    id: str
    at: dt.datetime
    principal: str
    role: str | None
    surface: str
    dataset: str | None = None
    exploration: str | None = None
    fingerprint: str | None = None
    outcome: str = "ok"
    error_type: str | None = None
    error_subtype: str | None = None
    error_code: str | None = None
    reason: str | None = None
    column_name: str | None = None
    message: str | None = None
    hint: str | None = None
    rows: int | None = None
    truncated: bool | None = None
    elapsed_ms: float | None = None

    def row(self) -> tuple:
        return tuple(getattr(self, c) for c in COLUMNS)


def _describe_source(source: Any, contract: Contract) -> tuple[str | None, str | None, str | None]:
    """(dataset, normalized text, fingerprint) of what was asked, as far as it parses."""
    from ..grammar.render import to_text
    from ..names import fold
    from ..pipeline import parse_source

    try:
        e = parse_source(source)
    except ExploreError:
        raw = source if isinstance(source, str) else json.dumps(source, default=str, ensure_ascii=False)
        return None, raw[:MAX_TEXT], None
    except Exception:  # anything unreadable is still recorded, as its text
        return None, str(source)[:MAX_TEXT], None
    ds = contract.dataset(e.dataset.value)
    dataset = ds.name if ds is not None else e.dataset.value
    text = to_text(e)
    shape = to_text(e, literal=lambda _: "?", with_limit=False)
    return dataset, text[:MAX_TEXT], "ir:" + hashlib.sha256(fold(shape).encode()).hexdigest()[:16]


def event_for(answer: Answer, *, principal: str | None, role: str | None, surface: str, source: Any,
              contract: Contract) -> Event:
    now = dt.datetime.now(dt.timezone.utc)
    env = answer.envelope
    q = answer.compiled
    if answer.ok:
        meta = env.get("meta", {})
        return Event(
            id=meta.get("exploration_id") or new_id(), at=now, principal=principal or "anonymous", role=role,
            surface=surface, dataset=q.datasets[0] if q and q.datasets else None,
            exploration=(q.normalized if q else None), fingerprint=(q.fingerprint if q else None), outcome="ok",
            rows=meta.get("rows"), truncated=meta.get("truncated"), elapsed_ms=meta.get("elapsed_ms"),
        )
    err: ExploreError = answer.error
    if q is not None:
        dataset, text, fingerprint = q.datasets[0], q.normalized, q.fingerprint
    elif source is not None:
        dataset, text, fingerprint = _describe_source(source, contract)
    else:
        dataset = text = fingerprint = None
    return Event(
        id=env.get("meta", {}).get("exploration_id") or new_id(), at=now, principal=principal or "anonymous",
        role=role, surface=surface, dataset=dataset, exploration=text, fingerprint=fingerprint,
        outcome="refused" if err.type in ("validation", "policy", "auth") else "failed",
        error_type=err.type, error_subtype=err.subtype, error_code=err.code, reason=err.reason,
        column_name=(err.detail or {}).get("column"), message=err.message[:MAX_TEXT],
        hint=(err.hint or "")[:MAX_TEXT] or None,
    )


def ensure_schema(conn: psycopg.Connection) -> None:
    with conn.transaction():
        conn.execute(SCHEMA)


def write(conn: psycopg.Connection, events: list[Event]) -> None:
    with conn.transaction():
        with conn.cursor() as cur, cur.copy(COPY) as copy:
            for e in events:
                copy.write_row(e.row())


@dataclass
class AuditWriter:
    """Queue + background batches. `record` never waits for the database."""

    dsn: str
    batch: int = 500
    interval: float = 0.2
    retry: float = 1.0
    queue_max: int = 100_000
    written: int = 0
    dropped: int = 0
    _queue: asyncio.Queue | None = field(default=None, repr=False)
    _task: asyncio.Task | None = field(default=None, repr=False)
    _pending: list[Event] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self._queue = asyncio.Queue(self.queue_max)  # record() works before start(); events wait

    async def start(self) -> None:
        try:
            await asyncio.to_thread(self._setup)
        except psycopg.Error:
            log.warning("audit store unavailable at start; events are queued until it is back")
        self._task = asyncio.create_task(self._run(), name="ontoos-audit")

    def _setup(self) -> None:
        with psycopg.connect(self.dsn, connect_timeout=5) as conn:
            ensure_schema(conn)

    def record(self, event: Event) -> None:
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
            log.error("audit queue full: event %s dropped", event.id)

    @property
    def queued(self) -> int:
        return (self._queue.qsize() if self._queue else 0) + len(self._pending)

    async def _run(self) -> None:
        conn = None
        stopping = False
        while not stopping:
            try:
                first = await self._queue.get()
                if first is None:
                    stopping = True
                else:
                    self._pending.append(first)
                deadline = asyncio.get_running_loop().time() + self.interval
                while not stopping and len(self._pending) < self.batch:
                    timeout = deadline - asyncio.get_running_loop().time()
                    if timeout <= 0:
                        break
                    try:
                        item = await asyncio.wait_for(self._queue.get(), timeout)
                    except TimeoutError:
                        break
                    if item is None:
                        stopping = True
                    else:
                        self._pending.append(item)
                conn = await self._flush(conn)
            except Exception:  # keep the writer alive whatever happens
                log.exception("audit writer error")
                await asyncio.sleep(self.retry)
        if conn is not None:
            await asyncio.to_thread(conn.close)

    async def _flush(self, conn):
        while self._pending:
            try:
                if conn is None or conn.closed:
                    conn = await asyncio.to_thread(psycopg.connect, self.dsn, connect_timeout=5)
                    await asyncio.to_thread(ensure_schema, conn)
                batch = list(self._pending)
                await asyncio.to_thread(write, conn, batch)
                del self._pending[: len(batch)]
                self.written += len(batch)
            except psycopg.Error:
                log.warning("audit store unavailable; %d events queued", self.queued)
                if conn is not None:
                    await asyncio.to_thread(conn.close)
                conn = None
                await asyncio.sleep(self.retry)
        return conn

    async def close(self, timeout: float = 10.0) -> None:
        """Flush everything queued, then stop (a clean shutdown loses nothing)."""
        if self._task is None:
            return
        while True:  # the stop marker goes behind every queued event
            try:
                self._queue.put_nowait(None)
                break
            except asyncio.QueueFull:
                await asyncio.sleep(0.01)
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except TimeoutError:
            log.error("audit: %d events could not be written before shutdown", self.queued)
            self._task.cancel()
        self._task = None


def record_sync(dsn: str, events: list[Event]) -> None:
    """For one-shot surfaces (the CLI): write now, at the end of the command."""
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        ensure_schema(conn)
        write(conn, events)


def as_dict(e: Event) -> dict[str, Any]:
    d = asdict(e)
    d["at"] = e.at.isoformat()
    return d
