"""The audit store unavailable: answers go on, events wait (bounded), nothing is lost silently.

Decision (the service stays up; every request appends an event):
the audit fails open. While the store (ONTOOS_AUDIT_DSN, here a second
PostgreSQL that the test stops and starts) is down, requests are answered as
usual and their events wait in a bounded queue; they are written when the
store is back, before any shutdown. When the queue is full, new events are
dropped, counted, logged once, and the gap (how many, from when to when) is
written to `ontoos_audit.gaps` as soon as the store takes writes again:

    requests == events written + sum(gaps.events)

The writer also survives what the store refuses: text PostgreSQL cannot hold
(NUL, unpaired surrogates) is escaped, an event the store rejects anyway is
isolated from its batch and counted as a REJECTED gap, and a batch written
twice (a commit whose answer was lost) does not duplicate nor block.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid

import pytest

from ontoos_explore.governance.audit import AuditWriter, Event

from .conftest import clean, rest

pytestmark = pytest.mark.anyio

GOOD = {"query": "explore things fields id, label where id <= 5 order by id limit 10"}
TYPO = {"dataset": "things", "fields": ["id", "lable"]}
SECRET = {"dataset": "things", "fields": ["token"]}
KINDS = [(GOOD, 200, None), (TYPO, 400, "EX201"), (SECRET, 400, "EX201")]


async def _send(client, n: int, workers: int = 1) -> list[str]:
    """n requests (GOOD, TYPO, SECRET in turn) from `workers` concurrent clients -> their exploration ids."""
    out: list[tuple[int, str]] = []

    async def worker(w: int):
        for i in range(w, n, workers):
            body, status, code = KINDS[i % len(KINDS)]
            r = await client.post("/api/v1/explore", json=body)
            env = r.json()
            assert r.status_code == status, env
            assert code is None or env["error"]["code"] == code
            out.append((i, env["meta"]["exploration_id"]))

    await asyncio.gather(*(worker(w) for w in range(workers)))
    return [ident for _, ident in sorted(out)]


def _wait_for(predicate, timeout: float = 60.0, step: float = 0.1) -> bool:
    """Whether `predicate()` held within `timeout` seconds (the writer flushes in the background)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


async def test_answers_go_on_while_the_store_is_down_and_every_event_arrives(lake, store, serve):
    store.reset_audit()
    srv = serve(lake.dsn, ONTOOS_AUDIT_DSN=store.dsn)
    async with rest(srv, timeout=15) as client:  # an answer that waited on the store would not come: a timeout
        before = await _send(client, 12)
        assert _wait_for(lambda: len(store.events()) == 12)  # written in the background

        store.stop()
        during = await _send(client, 60, workers=6)  # answered as usual while the store is down

        store.start()
        # flushed once the store is back (the writer retries every second), not only at shutdown
        assert _wait_for(lambda: len(store.events()) == 72), len(store.events())
        after = await _send(client, 12)
    assert clean(srv.stop())

    sent = before + during + after
    events = store.events()
    assert sorted(e["id"] for e in events) == sorted(sent)  # exactly one event per request
    assert store.gaps() == []
    log = srv.stderr()
    assert "audit store unavailable" in log and "audit store back after" in log
    assert "Traceback" not in log


async def test_a_full_queue_drops_the_newest_counts_them_and_writes_the_gap(lake, store, serve):
    store.reset_audit()
    store.stop()  # down from the start: the server still starts and answers
    srv = serve(lake.dsn, ONTOOS_AUDIT_DSN=store.dsn, ONTOOS_AUDIT_QUEUE_MAX="20")
    async with rest(srv) as client:
        sent = await _send(client, 50)
    assert len(sent) == 50  # every request answered
    store.start()
    assert _wait_for(lambda: len(store.gaps()) == 1), store.gaps()
    assert clean(srv.stop())

    events, gaps = store.events(), store.gaps()
    # the queue kept the oldest 20; the 30 newer were dropped, counted, and the gap says so
    assert [e["id"] for e in events] == sent[:20]
    gap = gaps[0]
    assert (gap["reason"], gap["events"]) == ("QUEUE_FULL", 30)
    assert gap["first_at"] <= gap["last_at"]
    assert gap["first_at"] >= max(e["at"] for e in events)
    assert len(events) + sum(g["events"] for g in gaps) == 50  # requests == written + dropped
    log = srv.stderr()
    assert log.count("audit queue full") == 1  # once per episode, not once per event
    assert "30 dropped (queue full)" in log  # the shutdown summary


async def test_text_the_store_cannot_hold_does_not_stop_the_trail(lake, serve):
    """NUL and an unpaired surrogate in a request: refused, recorded escaped, and the events after them arrive."""
    lake.reset_audit()
    srv = serve(lake.dsn)
    hostile = [{"query": "explore things\u0000 fields id"}, {"query": "explore things fields id where label = '\ud800'"},
               {"dataset": "things\u0000", "fields": ["id"]}]
    ids = []
    async with rest(srv) as client:
        for body in hostile:
            import json

            # sent as JSON escapes (\u0000, \ud800): what a hostile client would send
            r = await client.post("/api/v1/explore", content=json.dumps(body).encode(),
                                  headers={"Content-Type": "application/json"})
            assert r.status_code == 400, r.text
            ids.append(r.json()["meta"]["exploration_id"])
        ids += await _send(client, 6)
        assert _wait_for(lambda: len(lake.events()) == 9), len(lake.events())  # the writer is not stuck
    assert clean(srv.stop())
    by_id = {e["id"]: e for e in lake.events()}
    assert sorted(by_id) == sorted(ids)
    assert "\\u0000" in by_id[ids[0]]["exploration"]
    assert lake.gaps() == []


# ---------------------------------------------------------------- the writer on its own, on a real store


def _event(i: int, **kw) -> Event:
    kw.setdefault("exploration", f"explore things fields id limit {i}")
    return Event(id=uuid.uuid4().hex[:16], at=dt.datetime.now(dt.timezone.utc), principal="rel-writer",
                 role="patient", surface="rest", **kw)


async def test_an_event_the_store_refuses_is_isolated_counted_and_the_rest_written(store):
    store.reset_audit()
    writer = AuditWriter(store.dsn, interval=0.05, retry=0.1)
    await writer.start()
    events = [_event(i) for i in range(40)]
    events[17] = _event(17, outcome="bogus")  # violates the table's CHECK: refused by PostgreSQL itself
    for e in events:
        writer.record(e)
    await writer.close()
    assert (writer.written, writer.rejected, writer.dropped, writer.queued) == (39, 1, 0, 0)
    stored = {e["id"] for e in store.events()}
    assert stored == {e.id for i, e in enumerate(events) if i != 17}
    gaps = store.gaps()
    assert [(g["reason"], g["events"]) for g in gaps] == [("REJECTED", 1)]
    assert events[17].id in gaps[0]["detail"] and "CheckViolation" in gaps[0]["detail"]


async def test_an_event_refused_again_is_still_one_gap(store):
    """Written again (claimed from a killed process's spool, say), a refused event is refused again: the
    gap is named after it, so the trail still says one event is missing, not two."""
    store.reset_audit()
    bogus = _event(3, outcome="bogus")
    for _ in range(2):
        writer = AuditWriter(store.dsn, interval=0.05, retry=0.1)
        await writer.start()
        writer.record(bogus)
        await writer.close()
        assert writer.rejected == 1
    assert [(g["id"], g["reason"], g["events"]) for g in store.gaps()] == [(f"rejected:{bogus.id}", "REJECTED", 1)]


async def test_a_batch_written_twice_neither_duplicates_nor_blocks(store):
    """A commit whose answer was lost is retried: the events already there are skipped, the others written."""
    store.reset_audit()
    first = [_event(i) for i in range(5)]
    writer = AuditWriter(store.dsn, interval=0.05, retry=0.1)
    await writer.start()
    for e in first:
        writer.record(e)
    await writer.close()
    again = AuditWriter(store.dsn, interval=0.05, retry=0.1)
    await again.start()
    later = [_event(i) for i in range(5, 8)]
    for e in first + later:  # the first five a second time, in the same batch as new ones
        again.record(e)
    await again.close()
    assert (again.written, again.rejected, again.queued) == (8, 0, 0)
    assert sorted(e["id"] for e in store.events()) == sorted(e.id for e in first + later)
    assert store.gaps() == []


async def test_text_postgres_cannot_hold_is_escaped_at_the_store(store):
    """Whatever a surface lets through, the writer stores it: NUL and unpaired surrogates escaped, never stuck."""
    store.reset_audit()
    writer = AuditWriter(store.dsn, interval=0.05, retry=0.1)
    await writer.start()
    nul = _event(1, exploration="explore things\x00 fields id", message="bad \x00 byte")
    surrogate = _event(2, exploration="explore things where label = '\ud800'", hint="\udfff")
    after = [_event(i) for i in range(3, 8)]
    for e in [nul, surrogate, *after]:
        writer.record(e)
    await writer.close()
    assert (writer.written, writer.rejected, writer.queued) == (7, 0, 0)
    by_id = {e["id"]: e for e in store.events()}
    assert by_id[nul.id]["exploration"] == "explore things\\u0000 fields id"
    assert by_id[nul.id]["message"] == "bad \\u0000 byte"
    assert by_id[surrogate.id]["exploration"] == "explore things where label = '\\ud800'"
    assert by_id[surrogate.id]["hint"] == "\\udfff"
    assert store.gaps() == []


async def test_a_clean_shutdown_writes_the_whole_backlog(store):
    """After an outage the backlog may take longer than close()'s timeout: it waits as long as batches go in."""
    store.reset_audit()
    store.stop()
    writer = AuditWriter(store.dsn, interval=0.05, retry=0.2)
    await writer.start()
    events = [_event(i) for i in range(50_000)]
    for e in events:
        writer.record(e)
    assert writer.queued == 50_000
    await asyncio.to_thread(store.start)
    t0 = time.perf_counter()
    await writer.close(timeout=0.5)  # a timeout without progress, not a deadline
    took = time.perf_counter() - t0
    assert (writer.written, writer.lost, writer.queued, writer.dropped) == (50_000, 0, 0, 0)
    assert len(store.events()) == 50_000
    print(f"\n50,000 queued events written in {took:.1f} s after the store came back ({50_000 / took:,.0f}/s)")


def test_the_queue_bounds_come_from_the_settings():
    from ontoos_explore.engine.settings import Settings
    from ontoos_explore.server.run import audit_writer

    default = audit_writer(Settings.from_env(env={}), "postgresql:///x")
    assert (default.queue_max, default.queue_max_bytes) == (100_000, 64 * 2**20)
    settings = Settings.from_env(env={"ONTOOS_AUDIT_QUEUE_MAX": "500", "ONTOOS_AUDIT_QUEUE_MB": "1.5"})
    bounded = audit_writer(settings, "postgresql:///x")
    assert (bounded.queue_max, bounded.queue_max_bytes) == (500, int(1.5 * 2**20))
    assert audit_writer(Settings(dsn="postgresql:///x", audit=False), "postgresql:///x") is None
