"""Load: `ontoos serve --http` under concurrent REST and MCP clients, audit on, checked end to end.

    .venv/bin/python -m benchmarks.load                 # 32 clients for 60 s -> results/load.json, load.md
    .venv/bin/python -m benchmarks.load --short         # 8 clients for 10 s -> results/load-short.*
    .venv/bin/python -m benchmarks.load --outage 20     # + PostgreSQL stopped 20 s mid-run -> results/load-outage.*
    .venv/bin/python -m benchmarks.load --short --outage 12                              # -> results/load-outage-short.*

The server runs as a subprocess (`ontoos serve --http` on loopback) against
the benchmarks' embedded PostgreSQL (benchmarks/db.py, the demo lakehouse at
scale 4, a data directory of its own), with the audit on, in a database of
its own in that cluster (`ontoos_load_audit`, made afresh each run, so every
event in it is this run's). The contract is the demo's plus one role,
`hasty` (a 100 ms time budget, no cost ceiling), so that a heavy exploration
is stopped by PostgreSQL's statement_timeout, and one, `frugal` (a cost
ceiling of 10,000), so that a many-to-many join is refused on its estimate.

Half the clients speak REST (httpx2, one keep-alive connection each), half
MCP (the official SDK client over streamable HTTP, one session per
principal). Each sends one request after another, drawn at random (seeded)
from a mix of answered explorations, refusals (typos, a secret column,
syntax, an unknown argument, relation and IN-list budgets, the cost budget,
no token) and explorations past their time budget. Checked and reported:

- every answer is the envelope its kind expects (status, code), counted by
  outcome; nothing else (no 500, no transport error, no leaked text);
- latency per surface and kind (p50, p99), requests/s;
- the explorer's connections in pg_stat_activity before, during, after the
  load (none active or idle in a transaction) and after shutdown (none);
- the server's VmRSS sampled every second (start, peak, end, VmHWM);
- after a clean shutdown, the audit holds exactly one event per request:
  the events' ids are the exploration_ids the clients received (a refusal
  before any tool runs, a 401, carries the id of its event too), and
  `ontoos_audit.gaps` is empty.

With --outage N, the exploration database is stopped N seconds into the
measured phase (for N seconds): requests that need it must be
UPSTREAM_UNAVAILABLE (EX601, 503) while it is down, the others answered as
usual, and after the restart the time to the first answered exploration is
the recovery time; from then on, every exploration must be answered.

With --standby, the lake is a primary and a hot standby on PostgreSQL's own
streaming replication (benchmarks/replicas.py, made with pg_basebackup); the
server reads from `standby,primary` (prefer-standby) and writes its audit to
the primary. Half-way through the measured load the standby is stopped
(`pg_ctl stop -m fast`) and started again --standby-down seconds later (15;
0 leaves it away): every answer must still be the expected one.

This is a check as much as a measurement: the exit status is 1 if any check
fails. Timings depend on a busy shared machine; read them as orders.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import hashlib
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python benchmarks/load.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    __package__ = "benchmarks"

import psycopg  # noqa: E402
import yaml  # noqa: E402
from psycopg.conninfo import make_conninfo  # noqa: E402

from benchmarks.common import CONTRACT_PATH, RESULTS, ROOT, log, machine, rss_kb, summary_ms, versions  # noqa: E402
from benchmarks.db import DATA, ensure_database  # noqa: E402
from benchmarks.replicas import Away, Embedded, Replicas  # noqa: E402
from benchmarks.server_bench import _free_port, _ontoos, cpu_seconds, wait_healthy  # noqa: E402

SCALE = 4.0
AUDIT_DB = "ontoos_load_audit"
HASTY_MS = 100
# the reader explores the published data with the viewer's budgets (the viewer itself keeps to named queries)
PRINCIPALS = {"load-analyst": "analyst", "load-reader": "reader", "load-hasty": "hasty", "load-frugal": "frugal"}
# each principal's queries at once: 32 clients share 4 principals, and the load measures throughput, not the
# cap (16 let a slow run's analyst clients be refused IN_FLIGHT); the cap itself is tested in tests/server
IN_FLIGHT = 32
# every client is one address here, as behind a balancer: 16 MCP clients' connections (a POST and a GET
# stream each, and more while the SDK reconnects) went past the default 64 with one process
CONNECTIONS_PER_CLIENT = 512
FRUGAL_COST = 10_000
LEAKS = ("Traceback", "SQLSTATE", "ONTOOS-SECRET-", "psycopg", "pg_catalog", "canceling statement", "pg_sleep")
HEAVY = ("explore workloads via cluster_hosts, containers fields namespace, "
         "count(distinct cluster_hosts.hostname) as hosts group by namespace order by hosts desc limit 5")
COSTLY = ("explore workloads via cluster_hosts fields namespace, count(distinct cluster_hosts.hostname) as hosts "
          "group by namespace order by hosts desc limit 5")  # planner cost ~20,000 (generic) to ~38,000 at scale 4


@dataclasses.dataclass(frozen=True)
class Kind:
    name: str
    principal: str | None  # None: no token
    tool: str
    args: dict[str, Any]
    status: int  # the REST status expected
    code: str  # "ok" or the error code expected
    db: str  # the database is needed: "always", "maybe" (a cost estimate may be cached), "never"
    weight: int
    rest_only: bool = False


KINDS = [
    Kind("ok_text", "load-analyst", "ontoos_explore",
         {"query": "explore workloads fields name, namespace, kind where namespace = 'prod-fp' order by name limit 50"},
         200, "ok", "always", 18),
    Kind("ok_join", "load-analyst", "ontoos_explore",
         {"dataset": "workloads", "relations": ["containers"], "fields": ["namespace", "sum(containers.cpu_millis) as cpu"],
          "group_by": ["namespace"], "order_by": ["-cpu"], "limit": 5}, 200, "ok", "always", 14),
    Kind("ok_reader", "load-reader", "ontoos_explore",
         {"dataset": "projects", "fields": ["name", "visibility", "star_count"],
          "filter": [{"field": "visibility", "op": "=", "value": "public"}], "order_by": ["-star_count"], "limit": 20},
         200, "ok", "always", 10),
    Kind("ok_catalog", "load-reader", "ontoos_catalog", {"dataset": "workloads"}, 200, "ok", "never", 5),
    Kind("typo", "load-analyst", "ontoos_explore", {"dataset": "workloads", "fields": ["name", "namspace"]},
         400, "EX201", "never", 8),
    Kind("secret", "load-analyst", "ontoos_explore", {"dataset": "workloads", "fields": ["name", "env_dump"]},
         400, "EX201", "never", 6),
    Kind("syntax", "load-analyst", "ontoos_explore", {"query": "explore workloads fields name where"},
         400, "EX101", "never", 6),
    Kind("bad_arg", "load-analyst", "ontoos_explore", {"dataset": "workloads", "feilds": ["name"]},
         400, "EX102", "never", 4),
    Kind("budget_relations", "load-reader", "ontoos_explore",
         {"query": "explore workloads via containers, project fields name limit 5"}, 403, "EX404", "never", 4),
    Kind("budget_in_list", "load-reader", "ontoos_explore",
         {"dataset": "workloads", "fields": ["name"], "filter": "replicas in (" + ", ".join(map(str, range(30))) + ")"},
         403, "EX403", "never", 4),
    Kind("budget_cost", "load-frugal", "ontoos_explore", {"query": COSTLY}, 403, "EX411", "maybe", 6),
    Kind("timeout", "load-hasty", "ontoos_explore", {"query": HEAVY}, 504, "EX410", "always", 2),
    Kind("no_token", None, "ontoos_explore", {"dataset": "workloads", "fields": ["name"]}, 401, "EX502", "never", 3,
         rest_only=True),
]
BY_NAME = {k.name: k for k in KINDS}


# ---------------------------------------------------------------- the database and the server


def load_contract_file(workdir: Path) -> Path:
    """The demo contract plus two roles: `hasty`, whose time budget any heavy exploration exceeds (and no
    cost ceiling, so PostgreSQL runs it), and `frugal`, whose cost ceiling a many-to-many join exceeds."""
    doc = yaml.safe_load(CONTRACT_PATH.read_text(encoding="utf-8"))
    doc["roles"]["hasty"] = {"read_sets": ["published", "engineering"], "max_rows": 100, "timeout_ms": HASTY_MS,
                             "max_relations": 2, "max_fields": 10, "max_predicates": 10, "max_in_list": 20}
    doc["roles"]["frugal"] = {"read_sets": ["published", "engineering"], "max_rows": 100, "timeout_ms": 5000,
                              "max_relations": 2, "max_fields": 10, "max_predicates": 10, "max_in_list": 20,
                              "max_cost": FRUGAL_COST}
    path = workdir / "load-contract.yaml"
    path.write_text("# benchmarks/load.py: contracts/demo.yaml plus the roles hasty and frugal\n"
                    + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def fresh_audit_db(dsn: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {AUDIT_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {AUDIT_DB}")
    return make_conninfo(dsn, dbname=AUDIT_DB)


def _proc_status(pid: int, key: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _childrencpu_seconds(ppid: int) -> float:
    """CPU seconds of a process and its live children (PostgreSQL: the postmaster and its backends)."""
    total = cpu_seconds(ppid) or 0.0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == ppid:
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _tree_rss(pid: int) -> int | None:
    """RSS of a process and its live children (a supervisor and its workers), kB."""
    total = rss_kb(pid)
    if total is None:
        return None
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _proc_status(int(entry), "PPid") == pid:
            total += rss_kb(int(entry)) or 0
    return total


def _fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


class Server:
    """`ontoos serve --http` on a free loopback port, with a principal per role and the audit on."""

    def __init__(self, dsn: str, audit_dsn: str, contract: Path, workdir: Path, workers: int = 1) -> None:
        self.port = _free_port()
        self.tokens = {p: f"{p}-{secrets.token_urlsafe(18)}" for p in PRINCIPALS}
        config = workdir / "server.yaml"
        config.write_text("principals:\n" + "".join(
            f'  {p}: {{role: {r}, max_in_flight: {IN_FLIGHT}, '
            f'token_sha256: "{hashlib.sha256(self.tokens[p].encode()).hexdigest()}"}}\n'
            for p, r in PRINCIPALS.items()), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
        env.update(ONTOOS_DSN=dsn, ONTOOS_AUDIT_DSN=audit_dsn, ONTOOS_CONTRACT=str(contract),
                   ONTOOS_DATA_DIR=str(workdir / "unused"), PYTHONUNBUFFERED="1",
                   ONTOOS_CONNECTIONS_PER_CLIENT=str(CONNECTIONS_PER_CLIENT))
        self.cmd = [_ontoos(), "serve", "--http", f"127.0.0.1:{self.port}",
                    "--config", str(config), *(["--workers", str(workers)] if workers > 1 else [])]
        self.stderr_path = workdir / "serve.stderr.log"
        self._err = open(self.stderr_path, "wb")
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(self.cmd, env=env, stdout=subprocess.DEVNULL, stderr=self._err,
                                     stdin=subprocess.DEVNULL, cwd=workdir)
        self._wait_healthy()
        self.ready_s = round(time.perf_counter() - t0, 2)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _wait_healthy(self, timeout: float = 90) -> None:
        wait_healthy(self.proc, self.port, timeout, self.stderr, self.stop)

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> tuple[int | None, float]:
        """SIGTERM, only to the process started here: a clean shutdown (it drains, the audit queue is
        flushed, exit 0; under --workers the supervisor passes it to each worker)."""
        t0 = time.perf_counter()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._err.close()
        return self.proc.returncode, round(time.perf_counter() - t0, 2)


def _pool(acts: dict[str, int]) -> int:
    return sum(n for k, n in acts.items() if k.startswith("ontoos-explore/"))


def _busy(acts: dict[str, int]) -> int:
    return sum(n for k, n in acts.items() if k.split("/", 1)[1] in ("active", "idle in transaction",
                                                                    "idle in transaction (aborted)"))


# ---------------------------------------------------------------- the clients


@dataclasses.dataclass
class Record:
    phase: str
    surface: str
    kind: str
    sent: float
    done: float
    status: int | str  # REST: the HTTP status; MCP: "result" or "tool-error"
    code: str  # "ok", an error code, or "transport"
    ident: str | None
    expected: bool
    why: str = ""


def judge(kind: Kind, surface: str, status: Any, env: Any, text: str, outage: bool) -> tuple[str, bool, str]:
    """(code, as expected?, why not) for one answer."""
    if not isinstance(env, dict) or "ok" not in env:
        return "no-envelope", False, text[:200]
    code = "ok" if env["ok"] else env.get("error", {}).get("code", "?")
    for marker in LEAKS:
        if marker in text:
            return code, False, f"leaks {marker!r}"
    if env["ok"]:
        data, meta = env.get("data"), env.get("meta", {})
        if not isinstance(data, dict) or not meta.get("exploration_id"):
            return code, False, "success without data or exploration_id"
        if kind.tool == "ontoos_explore" and not (isinstance(data.get("rows"), list) and data["rows"]):
            return code, False, "no rows"
    else:
        err = env["error"]
        if not all(err.get(k) for k in ("type", "subtype", "code", "message", "hint")):
            return code, False, "error without type, subtype, code, message or hint"
    want_status = kind.status
    want_code = kind.code
    if outage and kind.db != "never" and code == "EX601":
        want_status, want_code = 503, "EX601"
    if surface == "rest":
        if status != want_status:
            return code, False, f"status {status}, expected {want_status}"
    elif (status == "tool-error") != (want_code != "ok"):
        return code, False, f"{status}, expected {'a tool error' if want_code != 'ok' else 'a result'}"
    if code != want_code:
        return code, False, f"code {code}, expected {want_code}"
    return code, True, ""


class Client:
    """One client: a REST keep-alive connection, or MCP sessions (one per principal), requests in sequence."""

    def __init__(self, n: int, surface: str, srv: Server, seed: int, records: list[Record]) -> None:
        self.n, self.surface, self.srv, self.records = n, surface, srv, records
        self.rng = random.Random(seed * 1000 + n)
        self.kinds = [k for k in KINDS if surface == "rest" or not k.rest_only]
        self.weights = [k.weight for k in self.kinds]
        self.stack = contextlib.AsyncExitStack()
        self.http = None
        self.sessions: dict[str, Any] = {}
        self.session_stacks: dict[str, contextlib.AsyncExitStack] = {}  # one per MCP session: closed alone
        self.close_errors: list[str] = []

    async def __aenter__(self) -> Client:
        if self.surface == "rest":
            import httpx2

            self.http = await self.stack.enter_async_context(httpx2.AsyncClient(
                base_url=self.srv.base, timeout=60,
                limits=httpx2.Limits(max_connections=1, max_keepalive_connections=1)))
        return self

    async def __aexit__(self, *exc) -> None:
        for principal in list(self.session_stacks):
            await self._forget(principal)
        await self.stack.aclose()

    async def _session(self, principal: str):
        if principal not in self.sessions:
            from mcp import Client as MCPClient
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            stack = self.session_stacks[principal] = contextlib.AsyncExitStack()
            http_client = await stack.enter_async_context(
                create_mcp_http_client(headers={"Authorization": f"Bearer {self.srv.tokens[principal]}"}))
            self.sessions[principal] = await stack.enter_async_context(
                MCPClient(streamable_http_client(self.srv.base + "/mcp", http_client=http_client)))
        return self.sessions[principal]

    async def _forget(self, principal: str) -> None:
        """Close one MCP session (after a transport failure: the next call opens another); what closing
        it raises is kept as a finding, never ends the client."""
        self.sessions.pop(principal, None)
        stack = self.session_stacks.pop(principal, None)
        if stack is None:
            return
        try:
            await stack.aclose()
        except Exception as e:  # noqa: BLE001 - a broken session's exit: recorded, not raised
            self.close_errors.append(f"{type(e).__name__}: {str(e)[:200]}")

    async def send(self, kind: Kind) -> tuple[Any, Any, str]:
        """-> (status, envelope, raw text)."""
        if self.surface == "rest":
            headers = {"Authorization": f"Bearer {self.srv.tokens[kind.principal]}"} if kind.principal else {}
            if kind.tool == "ontoos_catalog":
                r = await self.http.get("/api/v1/catalog", params=kind.args, headers=headers)
            else:
                r = await self.http.post("/api/v1/explore", json=kind.args, headers=headers)
            try:
                return r.status_code, r.json(), r.text
            except ValueError:
                return r.status_code, None, r.text
        session = await self._session(kind.principal)
        result = await session.call_tool(kind.tool, kind.args)
        text = result.content[0].text if result.content else ""
        try:
            env = json.loads(text)
        except ValueError:
            env = None
        return ("tool-error" if result.is_error else "result"), env, text

    async def run(self, phase: str, until: float, outage_window) -> None:
        while time.monotonic() < until:
            kind = self.rng.choices(self.kinds, self.weights)[0]
            sent = time.monotonic()
            try:
                if self.surface == "mcp":  # opened outside the timeout's scope, so it closes in its own at the end
                    await self._session(kind.principal)
                async with asyncio.timeout(90):
                    status, env, text = await self.send(kind)
            except Exception as e:  # a transport failure is a finding, not a crash of the load
                done = time.monotonic()
                self.records.append(Record(phase, self.surface, kind.name, sent, done, "transport", "transport", None,
                                           False, f"{type(e).__name__}: {_first_cause(e)[:300]}"))
                if self.surface == "mcp":
                    await self._forget(kind.principal)
                await asyncio.sleep(0.05)
                continue
            done = time.monotonic()
            outage = outage_window(sent, done)
            code, ok, why = judge(kind, self.surface, status, env, text, outage)
            ident = (env.get("meta") or {}).get("exploration_id") if isinstance(env, dict) else None
            self.records.append(Record(phase, self.surface, kind.name, sent, done, status, code, ident, ok, why))


def _first_cause(e: BaseException) -> str:
    """The innermost error of an exception group (what the SDK's task group wraps), as text."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------- one run


@dataclasses.dataclass
class Outage(Away):
    """PostgreSQL itself stopped `after_s` into the measured load, for `down_s` (the times as `Away`'s)."""

    def overlaps(self, sent: float, done: float) -> bool:
        """Could this request have met the outage (until the end of the run after the restart: the pool
        reconnects on its own schedule, judged separately as the recovery)?"""
        return self.stopping is not None and done >= self.stopping


async def _sampler(srv: Server, lake, samples: list[dict], stop: asyncio.Event, t0: float) -> None:
    while not stop.is_set():
        acts = await asyncio.to_thread(lake.probe)  # None while the database is down (an outage scenario)
        samples.append({"t": round(time.monotonic() - t0, 1), "rss_kb": _tree_rss(srv.pid),
                        "cpu_s": _childrencpu_seconds(srv.pid), "fds": _fds(srv.pid),
                        "threads": _proc_status(srv.pid, "Threads"),
                        "pool": _pool(acts) if acts is not None else None,
                        "busy": _busy(acts) if acts is not None else None, "activity": acts})
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 1.0)


async def _outage(lake, outage: Outage, start_at: float) -> None:
    import pgserver

    pg = lake.pg
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))
    outage.stopping = time.monotonic()
    log(f"  outage: stopping PostgreSQL for {outage.down_s:g} s")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await asyncio.to_thread(pgserver.pg_ctl, ["-w", "stop", "-m", "fast"], pgdata=pg.pgdata, user=pg.system_user)
    outage.down = time.monotonic()
    await asyncio.sleep(outage.down_s)
    outage.starting = time.monotonic()
    await asyncio.to_thread(pg.ensure_postgres_running)
    outage.up = time.monotonic()
    log(f"  outage: PostgreSQL is up again ({outage.up - outage.starting:.1f} s to start)")


async def _load(srv: Server, lake, args, records: list[Record], samples: list[dict],
                outage: Outage | None, away) -> dict:
    t0 = time.monotonic()
    stop_sampling = asyncio.Event()
    sampler = asyncio.create_task(_sampler(srv, lake, samples, stop_sampling, t0))
    window = outage.overlaps if outage else (lambda sent, done: False)
    clients = [Client(n, "rest" if n % 2 == 0 else "mcp", srv, args.seed, records) for n in range(args.clients)]
    warm_until = time.monotonic() + args.warmup
    until = warm_until + args.seconds

    async def life(c: Client) -> None:  # one task per client: its MCP sessions open and close in it
        async with c:
            await c.run("warmup", warm_until, window)
            await c.run("load", until, window)

    tasks = [asyncio.create_task(life(c)) for c in clients]
    if outage is not None:
        tasks.append(asyncio.create_task(_outage(lake, outage, warm_until + outage.after_s)))
    if away is not None:
        tasks.append(asyncio.create_task(lake.take_away(away, warm_until + away.after_s)))
    await asyncio.gather(*tasks)
    closing = [e for c in clients for e in c.close_errors]
    if closing:
        log(f"  {len(closing)} MCP session(s) failed as they closed, e.g. {closing[0]}")
    marks = {"load_started": warm_until - t0, "load_ended": until - t0, "clients_closed": time.monotonic() - t0}
    # every client has closed its sessions; let the pool settle, then look
    await asyncio.sleep(2.0)
    stop_sampling.set()
    await sampler
    return marks


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def run(args) -> dict:
    mode = ("outage, " if args.outage else "") + ("standby away, " if args.standby else "") + \
        ("short" if args.short else "full")
    workdir = DATA / "load"
    workdir.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.timezone.utc)
    res: dict[str, Any] = {"meta": {"mode": mode, "date": started.isoformat(timespec="seconds"),
                                    "clients": args.clients, "seconds": args.seconds, "warmup_s": args.warmup,
                                    "seed": args.seed, "machine": machine(), "versions": versions(),
                                    "commit": _git_commit()}}
    from ontoos_explore import load_contract

    contract_path = load_contract_file(workdir)
    contract = load_contract(contract_path)
    log(f"load: {args.clients} clients for {args.seconds:g} s ({mode}), demo lakehouse at scale {SCALE:g}")
    if args.standby:
        lake = Replicas(contract, SCALE)
        res["database"] = lake.info
    else:
        dsn, res["database"] = ensure_database(contract, SCALE, log=log)
        from benchmarks.db import _servers

        lake = Embedded(dsn, _servers[-1])  # the pgserver handle ensure_database started (kept alive)
    try:
        return _run(args, res, lake, contract_path)
    finally:
        lake.close()


def _run(args, res: dict, lake, contract_path: Path) -> dict:
    started = dt.datetime.fromisoformat(res["meta"]["date"])
    audit_dsn = fresh_audit_db(lake.write_dsn)
    res["kinds"] = {k.name: {"principal": k.principal, "role": PRINCIPALS.get(k.principal), "tool": k.tool,
                             "args": k.args, "expect": f"{k.status} {k.code}", "weight": k.weight,
                             "rest_only": k.rest_only} for k in KINDS}
    def probe() -> dict[str, int]:  # fresh connections each time: the outage scenario breaks a kept one
        return lake.probe() or {}

    pg_logs_at = [path.stat().st_size for path in lake.logs()]
    srv = Server(lake.dsn, audit_dsn, contract_path, DATA / "load", args.workers)
    log(f"  server ready in {srv.ready_s} s (pid {srv.pid}, port {srv.port}, {args.workers} worker(s))")
    workers = f" --workers {args.workers}" if args.workers > 1 else ""
    res["server"] = {"command": f"ontoos serve --http 127.0.0.1:PORT --config server.yaml{workers}",
                     "ready_s": srv.ready_s, "workers": args.workers, "pool_max": 8 * args.workers,
                     "hasty_timeout_ms": HASTY_MS}
    time.sleep(0.5)
    conns: dict[str, Any] = {"idle": probe()}
    memory: dict[str, Any] = {"idle_kb": _tree_rss(srv.pid)}
    records: list[Record] = []
    samples: list[dict] = []
    outage = Outage(args.outage_after, args.outage) if args.outage else None
    away = Away(args.seconds / 2, args.standby_down) if args.standby else None
    pg_cpu = lambda: sum(_childrencpu_seconds(pid) or 0.0 for pid in lake.pids())  # noqa: E731
    cpu0, pg0, me0, wall0 = _childrencpu_seconds(srv.pid), pg_cpu(), os.times(), time.monotonic()
    try:
        marks = asyncio.run(_load(srv, lake, args, records, samples, outage, away))
        me1, pg1, wall1 = os.times(), pg_cpu(), time.monotonic()
        conns["after_load"] = probe()
        memory["end_kb"] = _tree_rss(srv.pid)
        memory["hwm_kb"] = _proc_status(srv.pid, "VmHWM")
        cpu1 = _childrencpu_seconds(srv.pid)
    finally:
        code, stop_s = srv.stop()
    conns["after_shutdown"] = probe()
    stderr = srv.stderr()
    res["server"] |= {"exit_code": code, "clean_exit": code in (0, -signal.SIGTERM), "shutdown_s": stop_s,
                      "cpu_s": round(cpu1 - cpu0, 1) if cpu0 is not None and cpu1 is not None else None,
                      "stderr_lines": len(stderr.splitlines()), "stderr_tracebacks": stderr.count("Traceback"),
                      "stderr_tail": stderr[-1500:]}
    res |= summarize(records, samples, marks, memory, conns, outage)
    if away is not None:
        res["standby"] = standby_summary(away, records)
    res["cpu"] = {"wall_s": round(wall1 - wall0, 1), "server_s": res["server"]["cpu_s"],
                  # (an outage or a standby taken away restarts PostgreSQL's processes: not counted then)
                  "postgres_s": None if outage or away else round(pg1 - pg0, 1),
                  "load_generator_s": round((me1.user + me1.system) - (me0.user + me0.system), 1),
                  "loadavg_end": [round(x, 2) for x in os.getloadavg()]}
    res["audit"] = reconcile(audit_dsn, records)
    res["postgres_log"] = postgres_log(list(zip(lake.logs(), pg_logs_at)), records)
    res["checks"] = checks(res, outage)
    res["meta"]["elapsed_s"] = round((dt.datetime.now(dt.timezone.utc) - started).total_seconds(), 1)
    return res


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def summarize(records: list[Record], samples: list[dict], marks: dict, memory: dict, conns: dict,
              outage: Outage | None) -> dict:
    load = [r for r in records if r.phase == "load"]
    wall = marks["load_ended"] - marks["load_started"]
    by_outcome: Counter = Counter()
    by_kind: dict[str, Counter] = defaultdict(Counter)
    unexpected: list[dict] = []
    t_first = min((r.sent for r in records), default=0.0)
    for r in records:
        status = r.status if r.surface == "rest" else ("tool error" if r.status == "tool-error" else "result")
        by_outcome[f"{r.surface} {status} {r.code}"] += 1
        by_kind[r.kind][f"{r.surface} {r.code}" + ("" if r.expected else " UNEXPECTED")] += 1
        if not r.expected and len(unexpected) < 30:
            unexpected.append({"surface": r.surface, "kind": r.kind, "status": r.status, "code": r.code,
                               "why": r.why, "at_s": round(r.sent - t_first, 2)})
    latency: dict[str, Any] = {}
    for surface in ("rest", "mcp", "all"):
        rs = [r for r in load if surface in ("all", r.surface)]
        if rs:
            latency[surface] = summary_ms([r.done - r.sent for r in rs]) | {
                "max_ms": round(max(r.done - r.sent for r in rs) * 1000, 1),
                "req_per_s": round(len(rs) / wall, 1)}
    for k in KINDS:
        for surface in ("rest", "mcp"):
            rs = [r.done - r.sent for r in load if r.kind == k.name and r.surface == surface]
            if rs:
                latency.setdefault("by_kind", {})[f"{k.name} {surface}"] = summary_ms(rs)
    rss = [s["rss_kb"] for s in samples if s["rss_kb"]]
    load_samples = [s for s in samples if marks["load_started"] <= s["t"] <= marks["load_ended"]]
    memory |= {"start_kb": load_samples[0]["rss_kb"] if load_samples else None,
               "peak_kb": max(rss) if rss else None, "samples": [[s["t"], s["rss_kb"]] for s in samples]}
    pools = [s["pool"] for s in samples if s["pool"] is not None]
    conns |= {"pool_peak": max(pools) if pools else None,
              "busy_peak": max((s["busy"] for s in samples if s["busy"] is not None), default=None),
              "fds": {"start": samples[0]["fds"] if samples else None, "peak": max((s["fds"] or 0) for s in samples),
                      "end": samples[-1]["fds"] if samples else None},
              "samples": [[s["t"], s["pool"], s["busy"]] for s in samples]}
    out = {
        "requests": {
            "total": len(records), "warmup": len(records) - len(load), "load": len(load),
            "load_wall_s": round(wall, 1), "req_per_s": round(len(load) / wall, 1),
            "by_surface": dict(Counter(r.surface for r in records)),
            "expected": sum(r.expected for r in records), "unexpected": sum(not r.expected for r in records),
            "by_outcome": dict(sorted(by_outcome.items())),
            "by_kind": {k: dict(sorted(v.items())) for k, v in by_kind.items()},
            "unexpected_examples": unexpected,
        },
        "latency_ms": latency,
        "memory": memory,
        "connections": conns,
        "marks_s": {k: round(v, 1) for k, v in marks.items()},
    }
    if outage is not None and outage.up is not None:
        t_first = records[0].sent
        db = sorted((r for r in records if BY_NAME[r.kind].db == "always" and r.sent >= outage.up), key=lambda r: r.sent)
        first_ok = next((r for r in db if r.code != "EX601" and r.code != "transport"), None)
        recovered_at = first_ok.done if first_ok else None
        during = [r for r in records if BY_NAME[r.kind].db == "always" and outage.down <= r.sent and r.done <= outage.starting]
        after = [r for r in db if recovered_at is not None and r.sent > recovered_at]
        no_db_down = [r for r in records if BY_NAME[r.kind].db == "never" and outage.down <= r.sent <= outage.starting]
        out["outage"] = {
            "stop_at_s": round(outage.stopping - t_first, 1), "stop_took_s": round(outage.down - outage.stopping, 2),
            "down_s": round(outage.starting - outage.down, 1), "start_took_s": round(outage.up - outage.starting, 2),
            "recovery_s": round(recovered_at - outage.up, 2) if recovered_at else None,
            "db_requests_while_down": len(during),
            "db_requests_while_down_ex601": sum(r.code == "EX601" for r in during),
            "db_requests_while_down_max_ms": round(max((r.done - r.sent for r in during), default=0) * 1000, 1),
            "no_db_requests_while_down": len(no_db_down),
            "no_db_requests_while_down_expected": sum(r.expected and r.code != "EX601" for r in no_db_down),
            "no_db_while_down_p99_ms": summary_ms([r.done - r.sent for r in no_db_down])["p99_ms"] if no_db_down else None,
            "ex601_after_recovery": sum(r.code == "EX601" for r in after),
            "ex601_total": sum(r.code == "EX601" for r in records),
        }
    return out


def standby_summary(away: Away, records: list[Record]) -> dict:
    """The requests sent while the standby was away, and after it was back."""
    t_first = min((r.sent for r in records), default=0.0)
    back = away.up or float("inf")
    during = [r for r in records if away.stopping is not None and away.stopping <= r.sent < back]
    return {"stop_at_s": round(away.stopping - t_first, 1) if away.stopping else None,
            "stop_took_s": round(away.down - away.stopping, 2) if away.down else None,
            "down_s": round((away.starting or away.down or 0) - (away.down or 0), 1) if away.starting else None,
            "requests_while_away": len(during), "unexpected_while_away": sum(not r.expected for r in during),
            "p50_p99_ms_while_away": summary_ms([r.done - r.sent for r in during]) if during else None}


def postgres_log(logs: list[tuple[Path, int]], records: list[Record]) -> dict:
    """What PostgreSQL says it cancelled during the run (every server's log, from `offset`): the
    statement timeouts are its own."""
    text = ""
    for path, offset in logs:
        with open(path, "rb") as f:
            f.seek(offset)
            text += f.read().decode("utf-8", "replace")
    timeouts = [r for r in records if r.code == "EX410"]
    return {"statement_timeout_cancels": text.count("canceling statement due to statement timeout"),
            "user_request_cancels": text.count("canceling statement due to user request"),
            "lock_timeout_cancels": text.count("canceling statement due to lock timeout"),
            "ex410_answers": len(timeouts),
            "ex410_slowest_ms": round(max((r.done - r.sent for r in timeouts), default=0) * 1000, 1)}


def reconcile(audit_dsn: str, records: list[Record]) -> dict:
    """The audit after the clean shutdown vs what the clients received."""
    with psycopg.connect(audit_dsn) as conn:
        ids = [i for (i,) in conn.execute("SELECT id FROM ontoos_audit.events").fetchall()]
        by = conn.execute("SELECT surface, coalesce(error_code, 'ok'), count(*) FROM ontoos_audit.events "
                          "GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
        outcomes = dict(conn.execute("SELECT outcome, count(*) FROM ontoos_audit.events GROUP BY 1").fetchall())
        reasons = dict(conn.execute("SELECT reason, count(*) FROM ontoos_audit.events WHERE reason IS NOT NULL "
                                    "GROUP BY 1").fetchall())
        gaps = conn.execute("SELECT reason, coalesce(sum(events), 0) FROM ontoos_audit.gaps GROUP BY 1").fetchall()
    sent_ids = [r.ident for r in records if r.ident]
    events_by = {f"{s} {c}": n for s, c, n in by}
    sent_by = Counter(f"{r.surface} {r.code}" for r in records)
    id_set, sent_set = set(ids), set(sent_ids)
    dropped = sum(n for _, n in gaps)
    return {
        "requests": len(records), "events": len(ids), "gaps": dict(gaps), "dropped_or_rejected": dropped,
        "balanced": len(records) == len(ids) + dropped,
        "duplicate_event_ids": len(ids) - len(id_set),
        "requests_with_id": len(sent_ids), "ids_missing_from_audit": len(sent_set - id_set),
        "events_without_a_known_id": len(id_set - sent_set),
        "requests_without_id": len(records) - len(sent_ids),
        "by_surface_and_code": {"events": events_by, "requests": dict(sorted(sent_by.items()))},
        "same_breakdown": events_by == dict(sent_by),
        "outcomes": outcomes, "reasons": reasons,
    }


def checks(res: dict, outage: Outage | None) -> dict[str, bool]:
    req, audit, conns, mem = res["requests"], res["audit"], res["connections"], res["memory"]
    out = {
        "every answer is the expected envelope": req["unexpected"] == 0,
        "server exited cleanly": res["server"]["clean_exit"],
        "no traceback on the server's stderr": res["server"]["stderr_tracebacks"] == 0,
        "audit: one event per request": audit["balanced"] and audit["events"] == audit["requests"]
        and audit["duplicate_event_ids"] == 0 and audit["ids_missing_from_audit"] == 0
        and audit["events_without_a_known_id"] == audit["requests_without_id"],
        "audit: same breakdown by surface and code": audit["same_breakdown"],
        "audit: nothing dropped": audit["dropped_or_rejected"] == 0,
        "pool within its size": (conns["pool_peak"] or 0) <= res["server"]["pool_max"],
        "no connection busy after the load": _busy(conns["after_load"]) == 0,
        "no connection left after shutdown": not conns["after_shutdown"],
        "every EX410 is PostgreSQL's statement_timeout (its log), none the client's cancel":
            res["postgres_log"]["statement_timeout_cancels"] == res["postgres_log"]["ex410_answers"]
            and res["postgres_log"]["user_request_cancels"] == 0,
        "memory bounded (end within 1.5x of start, peak < 512 MiB)":
            bool(mem["start_kb"]) and mem["end_kb"] <= 1.5 * mem["start_kb"] and mem["peak_kb"] < 512 * 1024,
    }
    if "standby" in res:
        w = res["standby"]
        out["standby: every request answered as expected while it was away"] = \
            w["requests_while_away"] > 0 and w["unexpected_while_away"] == 0
    if outage is not None:
        o = res.get("outage", {})
        out |= {
            "outage: database requests were EX601 while down": o.get("db_requests_while_down", 0) > 0
            and o["db_requests_while_down_ex601"] == o["db_requests_while_down"],
            "outage: the others were answered while down": o.get("no_db_requests_while_down", 0) > 0
            and o["no_db_requests_while_down_expected"] == o["no_db_requests_while_down"],
            "outage: recovered": o.get("recovery_s") is not None,
            "outage: no EX601 after recovery": o.get("ex601_after_recovery", 1) == 0,
        }
    return out


# ---------------------------------------------------------------- report


def markdown(res: dict) -> str:
    m, req, lat, mem, conns, audit = (res["meta"], res["requests"], res["latency_ms"], res["memory"],
                                      res["connections"], res["audit"])
    mc = m["machine"]
    mib = lambda kb: f"{kb / 1024:.0f} MiB" if kb else "-"  # noqa: E731
    lines = [
        f"# Load ({m['mode']}): {m['clients']} clients for {m['seconds']:g} s",
        "",
        f"{m['date']}, {mc.get('cpu_count')} CPUs ({mc.get('cpu_model', '?')}), load average {mc.get('loadavg_start')} "
        f"at start, commit {m['commit'][:10]}. `ontoos serve --http` against the demo lakehouse at scale "
        f"{res['database']['scale']:g} ({res['database']['total_rows']:,} rows, "
        f"{res['database'].get('topology', 'embedded PostgreSQL')} {res['database']['server_version']}), audit on (its own database), pool of {res['server']['pool_max']}. "
        f"Half the clients REST (httpx2), half MCP (the SDK client over streamable HTTP); each sends one request "
        f"after another from a seeded mix (`benchmarks/load.py`, KINDS). A shared 2-core machine: read the "
        f"timings as orders of magnitude.",
        "",
        "## Checks",
        "",
    ]
    lines += [f"- {'PASS' if ok else 'FAIL'}: {name}" for name, ok in res["checks"].items()]
    lines += ["", "## Requests", "",
              f"{req['total']:,} requests ({req['warmup']:,} in a {m['warmup_s']:g} s warm-up), "
              f"{req['load']:,} in {req['load_wall_s']:g} s measured: **{req['req_per_s']:,} req/s**; "
              f"{req['expected']:,} answered as expected, {req['unexpected']:,} not.", ""]
    lines += ["| surface | requests/s | p50 ms | p99 ms | max ms |", "|---|---|---|---|---|"]
    for s in ("rest", "mcp", "all"):
        if s in lat:
            x = lat[s]
            lines.append(f"| {s} | {x['req_per_s']:,} | {x['p50_ms']:.1f} | {x['p99_ms']:.1f} | {x['max_ms']:.1f} |")
    lines += ["", "| kind | expected | REST n | REST p50 / p99 ms | MCP n | MCP p50 / p99 ms |", "|---|---|---|---|---|---|"]
    for name, k in res["kinds"].items():
        cells = []
        for s in ("rest", "mcp"):
            x = lat.get("by_kind", {}).get(f"{name} {s}")
            cells += [f"{x['n']:,}", f"{x['p50_ms']:.1f} / {x['p99_ms']:.1f}"] if x else ["-", "-"]
        lines.append(f"| {name} | {k['expect']} | " + " | ".join(cells) + " |")
    lines += ["", "Outcomes (surface, status, code) over the whole run:", ""]
    lines += [f"- {k}: {n:,}" for k, n in req["by_outcome"].items()]
    if req["unexpected_examples"]:
        lines += ["", "Unexpected answers (first ones):", ""]
        lines += [f"- {u['surface']} {u['kind']}: {u['status']} {u['code']} ({u['why']}) at {u['at_s']} s"
                  for u in req["unexpected_examples"][:10]]
    if "outage" in res:
        o = res["outage"]
        lines += ["", "## Outage", "",
                  f"PostgreSQL stopped {o['stop_at_s']} s into the run (stop took {o['stop_took_s']} s), down "
                  f"{o['down_s']} s, {o['start_took_s']} s to start again. While down: "
                  f"{o['db_requests_while_down_ex601']:,} of {o['db_requests_while_down']:,} database requests were "
                  f"EX601/503 (slowest {o['db_requests_while_down_max_ms']:,} ms: the pool's wait); "
                  f"{o['no_db_requests_while_down_expected']:,} of {o['no_db_requests_while_down']:,} requests that "
                  f"need no database answered as usual (p99 {o['no_db_while_down_p99_ms']} ms). First answered "
                  f"exploration **{o['recovery_s']} s after the restart**; EX601 after that: "
                  f"{o['ex601_after_recovery']}."]
    if "standby" in res:
        w = res["standby"]
        during = w["p50_p99_ms_while_away"] or {}
        lines += ["", "## The standby taken away", "",
                  f"Stopped (`pg_ctl stop -m fast`) {w['stop_at_s']} s into the run (the stop took {w['stop_took_s']} s)"
                  + (f", away {w['down_s']} s, then started again" if w["down_s"] is not None else ", away to the end")
                  + f". Requests sent while it was away: {w['requests_while_away']:,}, answered other than expected: "
                  f"{w['unexpected_while_away']} (p50 {during.get('p50_ms', 0):.1f} ms, p99 {during.get('p99_ms', 0):.1f} ms)."]
    c = res["cpu"]
    lines += ["", f"CPU over the {c['wall_s']} s of load (2 cores, shared): the server {c['server_s']} s, PostgreSQL "
              f"{c['postgres_s']} s, this load generator (all {m['clients']} clients, one Python process) "
              f"{c['load_generator_s']} s; load average at the end {c['loadavg_end']}. Latencies are measured in the "
              f"clients, so they include the generator's own queueing."]
    lines += ["", "## Server", "",
              f"- ready in {res['server']['ready_s']} s; CPU {res['server']['cpu_s']} s over the run; clean exit "
              f"{res['server']['clean_exit']} ({res['server']['exit_code']}) in {res['server']['shutdown_s']} s",
              f"- VmRSS: idle {mib(mem['idle_kb'])}, load start {mib(mem['start_kb'])}, peak {mib(mem['peak_kb'])}, "
              f"end {mib(mem['end_kb'])} (VmHWM {mib(mem['hwm_kb'])})",
              f"- open file descriptors: start {conns['fds']['start']}, peak {conns['fds']['peak']}, "
              f"end {conns['fds']['end']}",
              f"- explorer connections (pg_stat_activity): idle server {_pool(conns['idle'])}, peak "
              f"{conns['pool_peak']} (pool max {res['server']['pool_max']}), busy peak {conns['busy_peak']}; after the "
              f"load {_pool(conns['after_load'])} ({_busy(conns['after_load'])} active or idle in transaction); after "
              f"shutdown {sum(conns['after_shutdown'].values())}",
              f"- PostgreSQL's log over the run: {res['postgres_log']['statement_timeout_cancels']} statements "
              f"cancelled by statement_timeout for {res['postgres_log']['ex410_answers']} EX410 answers (slowest "
              f"{res['postgres_log']['ex410_slowest_ms']} ms, budget {HASTY_MS} ms), "
              f"{res['postgres_log']['user_request_cancels']} cancelled by a client",
              "", "## Audit", "",
              f"After the clean shutdown: {audit['events']:,} events for {audit['requests']:,} requests; "
              f"dropped or rejected (ontoos_audit.gaps): {audit['dropped_or_rejected']}; duplicate ids "
              f"{audit['duplicate_event_ids']}; ids received by clients but missing from the audit "
              f"{audit['ids_missing_from_audit']}; events without an id a client saw {audit['events_without_a_known_id']} "
              f"(requests answered without an id: {audit['requests_without_id']}); breakdown by surface and code identical: "
              f"{audit['same_breakdown']}. Outcomes: "
              + ", ".join(f"{k} {v:,}" for k, v in sorted(audit["outcomes"].items())) + ".", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=32, help="concurrent clients, half REST, half MCP (default 32)")
    ap.add_argument("--seconds", type=float, default=60.0, help="measured load, after the warm-up (default 60)")
    ap.add_argument("--warmup", type=float, default=3.0, help="warm-up seconds, counted in the audit (default 3)")
    ap.add_argument("--short", action="store_true", help="8 clients for 10 s (a smoke run; results/load-short.*)")
    ap.add_argument("--outage", type=float, default=0.0, metavar="SECONDS",
                    help="stop PostgreSQL this long during the run (results/load-outage.*); longer than the "
                    "pool's wait (ONTOOS_POOL_TIMEOUT, 5 s) to see answers while it is down")
    ap.add_argument("--outage-after", type=float, default=10.0, help="seconds into the measured load (default 10)")
    ap.add_argument("--seed", type=int, default=8)
    ap.add_argument("--workers", type=int, default=1, help="serve --workers N (default 1: one process)")
    ap.add_argument("--standby", action="store_true",
                    help="a primary and a hot standby; the standby is taken away half-way (results/load-standby*)")
    ap.add_argument("--standby-down", type=float, default=15.0, metavar="SECONDS",
                    help="how long the standby stays away (default 15; 0: the rest of the run)")
    ap.add_argument("--out", help="result file stem under benchmarks/results (default: load, load-short, load-outage)")
    args = ap.parse_args(argv)
    if args.short:
        args.clients, args.seconds, args.warmup = min(args.clients, 8), min(args.seconds, 10.0), 1.0
        if args.outage:
            args.outage_after = min(args.outage_after, 3.0)
    if args.outage:  # long enough to see the recovery and what follows it
        args.seconds = max(args.seconds, args.outage_after + args.outage + 15.0)
    res = run(args)
    if args.standby and args.outage:
        ap.error("--standby and --outage are two different runs")
    stem = args.out or ("load" + ("-outage" if args.outage else "") + ("-standby" if args.standby else "")
                        + ("-short" if args.short else ""))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(res, indent=1, default=str) + "\n", encoding="utf-8")
    (RESULTS / f"{stem}.md").write_text(markdown(res), encoding="utf-8")
    failed = [name for name, ok in res["checks"].items() if not ok]
    log(f"  {res['requests']['total']:,} requests, {res['requests']['req_per_s']:,} req/s, "
        f"{res['requests']['unexpected']} unexpected; audit {res['audit']['events']:,} events; "
        f"RSS peak {res['memory']['peak_kb']} kB")
    log(f"  wrote benchmarks/results/{stem}.json and {stem}.md; "
        + ("all checks pass" if not failed else "FAILED: " + "; ".join(failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
