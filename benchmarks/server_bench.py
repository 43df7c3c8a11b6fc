"""Server path: `ontoos serve --http` as a subprocess, measured over loopback.

The server runs against the benchmark's database (ONTOOS_DSN) with a
temporary config holding one analyst token (audit on, as deployed). Measured,
for 1 and 16 concurrent clients, each client sending its requests one after
another on its own keep-alive connection:

  rest   POST /api/v1/explore {"query": ...} with httpx2 (the HTTP client mcp ships)
  mcp    tools/call ontoos_explore {"query": ...} through the SDK client
         (mcp.Client over streamable_http_client, bearer header)

Latency (median, p99) per request, requests/s over the whole phase, and the
server process's CPU time per request (utime+stime from /proc; PostgreSQL's
own backends are not included). Memory: VmRSS of the server process when
healthy, after a warm-up, and after all the load.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import http.client
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from .common import log, rss_kb, summary_ms

EXPLORATION = "explore workloads fields name, namespace, kind where namespace = 'prod-fp' limit 50"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ontoos() -> str:
    exe = Path(sys.executable).with_name("ontoos")
    return str(exe) if exe.exists() else "ontoos"


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def wait_healthy(proc: subprocess.Popen, port: int, timeout: float, stderr, stop) -> None:
    """Until GET /healthz on 127.0.0.1:`port` answers 200; RuntimeError (with `stderr()`, after
    `stop()`) if the process exits or `timeout` passes first."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"ontoos serve exited with {proc.returncode}:\n{stderr()}")
        with contextlib.suppress(OSError):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/healthz")
            healthy = conn.getresponse().status == 200
            conn.close()
            if healthy:
                return
        if time.monotonic() > deadline:
            stop()
            raise RuntimeError(f"ontoos serve was not healthy in {timeout} s:\n{stderr()}")
        time.sleep(0.1)


class ServeProcess:
    def __init__(self, dsn: str, workdir: Path) -> None:
        self.token = secrets.token_urlsafe(24)
        self.port = _free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "server.yaml"
        digest = hashlib.sha256(self.token.encode()).hexdigest()
        config.write_text(f'principals:\n  bench: {{role: analyst, token_sha256: "{digest}"}}\n', encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
        env.update(ONTOOS_DSN=dsn, ONTOOS_DATA_DIR=str(workdir / "unused"), PYTHONUNBUFFERED="1")
        self.stderr_path = workdir / "serve.stderr.log"
        self.cmd = [_ontoos(), "serve", "--http", f"127.0.0.1:{self.port}", "--config", str(config)]
        self._err = open(self.stderr_path, "wb")
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(self.cmd, env=env, stdout=subprocess.DEVNULL, stderr=self._err,
                                     stdin=subprocess.DEVNULL, cwd=workdir)
        self.ready_s = self._wait_healthy()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _wait_healthy(self, timeout: float = 90) -> float:
        wait_healthy(self.proc, self.port, timeout, self.stderr, self.stop)
        return round(time.perf_counter() - self.started, 2)

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")[-4000:]

    def rss_kb(self) -> int | None:
        return rss_kb(self.proc.pid)

    def cpu_s(self) -> float | None:
        return cpu_seconds(self.proc.pid)

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # only the process we started, by its id
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._err.close()
        return self.proc.returncode


# ---------------------------------------------------------------- clients


@contextlib.asynccontextmanager
async def rest_client(srv: ServeProcess):
    import httpx2

    async with httpx2.AsyncClient(base_url=srv.base, headers={"Authorization": f"Bearer {srv.token}"},
                                  limits=httpx2.Limits(max_connections=1, max_keepalive_connections=1),
                                  timeout=60) as client:
        body = {"query": EXPLORATION}

        async def call():
            r = await client.post("/api/v1/explore", json=body)
            if r.status_code != 200:
                raise RuntimeError(f"REST answered {r.status_code}: {r.text[:300]}")
            return r

        yield call


@contextlib.asynccontextmanager
async def mcp_client(srv: ServeProcess, info: dict):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {srv.token}"})
    async with http_client, Client(streamable_http_client(srv.base + "/mcp", http_client=http_client)) as c:
        info.setdefault("protocol_version", getattr(c, "protocol_version", None))
        args = {"query": EXPLORATION}

        async def call():
            r = await c.call_tool("ontoos_explore", args)
            if r.is_error:
                raise RuntimeError(f"MCP tool error: {r.content[0].text[:300] if r.content else r}")
            return r

        yield call


async def _phase(srv: ServeProcess, surface: str, clients: int, per_client: int, warmup: int, info: dict) -> dict:
    latencies: list[float] = []
    ready = asyncio.Event()
    started = 0

    async def worker():
        nonlocal started
        factory = rest_client(srv) if surface == "rest" else mcp_client(srv, info)
        async with factory as call:
            for _ in range(warmup):
                await call()
            started += 1
            if started == clients:
                ready.set()
            await ready.wait()
            clock = time.perf_counter
            for _ in range(per_client):
                t0 = clock()
                await call()
                latencies.append(clock() - t0)

    tasks = [asyncio.create_task(worker()) for _ in range(clients)]
    await ready.wait()
    cpu0, t0 = srv.cpu_s(), time.perf_counter()
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - t0
    cpu1 = srv.cpu_s()
    n = len(latencies)
    out = summary_ms(latencies) | {"clients": clients, "requests": n, "wall_s": round(wall, 2),
                                   "req_per_s": round(n / wall, 1)}
    if cpu0 is not None and cpu1 is not None:
        out["server_cpu_ms_per_req"] = round((cpu1 - cpu0) / n * 1000, 3)
    return out


async def _bench(srv: ServeProcess, counts: dict, info: dict) -> dict:
    res: dict = {}
    # warm-up of the server itself (imports on first use, pool, auto-prepare), then its memory
    await _phase(srv, "rest", 1, counts["warmup"], 5, info)
    await _phase(srv, "mcp", 1, max(5, counts["warmup"] // 4), 2, info)
    res["rss_kb_after_warmup"] = srv.rss_kb()
    for surface in ("rest", "mcp"):
        for clients in (1, 16):
            per_client = counts["single"] if clients == 1 else counts["per_client_16"]
            r = await _phase(srv, surface, clients, per_client, 3, info)
            res[f"{surface}_c{clients}"] = r
            log(f"    {surface:4s} x{clients:2d}: p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms  "
                f"{r['req_per_s']:7.1f} req/s  server cpu {r.get('server_cpu_ms_per_req', float('nan')):.2f} ms/req")
    res["rss_kb_after_load"] = srv.rss_kb()
    return res


def run(dsn: str, workdir: Path, counts: dict) -> dict:
    srv = ServeProcess(dsn, workdir)
    info: dict = {"command": " ".join(Path(a).name if i == 0 else a for i, a in enumerate(srv.cmd[:4])),
                  "exploration": EXPLORATION, "ready_s": srv.ready_s}
    try:
        time.sleep(0.5)
        info["rss_kb_idle"] = srv.rss_kb()
        info |= asyncio.run(_bench(srv, counts, info))
        info["server_cpu_s_total"] = srv.cpu_s()
    finally:
        info["exit_code"] = srv.stop()
    return info
