"""The agents' surface against its peers: one PostgreSQL, four questions, every contender in one run.

    .venv/bin/python -m benchmarks.mcp_peers             # scale 25 (1.05M rows); --quick: scale 1, few calls

Contenders, on one PostgreSQL (the demo lake on loopback TCP, PostgreSQL 16 of pgserver's binaries, so
Toolbox can reach it too):

  floor        psycopg, the compiled SQL with its parameters, rows fetched (what any server adds to)
  rest         ontoos POST /api/v1/explore (the JSON form), httpx2 keep-alive
  mcp_json     ontoos tools/call ontoos_explore with the JSON form, the official MCP client
  mcp_text     ontoos tools/call ontoos_explore with the text form
  mcp_named    ontoos tools/call of the question's named-query tool (ontoos_q_<id>), where it has one
  toolbox      Google MCP Toolbox (the Go binary of the npm package @toolbox-sdk/server), a `postgres-sql`
               tool running the very statement ontoos compiles, its values bound; skipped with a note
               when npm is not there

Questions: a filtered scan (LIMIT 50), a join with an aggregate, a 150-value IN list, a 5,000-row
answer. Measured: p50/p99 at 1 client (rounds interleaved, the order rotated), calls/s at 16
clients and the server process's CPU per call (its threads' time from /proc, `cpu_delta`), each the median of rotated
16-client blocks, and the bytes of one answer on the wire. Results: results/mcp_peers.{json,md}
(quick: mcp_peers-quick).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import hashlib
import json
import os
import secrets
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from .common import CONTRACT_PATH, log, stamped, summary_ms, write_results
from .server_bench import _free_port, _ontoos, cpu_seconds

PEERS = Path(__file__).resolve().parent / ".data" / "peers"
TOOLBOX_VERSION = "1.12.0"
IN_VALUES = [f"svc-{i:03d}" for i in range(150)]


@dataclass(frozen=True)
class Question:
    name: str
    text: str
    form: dict[str, Any]  # the JSON form of the same exploration
    named: bool = True  # served as a named-query tool too
    share: float = 1.0  # of the calls of a block, at 1 client and at 16 (a slow question needs fewer)


QUESTIONS = [
    Question("scan", "explore workloads fields name, namespace, kind where namespace = 'prod-fp' limit 50",
             {"dataset": "workloads", "fields": ["name", "namespace", "kind"], "filter": "namespace = 'prod-fp'",
              "limit": 50}),
    Question("join_aggregate", "explore workloads via containers fields namespace, sum(containers.cpu_millis) as cpu "
                               "group by namespace order by cpu desc limit 10",
             {"dataset": "workloads", "relations": ["containers"],
              "fields": ["namespace", "sum(containers.cpu_millis) as cpu"], "group_by": ["namespace"],
              "order_by": ["cpu desc"], "limit": 10}, share=0.25),
    Question("in_list_150", "explore workloads fields name, namespace where name in ("
             + ", ".join(f"'{v}'" for v in IN_VALUES) + ") limit 200",
             {"dataset": "workloads", "fields": ["name", "namespace"],
              "filter": "name in (" + ", ".join(f"'{v}'" for v in IN_VALUES) + ")", "limit": 200}, named=False),
    Question("rows_5000", "explore containers fields container_id, workload_id, name, image_id, cpu_millis, memory_mb "
                          "limit 5000",
             {"dataset": "containers", "fields": ["container_id", "workload_id", "name", "image_id", "cpu_millis",
                                                  "memory_mb"], "limit": 5000}, share=0.25),
]


def _pg_type(value: Any) -> str:
    return "boolean" if isinstance(value, bool) else "integer" if isinstance(value, int) else \
        "float" if isinstance(value, float) else "string"


@dataclass
class Compiled:
    """What ontoos compiles a question to: the SQL, its values, and the named-query entry made of it."""

    sql: str
    params: tuple
    entry: dict[str, Any] = field(default_factory=dict)


def compile_all(contract) -> dict[str, Compiled]:
    from ontoos_explore.compiler import json_value
    from ontoos_explore.pipeline import compile_exploration

    out = {}
    for q in QUESTIONS:
        c = compile_exploration(q.text, contract, "admin")
        entry = {"id": f"bench_{q.name}", "title": q.name, "status": "approved", "read_sets": ["published"],
                 "parameters": [], "sql": c.sql, "bind": [], "columns": list(c.columns), "max_rows": c.limit}
        for i, (slot, value) in enumerate(zip(c.slots, c.params)):
            if slot.caller:
                entry["parameters"].append({"name": f"p{i + 1}", "type": slot.type})
                entry["bind"].append(f"p{i + 1}")
            else:
                entry["bind"].append({"value": json_value(value), "type": slot.type})
        out[q.name] = Compiled(c.sql, tuple(c.params), entry)
    return out


# ---------------------------------------------------------------- the servers


class Lake:
    """The demo lake on a PostgreSQL of its own that listens on loopback TCP (the test suite's topology)."""

    def __init__(self, contract, scale: float) -> None:
        from .replicas import lake_server

        t0 = time.perf_counter()
        self.pg = lake_server("peers", contract, scale, ("audit",))
        with psycopg.connect(self.pg.dsn("lake")) as conn:
            self.version = conn.execute("SHOW server_version").fetchone()[0]
        self.dsn, self.audit_dsn = self.pg.dsn("lake"), self.pg.dsn("audit")
        self.setup_s = round(time.perf_counter() - t0, 1)

    def cpu_s(self) -> dict[str, float]:
        """The CPU time of this PostgreSQL's processes alive now, to the nanosecond, by what they work for:
        `lake`, the backends of the explorations' database (every contender's queries), `audit`, those of
        the audit's, `other`, the rest (the background workers)."""
        try:
            postmaster = int((self.pg.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return {}
        return children_cpu_s(postmaster, by_title={"lake": " lake ", "audit": " audit "})

    def close(self) -> None:
        self.pg.destroy()


class Process:
    """A server subprocess, its CPU time and its end."""

    def __init__(self, cmd: list[str], env: dict[str, str], workdir: Path, port: int, health: str) -> None:
        self.port, self.cmd = port, cmd
        self.err_path = workdir / f"{Path(cmd[0]).name}.stderr.log"
        self._err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._err, stderr=self._err, stdin=subprocess.DEVNULL,
                                     cwd=workdir)
        deadline = time.monotonic() + 90
        while True:
            with contextlib.suppress(OSError):
                import http.client

                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", health)
                if c.getresponse().status < 500:
                    break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{cmd[0]} did not start:\n{self.err_path.read_text()[-2000:]}")
            time.sleep(0.2)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cpu_s(self) -> tuple[float, float]:
        """(its threads' time on a CPU to the nanosecond, from /proc/<pid>/task/*/schedstat; utime+stime
        in clock ticks, 10 ms, from /proc/<pid>/stat, which counts threads that have ended too)."""
        return schedstat_seconds(self.proc.pid), cpu_seconds(self.proc.pid) or 0.0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self._err.close()


def schedstat_seconds(pid: int) -> float:
    total = 0
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
    return total / 1e9


def children_cpu_s(parent: int, by_title: dict[str, str] | None = None) -> dict[str, float]:
    """The CPU time of `parent`'s child processes alive now (each one's threads, to the nanosecond), by
    the first name of `by_title` whose text its title holds (a PostgreSQL backend's says its database:
    "postgres: user lake 127.0.0.1(5432) idle"), else under `other`."""
    total: dict[str, float] = {name: 0.0 for name in [*(by_title or {}), "other"]}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                # the parent's pid: the second field after the command's closing parenthesis
                if int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1]) != parent:
                    continue
                title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
                name = next((n for n, text in (by_title or {}).items() if text in title), "other")
                total[name] += schedstat_seconds(int(pid))
    return total


def cpu_delta(before: tuple[float, float], after: tuple[float, float]) -> float:
    """A block's CPU: the threads' nanoseconds, unless the ticks say more by two (a thread ended in
    between, and its time went with it): then the ticks. A block of 400 calls of 1 ms is 400 ms of CPU,
    which ticks of 10 ms read only to some 5%."""
    precise, coarse = after[0] - before[0], after[1] - before[1]
    return coarse if coarse > precise + 0.02 else precise


def start_ontoos(lake: Lake, compiled: dict[str, Compiled], workdir: Path) -> tuple[Process, str]:
    token = secrets.token_urlsafe(24)
    config = workdir / "server.yaml"
    # 16 clients at once, as one principal: its in-flight cap raised to them (the pool stays the default)
    config.write_text("max_in_flight: 16\nprincipals:\n  bench: {role: admin, token_sha256: \"%s\", "
                      "rate_limit: false}\n" % hashlib.sha256(token.encode()).hexdigest(), encoding="utf-8")
    registry = workdir / "queries.yaml"
    registry.write_text(json.dumps({"queries": [c.entry for q, c in compiled.items()
                                                if next(x for x in QUESTIONS if x.name == q).named]}), encoding="utf-8")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
    env.update(ONTOOS_DSN=lake.dsn, ONTOOS_AUDIT_DSN=lake.audit_dsn, ONTOOS_DATA_DIR=str(workdir / "unused"),
               PYTHONUNBUFFERED="1")
    cmd = [_ontoos(), "serve", "--http", f"127.0.0.1:{port}", "--config", str(config), "--queries", str(registry)]
    return Process(cmd, env, workdir, port, "/healthz"), token


def toolbox_binary() -> Path | None:
    """The Toolbox binary of the npm package (installed under benchmarks/.data/peers once), or None."""
    found = PEERS / "node_modules" / "@toolbox-sdk" / "server-linux-x64" / "bin" / "toolbox"
    if found.exists():
        return found
    if shutil.which("npm") is None:
        return None
    PEERS.mkdir(parents=True, exist_ok=True)
    log(f"  installing @toolbox-sdk/server@{TOOLBOX_VERSION} with npm")
    done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(PEERS),
                           f"@toolbox-sdk/server@{TOOLBOX_VERSION}"], capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not found.exists():
        log(f"  npm could not install Toolbox: {done.stderr[-500:]}")
        return None
    return found


def start_toolbox(binary: Path, lake: Lake, compiled: dict[str, Compiled], workdir: Path) -> Process:
    """Toolbox with one `postgres-sql` tool per question: ontoos's compiled statement, every value a parameter."""
    import yaml

    tools = {}
    for name, c in compiled.items():
        tools[f"q_{name}"] = {"kind": "postgres-sql", "source": "lake", "description": name, "statement": c.sql,
                              "parameters": [{"name": f"p{i + 1}", "type": _pg_type(v), "description": f"${i + 1}"}
                                             for i, v in enumerate(c.params)]}
    config = {"sources": {"lake": {"kind": "postgres", "host": "127.0.0.1", "port": str(lake.pg.port),
                                   "database": "lake", "user": "postgres", "password": "unused"}},
              "tools": tools}
    path = workdir / "tools.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    port = _free_port()
    cmd = [str(binary), "--config", str(path), "-a", "127.0.0.1", "-p", str(port), "--disable-version-check",
           "--disable-reload"]
    return Process(cmd, dict(os.environ), workdir, port, "/")


# ---------------------------------------------------------------- the clients


@contextlib.asynccontextmanager
async def mcp_session(base: str, token: str | None):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"} if token else None)
    async with http, Client(streamable_http_client(base + "/mcp", http_client=http)) as c:
        yield c


def _calls(kind: str, q: Question, c: Compiled) -> tuple[str, dict[str, Any]] | None:
    """(tool, arguments) of an MCP contender for a question (None: it has no way to ask it)."""
    if kind == "mcp_json":
        return "ontoos_explore", q.form
    if kind == "mcp_text":
        return "ontoos_explore", {"query": q.text}
    if kind == "mcp_named":
        if not q.named:
            return None
        return f"ontoos_q_bench_{q.name}", {p["name"]: json_of(c.params[int(p["name"][1:]) - 1])
                                          for p in c.entry["parameters"]}
    if kind == "toolbox":
        return f"q_{q.name}", {f"p{i + 1}": json_of(v) for i, v in enumerate(c.params)}
    raise ValueError(kind)


def json_of(v: Any) -> Any:
    return v if isinstance(v, (bool, int, float, str)) or v is None else str(v)


@contextlib.asynccontextmanager
async def caller(kind: str, q: Question, c: Compiled, servers: dict[str, Any]):
    """An async function making one call of `kind` for `q` (on a connection or session of its own)."""
    if kind == "floor":
        async with await psycopg.AsyncConnection.connect(servers["lake"].dsn, autocommit=True,
                                                         cursor_factory=psycopg.AsyncRawCursor) as conn:  # $n
            async def call():
                cur = await conn.execute(c.sql, c.params, prepare=True)
                return await cur.fetchall()
            yield call
        return
    if kind == "rest":
        import httpx2

        ontoos, token = servers["ontoos"]
        async with httpx2.AsyncClient(base_url=ontoos.base, headers={"Authorization": f"Bearer {token}"},
                                      timeout=60) as http:
            async def call():
                r = await http.post("/api/v1/explore", json=q.form)
                if r.status_code != 200:
                    raise RuntimeError(f"REST {r.status_code}: {r.text[:300]}")
                return r
            yield call
        return
    tool, args = _calls(kind, q, c)
    base, token = (servers["toolbox"].base, None) if kind == "toolbox" else (servers["ontoos"][0].base,
                                                                              servers["ontoos"][1])
    async with mcp_session(base, token) as session:
        async def call():
            r = await session.call_tool(tool, args)
            if r.is_error:
                raise RuntimeError(f"{kind} {tool}: {r.content[0].text[:300] if r.content else r}")
            return r
        yield call


def contenders(q: Question, servers: dict[str, Any]) -> list[str]:
    out = ["floor", "rest", "mcp_json", "mcp_text"]
    if q.named:
        out.append("mcp_named")
    if "toolbox" in servers:
        out.append("toolbox")
    return out


def rotated(kinds: list[str], r: int) -> list[str]:
    """Round `r`'s order: each contender first once every len(kinds) rounds."""
    return kinds[r % len(kinds):] + kinds[: r % len(kinds)]


def server_of(kind: str, servers: dict[str, Any]) -> Process | None:
    return None if kind == "floor" else servers["toolbox"] if kind == "toolbox" else servers["ontoos"][0]


async def one_client(q: Question, c: Compiled, servers: dict[str, Any], calls: int, rounds: int) -> dict[str, Any]:
    """p50/p99 of each contender at 1 client: `rounds` blocks of `calls`, the contenders' order rotated;
    and where a call's time goes, which at 1 client is all on its path: the CPU a call of the client (this
    process), the server and PostgreSQL (all its processes), each the median over the blocks."""
    kinds = contenders(q, servers)
    samples: dict[str, list[float]] = {k: [] for k in kinds}
    blocks: dict[str, list[list[float | None]]] = {k: [] for k in kinds}
    lake: Lake = servers["lake"]
    async with contextlib.AsyncExitStack() as stack:
        fns = {k: await stack.enter_async_context(caller(k, q, c, servers)) for k in kinds}
        for fn in fns.values():  # warm-up: imports, pools, prepared statements, caches
            for _ in range(10):
                await fn()
        for r in range(rounds):
            for k in rotated(kinds, r):
                gc.collect()
                fn, clock, proc = fns[k], time.perf_counter, server_of(k, servers)
                block: list[float] = []
                cpu0 = _cpus(proc, lake)
                for _ in range(calls):
                    t0 = clock()
                    await fn()
                    block.append(clock() - t0)
                cpu1 = _cpus(proc, lake)
                samples[k] += block
                blocks[k].append([round(statistics.median(block) * 1000, 3),
                                  *(None if a is None else round((b - a) / calls * 1000, 3) for a, b in zip(cpu0, cpu1))])
    out = {}
    for k, v in samples.items():
        out[k] = summary_ms(v)
        out[k]["cpu_ms_per_call"] = {part: _median(b[i + 1] for b in blocks[k]) for i, part in enumerate(CPU_PARTS)}
        out[k]["blocks"] = blocks[k]  # [p50 ms, then the CPU ms a call of each of CPU_PARTS] per block
    return out


# Where a call's CPU goes at 1 client: this process (the client), the server, PostgreSQL's backends of the
# lake (the queries, on the call's path), of the audit database (batched, off it), and its other processes.
CPU_PARTS = ("client", "server", "pg_lake", "pg_audit", "pg_other")


def cpu_split(cpu: dict[str, float | None] | None) -> str:
    """`client / server / lake, audit, other` (ms a call), as the tables show it."""
    if not cpu:
        return "-"
    v = ["-" if cpu.get(part) is None else f"{cpu[part]:.3f}" for part in CPU_PARTS]
    return f"{v[0]} / {v[1]} / {v[2]}, {v[3]}, {v[4]}"


def _cpus(proc: Process | None, lake: Lake) -> tuple[float | None, ...]:
    pg = lake.cpu_s()
    return (time.process_time(), proc.cpu_s()[0] if proc else None,
            pg.get("lake"), pg.get("audit"), pg.get("other"))


def _median(values) -> float | None:
    got = [v for v in values if v is not None]
    return round(statistics.median(got), 3) if got else None


async def sixteen(q: Question, c: Compiled, servers: dict[str, Any], per_client: int,
                  rounds: int) -> dict[str, Any]:
    """calls/s with 16 clients at once, and the server's CPU per call: `rounds` blocks of each contender,
    the order rotated as at 1 client, each figure the median over its blocks (a block alone is one
    sample of a shared machine's noise)."""
    kinds = contenders(q, servers)
    blocks: dict[str, list[tuple[float, float | None]]] = {k: [] for k in kinds}
    async with contextlib.AsyncExitStack() as stack:
        fns = {k: [await stack.enter_async_context(caller(k, q, c, servers)) for _ in range(16)] for k in kinds}
        for many in fns.values():  # warm-up: every session, connection and cache
            await asyncio.gather(*(fn() for fn in many))

        async def run(fn, kind):
            for _ in range(per_client):
                try:
                    await fn()
                except Exception as e:  # said plainly: it would reach the run nested in the sessions' task groups
                    log(f"    {kind} failed at 16 clients: {e!r:.600}")
                    raise

        for r in range(rounds):
            for k in rotated(kinds, r):
                proc = server_of(k, servers)
                gc.collect()
                cpu0, t0 = (proc.cpu_s() if proc else None), time.perf_counter()
                await asyncio.gather(*(run(fn, k) for fn in fns[k]))
                wall, n = time.perf_counter() - t0, 16 * per_client
                cpu = cpu_delta(cpu0, proc.cpu_s()) if proc else None
                blocks[k].append((n / wall, cpu / n * 1000 if cpu else None))
    out = {}
    for k, got in blocks.items():
        cpus = [c for _, c in got if c is not None]
        out[k] = {"calls_per_s": round(statistics.median(r for r, _ in got), 1),
                  "server_cpu_ms_per_call": round(statistics.median(cpus), 3) if cpus else None,
                  "blocks": [[round(r, 1), None if c is None else round(c, 3)] for r, c in got]}
    return out


async def wire_bytes(kind: str, q: Question, c: Compiled, servers: dict[str, Any]) -> int | None:
    """The bytes of one answer's HTTP body (REST; MCP: the tools/call response as sent, SSE or JSON)."""
    import httpx2

    if kind == "floor":
        return None
    if kind == "rest":
        ontoos, token = servers["ontoos"]
        async with httpx2.AsyncClient(timeout=60) as http:
            r = await http.post(ontoos.base + "/api/v1/explore", json=q.form,
                                headers={"Authorization": f"Bearer {token}"})
            return len(r.content)
    tool, args = _calls(kind, q, c)
    proc = server_of(kind, servers)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if kind != "toolbox":
        headers["Authorization"] = f"Bearer {servers['ontoos'][1]}"
    async with httpx2.AsyncClient(timeout=60) as http:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
        r = await http.post(proc.base + "/mcp", json=init, headers=headers)
        if sid := r.headers.get("mcp-session-id"):
            headers["mcp-session-id"] = sid
        headers["mcp-protocol-version"] = "2025-06-18"
        await http.post(proc.base + "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                        headers=headers)
        r = await http.post(proc.base + "/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": args}})
        return len(r.content)


async def bench(servers: dict[str, Any], compiled: dict[str, Compiled], counts: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for q in QUESTIONS:
        c = compiled[q.name]
        log(f"  {q.name}")
        # the p50 of a fast question is a target: ten rotated blocks of its calls (a slow one's share of them)
        res = {"one_client": await one_client(q, c, servers, max(10, round(counts["calls"] * q.share)),
                                              counts["one_rounds"])}
        res["sixteen"] = await sixteen(q, c, servers, max(2, round(counts["per_client"] * q.share)),
                                       counts["rounds"])
        res["bytes"] = {k: await wire_bytes(k, q, c, servers) for k in contenders(q, servers)}
        for k in contenders(q, servers):
            one, many = res["one_client"][k], res["sixteen"][k]
            log(f"    {k:10s} p50 {one['p50_ms']:7.2f} ms  p99 {one['p99_ms']:7.2f} ms  x16 {many['calls_per_s']:7.1f}/s"
                f"  cpu {many['server_cpu_ms_per_call'] or 0:6.2f} ms/call  bytes {res['bytes'][k] or 0}"
                f"  at 1 client {cpu_split(one['cpu_ms_per_call'])}")
        out[q.name] = res
    return out


def markdown(res: dict[str, Any]) -> str:
    lines = [f"# MCP and its peers ({res['date']}, commit {res.get('commit', '?')})", "",
             f"One PostgreSQL {res['database']['server_version']} on loopback TCP, the demo lake at scale "
             f"{res['database']['scale']:g}; the official MCP client for every MCP server; 2 shared cores (the "
             "load generator shares them). Toolbox: " + (res["toolbox"] or "not run") + ".", ""]
    for name, r in res["questions"].items():
        lines += [f"## {name}", "", "| contender | p50 ms (1 client) | p99 ms | calls/s (16 clients) | server CPU ms/call "
                  "| bytes | CPU ms/call at 1 client: client / server / PostgreSQL (lake, audit, other) |", "|---|---|---|---|---|---|---|"]
        for k, one in r["one_client"].items():
            many = r["sixteen"][k]
            split = cpu_split(one.get("cpu_ms_per_call"))
            lines.append(f"| {k} | {one['p50_ms']:.2f} | {one['p99_ms']:.2f} | {many['calls_per_s']:.0f} | "
                         f"{many['server_cpu_ms_per_call'] if many['server_cpu_ms_per_call'] is not None else '-'} | "
                         f"{r['bytes'][k] if r['bytes'][k] is not None else '-'} | {split or '-'} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.mcp_peers", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="scale 1, few calls: a smoke run (results/mcp_peers-quick)")
    p.add_argument("--scale", type=float, help="the demo scale (default 25; quick 1)")
    p.add_argument("--no-toolbox", action="store_true", help="leave Toolbox out")
    args = p.parse_args(argv)
    from ontoos_explore.contract import load_contract

    counts = ({"calls": 20, "one_rounds": 2, "rounds": 2, "per_client": 10} if args.quick
              else {"calls": 60, "one_rounds": 10, "rounds": 5, "per_client": 25})
    scale = args.scale or (1 if args.quick else 25)
    contract = load_contract(CONTRACT_PATH)
    compiled = compile_all(contract)
    workdir = PEERS / "run"
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    log(f"mcp_peers: the lake at scale {scale:g}")
    lake = Lake(contract, scale)
    servers: dict[str, Any] = {"lake": lake}
    res: dict[str, Any] = stamped(database={"scale": scale, "server_version": lake.version, "setup_s": lake.setup_s},
                                  counts=counts, toolbox=None)
    try:
        servers["ontoos"] = start_ontoos(lake, compiled, workdir)
        binary = None if args.no_toolbox else toolbox_binary()
        if binary is not None:
            servers["toolbox"] = start_toolbox(binary, lake, compiled, workdir)
            res["toolbox"] = f"@toolbox-sdk/server {TOOLBOX_VERSION}"
        else:
            res["toolbox"] = "skipped (--no-toolbox, or npm could not install it)"
        res["questions"] = asyncio.run(bench(servers, compiled, counts))
    finally:
        for key in ("toolbox", "ontoos"):
            if key in servers:
                (servers[key][0] if key == "ontoos" else servers[key]).stop()
        lake.close()
    write_results("mcp_peers-quick" if args.quick else "mcp_peers", res, markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
