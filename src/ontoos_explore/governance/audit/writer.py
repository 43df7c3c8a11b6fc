"""Governance, audit writer: events -> a bounded queue -> idempotent COPY batches, in the background.

`record()` never waits for the database and never raises; what it cannot
keep is counted and written as a gap (the package docstring says how).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from ...envelope import new_id
from .connection import open_in_thread, store_down
from .events import Event, Gap
from .spool import Claimed, Spool
from .tables import write_gaps, write_idempotent

log = logging.getLogger("ontoos_explore.audit")


def _writer_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class AuditWriter:
    """Queue + background batches. `record` never waits for the database, and never raises.

    `clock` (monotonic seconds) times how long the store has been away (`stats()["store_down_s"]`
    and the log line when it is back); a test may give its own."""

    dsn: str
    batch: int = 500
    interval: float = 0.2
    retry: float = 1.0
    queue_max: int = 100_000
    queue_max_bytes: int = 64 * 1024 * 1024
    statement_timeout_ms: int = 30_000
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    spool: Spool | None = None  # every queued event on local disk too, until settled (spool.py)
    recorded: int = 0
    written: int = 0
    dropped: int = 0
    rejected: int = 0
    lost: int = 0
    recovered: int = 0  # events a killed process left in the spool, claimed at start
    left: int = 0  # still queued at close, and kept in the spool for the next start
    _claimed: list[Claimed] = field(default_factory=list, repr=False)
    _backlog: list[Event] = field(default_factory=list, repr=False)  # claimed events, written a batch at a time first
    _queue: asyncio.Queue | None = field(default=None, repr=False)
    _enough: asyncio.Event | None = field(default=None, repr=False)
    _stopping: bool = field(default=False, repr=False)  # close() queued the stop marker: no more gathering
    _task: asyncio.Task | None = field(default=None, repr=False)
    _pending: list[Event] = field(default_factory=list, repr=False)
    _queued: int = field(default=0, repr=False)
    _bytes: int = field(default=0, repr=False)
    _drops: list | None = field(default=None, repr=False)  # the open QUEUE_FULL episode: [first, last, count]
    _gaps: list[Gap] = field(default_factory=list, repr=False)  # gap rows not written yet
    _down_since: float | None = field(default=None, repr=False)
    _conn: psycopg.Connection | None = field(default=None, repr=False)
    _max_queued: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        # unbounded as an asyncio.Queue: the bounds are checked in record(), so the stop marker always fits
        self._queue = asyncio.Queue()  # record() works before start(); events wait
        self._enough = asyncio.Event()  # set when a batch is queued (or at close): the writer gathers no longer

    # ------------------------------------------------------------ the caller's path

    def record(self, event: Event) -> None:
        self.recorded += 1
        size = event.size()
        if self._queued >= self.queue_max or self._bytes + size > self.queue_max_bytes:
            self._drop(event)
            return
        if self.spool is not None:
            self.spool.append(event)
        self._queue.put_nowait(event)
        self._queued += 1
        if self._queued >= self.batch:
            self._enough.set()  # a whole batch (with what the writer holds): it stops gathering
        self._bytes += size
        self._max_queued = max(self._max_queued, self._queued)

    def unrecorded(self, reason: str, events: int, first: dt.datetime, last: dt.datetime, detail: str) -> None:
        """Requests the caller chose not to record one by one (an AUTH_FLOOD episode): one gap row."""
        self._gaps.append(Gap(new_id(), dt.datetime.now(dt.timezone.utc), reason, events, first, last,
                              _writer_name(), detail))

    def _drop(self, event: Event) -> None:
        self.dropped += 1
        if self._drops is None:
            self._drops = [event.at, event.at, 0]
            log.error("audit queue full (%d events, %.1f MiB): new events are dropped and counted until the store "
                      "takes writes again", self._queued, self._bytes / 2**20)
        self._drops[1] = event.at
        self._drops[2] += 1

    @property
    def queued(self) -> int:
        return self._queued

    def stats(self) -> dict[str, Any]:
        return {"recorded": self.recorded, "written": self.written, "queued": self._queued, "dropped": self.dropped,
                "rejected": self.rejected, "lost": self.lost, "recovered": self.recovered, "left": self.left,
                "max_queued": self._max_queued,
                "queued_bytes": self._bytes, "gaps_unwritten": len(self._gaps) + (self._drops is not None),
                "store_down_s": round(self.clock() - self._down_since, 1) if self._down_since is not None else 0.0}

    # ------------------------------------------------------------ the background task

    async def start(self) -> None:
        if self.spool is not None:
            try:
                self._claim()
            except Exception:  # never keep a server from starting: what was not claimed waits for a later start
                log.exception("audit spool: claiming what ended processes left failed")
        try:
            self._conn = await open_in_thread(self.dsn, self.statement_timeout_ms)
        except (psycopg.Error, OSError):
            self._down_since = self.clock()
            log.warning("audit store unavailable at start; events are queued until it is back")
        self._task = asyncio.create_task(self._run(), name="ontoos-audit")

    def _claim(self) -> None:
        """The events dead processes left in the spool go first, ahead of this process's own."""
        for claimed in self.spool.claim():
            self._claimed.append(claimed)
            if claimed.skipped:
                log.error("audit: %d lines of the spool of ended process %s are not events (cut short by a crash?) "
                          "and are not in the trail", claimed.skipped, claimed.owner)
            if not claimed.events:
                continue
            log.warning("audit: %d events left unwritten by ended process %s are written now", len(claimed.events),
                        claimed.owner)
            self._backlog.extend(claimed.events)
            self.recovered += len(claimed.events)
            self._queued += len(claimed.events)
            self._bytes += sum(e.size() for e in claimed.events)

    def _settle(self) -> None:
        """After a flush (nothing pending): the next batch of the claimed backlog, if any is left; else what
        was claimed is in the store, and so are this process's first `written + rejected - recovered` events."""
        if self._backlog:
            self._pending, self._backlog = self._backlog[: self.batch], self._backlog[self.batch:]
            return
        for claimed in self._claimed:
            claimed.release()
        self._claimed.clear()
        if self.spool is not None:
            self.spool.settled(self.written + self.rejected - self.recovered)

    async def _collect(self) -> bool:
        """Move one batch from the queue to `_pending`; True when the stop marker was reached. The events
        that come within `interval` of the first join its batch: the writer sleeps through them (one
        wake-up a batch, not one an event), woken early once a whole batch is queued or at close."""
        queue = self._queue
        first = await queue.get()
        if first is None:
            return True
        self._pending.append(first)
        if queue.qsize() + 1 < self.batch and not self._stopping:
            self._enough.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await self._enough.wait()
        while len(self._pending) < self.batch and not queue.empty():
            item = queue.get_nowait()
            if item is None:
                return True
            self._pending.append(item)
        return False

    async def _run(self) -> None:
        stopping = False
        try:
            while True:
                try:
                    if not self._pending and self._backlog:
                        self._settle()  # the claimed backlog's first batch
                    elif not self._pending and not stopping:
                        stopping = await self._collect()
                    await self._flush()
                    self._settle()
                    if stopping and not self._pending:
                        break
                except Exception:  # keep the writer alive whatever happens
                    log.exception("audit writer error")
                    await asyncio.sleep(self.retry)
        finally:
            self._disconnect()

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def _reconnect(self) -> None:
        self._disconnect()
        self._conn = await open_in_thread(self.dsn, self.statement_timeout_ms)

    async def _flush(self) -> None:
        """Write `_pending` and the gap rows due; while the store is down, wait and retry."""
        while self._pending or self._gaps or self._drops is not None:
            try:
                if self._conn is None or self._conn.closed:
                    await self._reconnect()
                if self._pending:
                    done: list[Event] = []
                    try:
                        await self._write(list(self._pending), False, done)
                    finally:  # written or rejected, even if the store went away halfway through a split batch
                        if done:
                            gone = {id(e) for e in done}
                            self._pending = [e for e in self._pending if id(e) not in gone]
                self._seal_drops()
                if self._gaps:
                    await self._write_gaps()
                if self._down_since is not None:
                    log.warning("audit store back after %.1f s; the queued events are being written",
                                self.clock() - self._down_since)
                    self._down_since = None
            except (psycopg.Error, OSError) as e:
                if self._down_since is None:
                    self._down_since = self.clock()
                    log.warning("audit store unavailable (%s); %d events queued, retrying every %.1f s",
                                type(e).__name__, self._queued, self.retry)
                else:
                    log.debug("audit store still unavailable (%s); %d events queued", type(e).__name__, self._queued)
                self._disconnect()
                await asyncio.sleep(self.retry)

    async def _write(self, events: list[Event], fresh: bool, done: list[Event]) -> None:
        """Write `events`, finding and rejecting any the store refuses. Raises only while the store is down."""
        try:
            await asyncio.to_thread(write_idempotent, self._conn, events)
        except (psycopg.Error, ValueError, TypeError, UnicodeError) as e:
            if store_down(e, self._conn):
                raise
            if not fresh:  # once, on a new connection (a dropped table is created again), the whole batch
                log.warning("audit store refused a batch of %d (%s); retrying on a new connection", len(events),
                            type(e).__name__)
                await self._reconnect()
                return await self._write(events, True, done)
            if len(events) == 1:
                self._reject(events[0], e)
                done.append(events[0])
                return
            half = len(events) // 2
            await self._write(events[:half], True, done)
            await self._write(events[half:], True, done)
            return
        self.written += len(events)
        self._release(events)
        done.extend(events)

    async def _write_gaps(self) -> None:
        gaps = list(self._gaps)
        try:
            await asyncio.to_thread(write_gaps, self._conn, gaps)
        except psycopg.Error as e:
            if store_down(e, self._conn):
                raise
            # the gaps table refuses them (altered by hand?): they are logged below; never block the events
            log.error("audit: ontoos_audit.gaps refused %d rows (%s)", len(gaps), type(e).__name__)
        del self._gaps[: len(gaps)]
        for g in gaps:
            log.error("audit: %d events are not in the trail (%s): %s", g.events, g.reason, g.detail)

    def _release(self, events: list[Event]) -> None:
        self._queued -= len(events)
        self._bytes -= sum(e.size() for e in events)

    def _reject(self, event: Event, e: BaseException) -> None:
        self.rejected += 1
        self._release([event])
        state = getattr(e, "sqlstate", None)
        detail = (f"event {event.id} ({event.surface}, {event.principal}, {event.outcome}) was refused by the store: "
                  f"{type(e).__name__}" + (f" SQLSTATE {state}" if state else ""))
        log.error("audit: %s", detail)
        # named after its event: refused again (claimed from a spool after a kill), it is one gap, not two
        self._gaps.append(Gap(f"rejected:{event.id}", dt.datetime.now(dt.timezone.utc), "REJECTED", 1, event.at, event.at,
                              _writer_name(), detail))

    def _seal_drops(self) -> None:
        if self._drops is None:
            return
        first, last, n = self._drops
        self._drops = None
        self._gaps.append(Gap(new_id(), dt.datetime.now(dt.timezone.utc), "QUEUE_FULL", n, first, last, _writer_name(),
                              f"{n} events dropped: the queue was full ({self.queue_max} events or "
                              f"{self.queue_max_bytes / 2**20:.0f} MiB) while the store was unavailable or slow"))

    async def close(self, timeout: float = 10.0) -> None:
        """Flush everything queued, then stop (a clean shutdown loses nothing).

        `timeout` bounds the wait without progress: a long backlog is written to
        the end as long as batches keep going in; a store that takes nothing for
        `timeout` seconds ends the wait, and what is still queued is lost (logged)."""
        if self._task is None:
            if self.spool is not None:  # never started: what was recorded stays in the spool
                self.left += self._queued
                self._queued = self._bytes = 0
                self.spool.close()
            return
        self._queue.put_nowait(None)  # the stop marker goes behind every queued event
        self._stopping = True
        self._enough.set()
        loop = asyncio.get_running_loop()
        progress, deadline = (self.written, self.rejected), loop.time() + timeout
        while True:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), max(0.01, min(1.0, deadline - loop.time())))
                break
            except TimeoutError:
                if (self.written, self.rejected) != progress:  # still writing: wait on
                    progress, deadline = (self.written, self.rejected), loop.time() + timeout
                elif loop.time() >= deadline:
                    self._task.cancel()
                    try:
                        await self._task
                    except asyncio.CancelledError:
                        log.debug("audit writer cancelled at shutdown")
                    break
        self._task = None
        for claimed in self._claimed:  # not written: they stay where they were, for the next start
            claimed.abandon()
        self._claimed.clear()
        self._backlog.clear()
        if self._queued and self.spool is not None and not self.spool.broken:
            self.left += self._queued
            log.error("audit: %d events could not be written before shutdown (the store is unavailable); they are "
                      "kept in %s and the next start writes them", self._queued, self.spool.directory)
        elif self._queued:
            self.lost += self._queued
            log.error("audit: %d events could not be written before shutdown (the store is unavailable): lost",
                      self._queued)
        self._queued = self._bytes = 0
        if self.spool is not None:
            self.spool.close()
        unwritten = sum(g.events for g in self._gaps) + (self._drops[2] if self._drops else 0)
        if unwritten:
            log.error("audit: the gap record of %d dropped or rejected events could not be written", unwritten)


