"""A statement past the role's time budget is stopped by PostgreSQL itself, seen from the server side.

Through a real `ontoos serve --http`: the role `hasty` may run 300 ms; the
`slow` dataset takes 25 s to scan. The executor gives PostgreSQL the budget
(`statement_timeout`, `lock_timeout`) and keeps its own deadline 2 s later as
a last resort. These tests prove that the database is what stops the
statement: its own log says `57014 canceling statement due to statement
timeout` (or `55P03 ... lock timeout`), never `due to user request` (the
client-side cancel at the deadline), the audit's reason is STATEMENT_TIMEOUT
(not CLIENT_DEADLINE), nothing is left running, and the connection is used
again. What stopped the statement is read from PostgreSQL's log, not from a
stopwatch.
"""

from __future__ import annotations

import json
import time

import psycopg
import pytest

from .conftest import ACTIVE_STATES, clean, rest

pytestmark = pytest.mark.anyio



def _wait_idle(lake, timeout: float = 30.0) -> list:
    """The explorer's busy backends, once there are none (or whatever they are after `timeout`)."""
    deadline = time.monotonic() + timeout
    while True:
        busy = [a for a in lake.activity("ontoos-explore") if a["state"] in ACTIVE_STATES]
        if not busy or time.monotonic() > deadline:
            return busy
        time.sleep(0.05)


def _wait_gone(lake, timeout: float = 30.0) -> list:
    """The explorer's backends, once there are none: a backend leaves pg_stat_activity a moment
    after its client has closed the connection."""
    deadline = time.monotonic() + timeout
    while (left := lake.activity("ontoos-explore")) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


async def test_the_statement_timeout_kills_it_in_postgres(lake, serve):
    lake.reset_audit()
    srv = serve(lake.dsn)
    async with rest(srv, "hal") as client:
        mark = lake.log_size()
        r = await client.post("/api/v1/explore", json={"query": "explore slow fields id, label limit 100"})
        log = lake.log_since(mark)
        env = r.json()
        assert r.status_code == 504, env
        assert (env["error"]["subtype"], env["error"]["code"]) == ("QUERY_BUDGET_EXCEEDED", "EX410")
        assert "300 ms" in env["error"]["message"]
        # PostgreSQL's text never reaches the caller
        assert "pg_sleep" not in r.text and "57014" not in r.text and "canceling" not in r.text
        # the server stopped it: 57014 from statement_timeout, on the slow view's statement ...
        assert "57014: canceling statement due to statement timeout" in log, log[-2000:]
        statement = log.split("57014: canceling statement due to statement timeout", 1)[1][:2000]
        assert '"rel"."slow_things"' in statement
        # ... not the client's cancel (which PostgreSQL logs as "due to user request")
        assert "canceling statement due to user request" not in log
        # nothing left running or holding a transaction
        assert _wait_idle(lake) == []
        # the same pooled connections answer the next exploration (pool of 4: every one is reused)
        for _ in range(6):
            again = await client.post("/api/v1/explore", json={"query": "explore things fields id where id <= 3 limit 5"})
            assert again.status_code == 200 and again.json()["meta"]["rows"] == 3
    assert clean(srv.stop())
    assert _wait_gone(lake) == []  # the pool closed its connections
    events = lake.events()
    assert len(events) == 7
    timed_out = [e for e in events if e["error_code"] == "EX410"]
    assert len(timed_out) == 1
    assert (timed_out[0]["outcome"], timed_out[0]["reason"], timed_out[0]["dataset"]) == \
        ("refused", "STATEMENT_TIMEOUT", "slow")


async def test_a_statement_waiting_on_a_lock_is_stopped_by_the_lock_timeout(lake, serve):
    """A lock held elsewhere: PostgreSQL's lock_timeout (half the budget) ends the wait, as a time budget."""
    srv = serve(lake.dsn)
    with psycopg.connect(lake.dsn) as locker:
        locker.execute("LOCK TABLE rel.things IN ACCESS EXCLUSIVE MODE")  # held until the rollback below
        try:
            async with rest(srv, "hal") as client:
                mark = lake.log_size()
                r = await client.post("/api/v1/explore", json={"query": "explore things fields id limit 5"})
            log = lake.log_since(mark)
        finally:
            locker.rollback()
    env = r.json()
    assert r.status_code == 504 and env["error"]["code"] == "EX410", env
    assert "55P03: canceling statement due to lock timeout" in log, log[-2000:]
    assert "canceling statement due to user request" not in log
    assert _wait_idle(lake) == []
    async with rest(srv, "hal") as client:
        r = await client.post("/api/v1/explore", json={"query": "explore things fields id limit 5"})
        assert r.status_code == 200, r.text
    assert json.loads(r.text)["meta"]["rows"] == 5
