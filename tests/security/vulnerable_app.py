"""The CONTROL for the sqlmap scan: a deliberately SQL-injectable endpoint. Test tree only.

    CONTROL_DSN=... CONTROL_TOKEN=... python -m tests.security.vulnerable_app 127.0.0.1:PORT

It pastes the `name` it is given into SQL text and runs it on the same
PostgreSQL as the real server, so the scan can prove that sqlmap, with the
very options it uses against /api/v1/explore, finds an injection in this
setup: a scan that finds nothing anywhere proves nothing.

It mirrors the real endpoint's two shapes, behind the same bearer token
(a broken Authorization header makes the control fail, not pass):

    GET  /control/explore?dataset=workloads&name=<text>
    POST /control/explore  {"dataset": "workloads", "name": "<text>"}

and, like the real server, it answers an envelope-shaped body whose id and
timing change on every answer (so sqlmap sees the same "unstable" content
as on the real endpoint) and never relays PostgreSQL's error text (a
generic 500), so sqlmap has to find it blind (boolean or time based), not
from an error message. Its connection is READ ONLY and has a statement
timeout. `GET /control/stats` (no token) answers how many requests it served.

NEVER reuse this code anywhere else: it is the bug the real server must not have.
"""

from __future__ import annotations

import hmac
import json
import os
import sys
import threading
import time
import uuid

import psycopg
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

DSN = os.environ.get("CONTROL_DSN", "")
TOKEN = os.environ.get("CONTROL_TOKEN", "")

_lock = threading.Lock()
_served = {"requests": 0, "ok": 0, "db_error": 0, "refused": 0}


def _count(key: str) -> None:
    with _lock:
        _served["requests"] += 1
        _served[key] += 1


def _authorized(request: Request) -> bool:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), TOKEN.encode())


def _lookup(name: str) -> JSONResponse:
    # THE VULNERABILITY, on purpose: user text concatenated into SQL, run over the simple-query protocol.
    sql = ("SELECT name, namespace, kind FROM lake.k8s_workloads WHERE NOT is_deleted AND name = '"
           + name + "' ORDER BY workload_id LIMIT 5")
    t0 = time.perf_counter()
    try:
        with psycopg.connect(DSN, autocommit=True, connect_timeout=5,
                             options="-c default_transaction_read_only=on -c statement_timeout=15000") as conn:
            rows = conn.execute(sql).fetchall()
    except psycopg.Error:
        _count("db_error")
        return JSONResponse({"ok": False, "error": "internal error"}, status_code=500)  # no DB text
    _count("ok")
    # the real envelope's shape, with its per-answer id and timing: content that is never quite the same
    return JSONResponse({"ok": True, "data": {"columns": ["name", "namespace", "kind"], "rows": [list(r) for r in rows]},
                         "meta": {"exploration_id": uuid.uuid4().hex[:16], "rows": len(rows),
                                  "elapsed_ms": round((time.perf_counter() - t0) * 1000, 3)}})


def explore_get(request: Request) -> JSONResponse:  # sync: Starlette runs it in its thread pool
    if not _authorized(request):
        _count("refused")
        return JSONResponse({"ok": False, "error": "auth"}, status_code=401)
    return _lookup(request.query_params.get("name", ""))


async def explore_post(request: Request) -> JSONResponse:
    if not _authorized(request):
        _count("refused")
        return JSONResponse({"ok": False, "error": "auth"}, status_code=401)
    try:
        body = json.loads(await request.body())
        name = body["name"]
        if not isinstance(name, str):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        _count("refused")
        return JSONResponse({"ok": False, "error": "bad body"}, status_code=400)
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(_lookup, name)


def stats(request: Request) -> JSONResponse:
    with _lock:
        return JSONResponse(dict(_served))


def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


app = Starlette(routes=[
    Route("/control/explore", explore_get, methods=["GET"]),
    Route("/control/explore", explore_post, methods=["POST"]),
    Route("/control/stats", stats, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
])


def main(argv: list[str]) -> int:
    if not DSN or not TOKEN:
        sys.stderr.write("set CONTROL_DSN and CONTROL_TOKEN\n")
        return 2
    host, _, port = (argv[0] if argv else "127.0.0.1:0").rpartition(":")
    if host not in ("127.0.0.1", "localhost"):
        sys.stderr.write("the control binds to loopback only\n")
        return 2
    import uvicorn

    uvicorn.run(app, host=host, port=int(port), log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
