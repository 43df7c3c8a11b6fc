"""Limits a deployment's processes hold together (server/shared_limits.py), on real PostgreSQL.

Two `SharedLimits` are two processes (a connection each): a bucket's tokens go to whichever asks
first, never one too many however the takes interleave; an in-flight slot is held by one session at
a time, is not taken twice by its own holder, and comes back when its holder's session ends (a dead
process). With the state database away, `Admission` keeps the process's own limits. Then two real
`ontoos serve --http` processes with ONTOOS_SHARED_LIMITS=on: a burst of 3 is 3 answers in all, and a
principal's one query in flight on one process refuses its second on the other, and an address's
requests without a valid token are limited in all.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import psycopg
import pytest

from ontoos_explore.errors import Codes, ExploreError
from ontoos_explore.server.admission import Admission
from ontoos_explore.server.config import Principal, RateLimit
from ontoos_explore.server.shared_limits import SharedLimits, Unavailable
from tests.databases import new_database
from tests.server.test_hostile_support import request, start_hostile_server

pytestmark = pytest.mark.anyio
SLOW = 0.0001  # tokens per second: nothing refills within a test


@pytest.fixture
def state_dsn(pg_dsn) -> str:
    return new_database(pg_dsn, "state")


@pytest.fixture
async def two(state_dsn):
    a, b = SharedLimits(state_dsn), SharedLimits(state_dsn)
    yield a, b
    await a.close()
    await b.close()


async def test_a_bucket_is_shared_and_never_overdrawn(two):
    a, b = two
    taken = [await a.take("principal:ann", 5, SLOW) for _ in range(3)] + [await b.take("principal:ann", 5, SLOW)
                                                                          for _ in range(2)]
    assert taken == [0.0] * 5
    assert await a.take("principal:ann", 5, SLOW) > 1000 and await b.take("principal:ann", 5, SLOW) > 1000
    assert await a.take("principal:bob", 5, SLOW) == 0.0  # a bucket per key
    together = await asyncio.gather(*(x.take("principal:cy", 7, SLOW) for x in (a, b) * 10))
    assert sum(1 for w in together if w == 0.0) == 7


async def test_a_bucket_refills_at_its_rate(two):
    a, b = two
    # 2 a second: the second take, well within 0.5 s of the first even on a loaded machine, must wait
    # (at 20 a second, 50 ms between two statements on CI's two busy cores refilled it: a flaky test)
    assert await a.take("principal:dee", 1, 2.0) == 0.0
    wait = await b.take("principal:dee", 1, 2.0)
    assert 0 < wait <= 0.5
    await asyncio.sleep(wait + 0.05)
    assert await b.take("principal:dee", 1, 2.0) == 0.0


async def test_in_flight_slots_are_held_by_one_session_at_a_time(two):
    a, b = two
    first, second = await a.acquire("ann", 2), await b.acquire("ann", 2)
    assert first is not None and second is not None and first[0] != second[0]
    assert await a.acquire("ann", 2) is None and await b.acquire("ann", 2) is None  # its own are not taken again
    await b.release("ann", second)
    again = await a.acquire("ann", 2)
    assert again is not None and again[0] == second[0]
    assert await b.acquire("ann", 2) is None


async def _acquired_within(limits: SharedLimits, principal: str, seconds: float):
    """The principal's one slot, asked for again and again until it is free or `seconds` have passed."""
    deadline = time.monotonic() + seconds
    got = None
    while got is None and time.monotonic() < deadline:
        got = await limits.acquire(principal, 1)
        await asyncio.sleep(0.05)
    return got


async def test_a_dead_sessions_slots_come_back(two, state_dsn):
    a, b = two
    assert await a.acquire("eve", 1) is not None
    assert await b.acquire("eve", 1) is None
    pid = a._conn.info.backend_pid  # the process "dies": its session ends
    with psycopg.connect(state_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", [pid])
    assert await _acquired_within(b, "eve", 5) is not None


async def test_without_its_database_a_process_keeps_its_own_limits():
    down = SharedLimits("postgresql://nobody@127.0.0.1:1/none", connect_timeout_s=0.5)
    with pytest.raises(Unavailable):
        await down.take("principal:x", 1, SLOW)
    admission = Admission(shared=down)
    fay = Principal("fay", "reader", rate=RateLimit(per_second=SLOW, burst=2, unit="second"), max_in_flight=1)
    assert [await admission.take(fay) for _ in range(3)][:2] == [0.0, 0.0]
    assert await admission.take(fay) > 0
    first = await admission.admit(fay, querying=True, rate=False)
    assert not first.shared  # counted by this process
    async with admission.running(first):
        with pytest.raises(ExploreError) as refused:
            async with admission.running(await admission.admit(fay, querying=True, rate=False)):
                pass
    assert refused.value.error_code is Codes.TOO_MANY_IN_FLIGHT
    async with admission.running(await admission.admit(fay, querying=True, rate=False)):
        assert admission.in_flight == {"fay": 1}  # the first went back


# ---------------------------------------------------------------- across real server processes


@pytest.fixture
def pair(pg_dsn, tmp_path):
    audit = new_database(pg_dsn, "audit")
    extra = {"max_in_flight": 1, "auth_failures": {"per_minute": 0.001, "burst": 3}}
    servers = [start_hostile_server(f"shared-{i}", pg_dsn, tmp_path / f"s{i}", config_extra=extra,
                                    ONTOOS_AUDIT_DSN=audit, ONTOOS_SHARED_LIMITS="on") for i in (0, 1)]
    yield servers
    for srv in servers:
        srv.stop_cleanly()


def test_a_burst_is_the_deployments_across_processes(pair):
    asked = json.dumps({"dataset": "workloads", "fields": ["name"], "limit": 1})
    statuses = [request(pair[i % 2], "POST", "/api/v1/explore", body=asked, who="tina").status for i in range(12)]
    assert statuses.count(200) == 3 and statuses.count(429) == 9  # tina: bursts of 3, in all


def test_one_query_in_flight_on_one_process_holds_the_other(pair):
    slow = json.dumps({"dataset": "sleepy", "fields": ["id"], "order_by": ["id"], "limit": 8})  # ~1.8 s
    done: dict = {}
    worker = threading.Thread(target=lambda: done.setdefault("r", request(pair[0], "POST", "/api/v1/explore",
                                                                          body=slow, who="pat")))
    worker.start()
    time.sleep(0.6)
    other = request(pair[1], "POST", "/api/v1/explore", body=json.dumps({"dataset": "sleepy", "fields": ["id"],
                                                                         "limit": 1}), who="pat")
    worker.join(timeout=30)
    assert done["r"].status == 200
    assert other.status == 429 and "running 1 queries at once" in other.json["error"]["message"]
    after = request(pair[1], "POST", "/api/v1/explore", body=json.dumps({"dataset": "sleepy", "fields": ["id"],
                                                                         "limit": 1}), who="pat")
    assert after.status == 200  # given back when the first answered


def test_the_limit_of_requests_without_a_token_is_the_deployments(pair):
    asked = json.dumps({"dataset": "workloads", "fields": ["name"], "limit": 1})
    statuses = [request(pair[i % 2], "POST", "/api/v1/explore", body=asked, who=None).status for i in range(10)]
    assert statuses.count(401) == 3 and statuses.count(429) == 7  # bursts of 3 per address, in all


async def test_a_slot_taken_for_a_caller_cancelled_meanwhile_is_given_back(two, state_dsn):
    """The statement is in the database when its caller goes (its bucket row locked, as a busy primary
    would hold it): its answer is still read, and the slot it took goes back, so another process gets it."""
    a, b = two
    assert await a.take("principal:zed", 5, SLOW) == 0.0  # the connection, the schema and the row exist
    with psycopg.connect(state_dsn) as blocker:
        blocker.execute("LOCK TABLE ontoos_state.buckets IN EXCLUSIVE MODE")
        task = asyncio.ensure_future(a.take_and_acquire("principal:zed", 5, SLOW, "zed", 1))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    # the lock is gone: the statement ends, takes the slot, and this process gives it back
    assert await _acquired_within(b, "zed", 5) is not None
    assert a._wire is not None and not a._wire.broken  # the same connection, still good
