"""PostgreSQL stopped and restarted under load, through a real `ontoos serve --http`.

tests/engine/test_faults.py covers the executor alone (one call while down,
one after). Here six REST clients keep sending explorations (that need the
database) and typos (that do not) while the exploration database is stopped
for a few seconds and started again, with the audit in that same database
(the default). Checked from the wire and from PostgreSQL:

- while it is down, explorations are UPSTREAM_UNAVAILABLE envelopes (EX601,
  HTTP 503) after the pool's wait (ONTOOS_POOL_TIMEOUT, 1 s here): no hang
  (each client gives up on an answer after 15 s, and that fails the test),
  no 500; typos are still answered 400;
- after the restart the server recovers without help, and stays recovered;
- no connection is left active or idle in a transaction, the pool holds no
  more than its size, and after a clean shutdown none at all (a backend
  leaves pg_stat_activity a moment after its client has gone, so that is
  waited for, up to 30 s);
- the audit, queued while its store was down too, holds exactly one event
  per request, the outage's 503s included.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from .conftest import ACTIVE_STATES, clean, rest

pytestmark = pytest.mark.anyio

GOOD = {"query": "explore things fields id, label where id <= 5 order by id limit 10"}
TYPO = {"dataset": "things", "fields": ["id", "lable"]}
CLIENTS = 6
DOWN_S = 3.0
CLIENT_TIMEOUT_S = 15.0  # far past the pool's 1 s wait: only a hang reaches it


async def _until(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def test_database_down_under_load_then_back(lake, serve):
    lake.reset_audit()
    srv = serve(lake.dsn)
    results: list[dict] = []
    stop = asyncio.Event()

    async def client(n: int):
        async with rest(srv, timeout=CLIENT_TIMEOUT_S) as http:
            i = n
            while not stop.is_set():
                kind, body = ("good", GOOD) if i % 2 == 0 else ("typo", TYPO)
                i += 1
                t0 = time.monotonic()
                r = await http.post("/api/v1/explore", json=body)
                results.append({"kind": kind, "sent": t0, "done": time.monotonic(), "status": r.status_code,
                                "env": r.json()})
                await asyncio.sleep(0.02)

    tasks = [asyncio.create_task(client(n)) for n in range(CLIENTS)]
    # the database goes down once every client has had an exploration answered (however long that takes)
    assert await _until(lambda: sum(r["kind"] == "good" and r["status"] == 200 for r in results) >= CLIENTS), \
        [r["status"] for r in results]
    t_stopping = time.monotonic()
    await asyncio.to_thread(lake.stop)
    t_down = time.monotonic()
    await asyncio.sleep(DOWN_S)
    t_starting = time.monotonic()
    await asyncio.to_thread(lake.start)
    t_up = time.monotonic()
    # keep going until the server has answered explorations again for 2 s (or give up after 30 s)
    deadline = t_up + 30
    while time.monotonic() < deadline:
        ok_after = [r for r in results if r["kind"] == "good" and r["sent"] > t_up and r["status"] == 200]
        if ok_after and time.monotonic() - min(r["done"] for r in ok_after) > 2.0:
            break
        await asyncio.sleep(0.1)
    stop.set()
    await asyncio.gather(*tasks)

    # every answer is an envelope with an expected status: never a 500, never a hang
    assert {r["status"] for r in results} <= {200, 400, 503}, {r["status"] for r in results}
    for r in results:
        env = r["env"]
        if r["kind"] == "typo":
            assert (r["status"], env["error"]["code"]) == (400, "EX201")
        elif r["status"] == 503:
            err = env["error"]
            assert (err["type"], err["subtype"], err["code"]) == ("network", "UPSTREAM_UNAVAILABLE", "EX601")
            assert "retry" in err["hint"]
        else:
            assert r["status"] == 200 and env["meta"]["rows"] == 5, env

    before = [r for r in results if r["kind"] == "good" and r["done"] < t_stopping]
    down = [r for r in results if r["kind"] == "good" and t_down < r["sent"] and r["done"] < t_starting]
    typos_down = [r for r in results if r["kind"] == "typo" and t_down < r["sent"] and r["done"] < t_starting]
    assert before and all(r["status"] == 200 for r in before)
    assert down and all(r["status"] == 503 for r in down)
    assert typos_down and all(r["status"] == 400 for r in typos_down)  # no database needed

    # recovered, and stays recovered: after the first success, every exploration succeeds
    after = sorted((r for r in results if r["kind"] == "good" and r["sent"] > t_up), key=lambda r: r["sent"])
    first_ok = next((i for i, r in enumerate(after) if r["status"] == 200), None)
    assert first_ok is not None, f"no exploration succeeded in the 30 s after the restart: {[r['status'] for r in after]}"
    recovery_s = after[first_ok]["done"] - t_up
    assert all(r["status"] == 200 for r in after[first_ok:]), [r["status"] for r in after[first_ok:]]
    print(f"\nrequests {len(results)}; 503 while down {len(down)}; recovered {recovery_s:.2f} s after the restart")

    # connections: none left busy once the last answers are in, no more than the pool's size
    def busy():
        return [a for a in lake.activity("ontoos-explore") if a["state"] in ACTIVE_STATES]

    assert await _until(lambda: not busy()), busy()
    explorer = lake.activity("ontoos-explore")
    assert len(explorer) <= 4, explorer
    assert clean(srv.stop())
    assert await _until(lambda: lake.activity() == []), lake.activity()  # the pool's and the audit writer's are gone

    # the audit: one event per request, the outage's answers included
    events = lake.events()
    assert sorted(e["id"] for e in events) == sorted(r["env"]["meta"]["exploration_id"] for r in results)
    assert sum(e["error_code"] == "EX601" for e in events) == sum(r["status"] == 503 for r in results)
    assert lake.gaps() == []
    assert "Traceback" not in srv.stderr()
