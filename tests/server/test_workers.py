"""`ontoos serve --http --workers N`: N real processes answering on one port, supervised.

Both workers answer (each /healthz names its process); MCP clients of either protocol era are
answered whichever process takes each request (MCP is stateless there); a worker killed outright is
replaced while the others answer; SIGTERM to the supervisor drains every worker and exits 0 with no
process left, and the audit holds exactly one event per request with the workers writing together.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import time

import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.server.test_hostile_support import request, start_hostile_server, token

pytestmark = pytest.mark.anyio


def _healthz(srv) -> str:
    conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
    try:
        conn.request("GET", "/healthz")
        return json.loads(conn.getresponse().read())["process"]
    finally:
        conn.close()


def _processes(srv, want: int, attempts: int = 400) -> set[str]:
    """The processes seen answering /healthz on new connections, until `want` are seen."""
    seen: set[str] = set()
    for _ in range(attempts):
        seen.add(_healthz(srv))
        if len(seen) >= want:
            break
    return seen


def _workers_of(pid: int) -> set[int]:
    """The live children of `pid` (from /proc)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if int(stat[1]) == pid and stat[0] != "Z":
                found.add(int(entry))
    return found


@pytest.fixture
def workers(pg_dsn, tmp_path):
    srv = start_hostile_server("workers", pg_dsn, tmp_path / "workers", args=("--workers", "2"))
    yield srv
    if srv.proc.poll() is None:
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(timeout=60)


@contextlib.asynccontextmanager
async def mcp(srv, mode: str):
    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {token('alice')}"})
    async with http_client, Client(streamable_http_client(srv.base + "/mcp", http_client=http_client), mode=mode) as c:
        yield c


async def test_two_workers_answer_and_mcp_of_either_era_is_served_by_whichever(workers):
    assert len(_processes(workers, 2)) == 2
    for mode in ("legacy", "auto"):
        for _ in range(6):  # a new client (new connections) each time: the requests land on either process
            async with mcp(workers, mode) as client:
                listed = await client.list_tools()
                result = await client.call_tool("ontoos_explore", {"dataset": "workloads", "fields": ["name"],
                                                                   "limit": 2})
            assert "ontoos_explore" in [t.name for t in listed.tools]
            assert result.is_error is False and len(result.structured_content["data"]["rows"]) == 2


def test_a_killed_worker_is_replaced_and_the_rest_answer(workers):
    before = _workers_of(workers.proc.pid)
    assert len(before) == 2
    victim = min(before)
    os.kill(victim, signal.SIGKILL)
    answered = [request(workers, "POST", "/api/v1/explore",
                        body=json.dumps({"dataset": "workloads", "fields": ["name"], "limit": 1})).status
                for _ in range(10)]
    deadline = time.monotonic() + 30
    while (len(_workers_of(workers.proc.pid)) < 2 or victim in _workers_of(workers.proc.pid)) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    after = _workers_of(workers.proc.pid)
    assert answered == [200] * 10
    assert len(after) == 2 and victim not in after
    assert f"worker {victim} exited with -9; starting another" in workers.stderr()


def test_sigterm_stops_every_worker_and_the_audit_has_each_request_once(workers):
    n = 30
    statuses = [request(workers, "POST", "/api/v1/explore",
                        body=json.dumps({"dataset": "workloads", "fields": ["name"], "limit": 1})).status
                for _ in range(n)]
    children = _workers_of(workers.proc.pid)
    workers.proc.send_signal(signal.SIGTERM)
    assert workers.proc.wait(timeout=60) == 0
    assert children and not any(os.path.exists(f"/proc/{pid}") for pid in children)  # reaped: none left
    assert statuses == [200] * n and "Traceback" not in workers.stderr()
    with psycopg.connect(workers.audit_dsn) as conn:
        (events,) = conn.execute("SELECT count(*) FROM ontoos_audit.events WHERE surface = 'rest' "
                                 "AND principal = 'alice'").fetchone()
    assert events == n


def test_workers_take_a_number(tmp_path, pg_dsn):
    import subprocess

    from tests import serving

    done = subprocess.run([serving.ontoos_executable(), "serve", "--http", "127.0.0.1:1", "--workers", "0"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")},
                               "ONTOOS_DSN": pg_dsn})
    assert done.returncode == 2 and json.loads(done.stdout)["error"]["message"].startswith("--workers takes")


async def test_a_registry_change_is_live_in_every_worker_within_two_seconds(pg_dsn, tmp_path):
    import yaml

    from tests.named_queries import WORKLOADS_OF_A_KIND as entry

    registry = tmp_path / "queries.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "queries": [entry]}))
    srv = start_hostile_server("workers-registry", pg_dsn, tmp_path / "srv", args=("--workers", "2", "--queries",
                                                                                   str(registry)))

    async def listed() -> set[str]:
        async with mcp(srv, "auto") as client:  # a new client each time: either worker answers
            return {t.name for t in (await client.list_tools()).tools if t.name.startswith("ontoos_q_")}

    try:
        assert len(_processes(srv, 2)) == 2
        assert all([await listed() == {"ontoos_q_kinds"} for _ in range(6)])
        second = {**entry, "id": "kinds_again", "title": "Workloads of a kind, again"}
        registry.write_text(yaml.safe_dump({"version": 1, "queries": [entry, second]}))  # an edit, as the CLI writes
        time.sleep(2.0)
        seen = [await listed() for _ in range(10)]
    finally:
        srv.stop_cleanly()
    assert seen == [{"ontoos_q_kinds", "ontoos_q_kinds_again"}] * 10
