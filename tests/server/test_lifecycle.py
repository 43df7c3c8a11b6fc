"""A server's life, as a supervisor sees it: real `ontoos serve --http` processes and real signals.

- An address in use is one line on stderr and exit 1, before anything starts.
- At start the server says where it listens (REST, /mcp, /governance) and which contract it serves.
- SIGTERM or SIGINT, once or twice: the process exits 0 and stops the embedded PostgreSQL it started;
  one killed outright leaves PostgreSQL running and its pid on pgserver's list, and the next start
  forgets the dead pid, so its own clean exit stops PostgreSQL again.
- Draining: after SIGTERM the request in flight finishes, new requests are answered 503
  SHUTTING_DOWN with Retry-After, /readyz says draining, /healthz stays alive, and the audit holds
  one event for each request.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import psycopg
import pytest

from tests import serving
from tests.databases import pg_data_dir
from tests.server.test_hostile_support import request, start_hostile_server



def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
    env.update({"PYTHONUNBUFFERED": "1", "ONTOOS_AUDIT": "off", **extra})
    return env


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z"


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return not _alive(pid)


def test_an_address_in_use_is_one_line_and_exit_1(tmp_path, pg_dsn):
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        done = subprocess.run([serving.ontoos_executable(), "serve", "--http", f"127.0.0.1:{port}"], cwd=tmp_path,
                              env=_env(ONTOOS_DSN=pg_dsn), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"ontoos: cannot listen on 127.0.0.1:{port}: the address is in use (another server?)"]


# ---------------------------------------------------------------- the embedded PostgreSQL


@pytest.fixture(scope="module")
def embedded() -> Path:
    """A data directory of its own: the first server here makes the cluster and loads the demo."""
    return pg_data_dir("lifecycle")


def _start_embedded(data_dir: Path, workdir: Path, *args: str, **env: str) -> serving.Server:
    workdir.mkdir(parents=True, exist_ok=True)
    port = serving.free_port()
    err = workdir / "stderr.log"
    with open(err, "wb") as errf:
        proc = subprocess.Popen([serving.ontoos_executable(), "serve", "--http", f"127.0.0.1:{port}", *args],
                                cwd=workdir,
                                env=_env(ONTOOS_DATA_DIR=str(data_dir), **env), stdout=subprocess.DEVNULL,
                                stderr=errf, stdin=subprocess.DEVNULL)
    return serving.Server("lifecycle", "127.0.0.1", port, proc, workdir, err).wait_healthy()


def _postmaster(data_dir: Path) -> int:
    return int((data_dir / "postmaster.pid").read_text().splitlines()[0])


def _users(data_dir: Path) -> list[int]:
    return json.loads((data_dir / ".handle_pids.json").read_text())


def _wait_lines(srv: serving.Server, wanted: str, seconds: float = 10) -> str:
    deadline = time.monotonic() + seconds
    while wanted not in srv.stderr() and time.monotonic() < deadline:
        time.sleep(0.05)
    return srv.stderr()


def test_the_server_says_where_it_listens_and_what_it_serves(embedded, tmp_path):
    srv = _start_embedded(embedded, tmp_path / "start")
    try:
        err = _wait_lines(srv, "/governance")
        base = f"http://127.0.0.1:{srv.port}"
        for line in (f"ontoos: REST {base}/api/v1/explore", f"ontoos: MCP {base}/mcp", f"ontoos: dashboard {base}/governance"):
            assert any(got.startswith(line) for got in err.splitlines()), (line, err)
        assert any(got.startswith("ontoos: contract ") and "drift: none" in got for got in err.splitlines()), err
    finally:
        srv.stop_cleanly()


def test_serve_demo_prints_a_sign_in_url_and_a_token_of_this_run(embedded, tmp_path):
    import re
    import urllib.parse

    srv = _start_embedded(embedded, tmp_path / "demo", "--demo")
    try:
        err = _wait_lines(srv, "demo: curl")
        base = f"http://127.0.0.1:{srv.port}"
        said = re.search(rf"ontoos: demo: sign in at {re.escape(base)}/governance/login with the token (\S+) "
                         r"\(principal demo, role admin, a reviewer; this run only\)", err)
        assert said, err
        token = said.group(1)
        signed = request(srv, "POST", "/governance/login", who=None, body=urllib.parse.urlencode({"token": token}),
                         headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": base})
        assert signed.status == 303 and signed.headers["location"] == "/governance"
        catalog = request(srv, "GET", "/api/v1/catalog", who=None, headers={"Authorization": f"Bearer {token}"})
        assert catalog.status == 200 and catalog.json["data"]["role"] == "admin"
    finally:
        srv.stop_cleanly()
    assert "no principals configured" not in err


def test_with_json_logs_the_start_lines_are_json_lines_too(embedded, tmp_path):
    srv = _start_embedded(embedded, tmp_path / "json", ONTOOS_LOG_FORMAT="json")
    try:
        _wait_lines(srv, "/governance")
        request(srv, "POST", "/api/v1/explore", who=None, body="{}")  # a request line as well
        _wait_lines(srv, '"message": "request"')
    finally:
        srv.stop_cleanly()
    lines = [json.loads(line) for line in srv.stderr().splitlines()]  # every line of stderr is one JSON object
    said = {d["message"] for d in lines if d["logger"] == "ontoos_explore.server"}
    base = f"http://127.0.0.1:{srv.port}"
    assert f"REST {base}/api/v1/explore (and /api/v1/catalog, /healthz, /readyz)" in said, said
    assert f"MCP {base}/mcp (streamable HTTP)" in said and f"dashboard {base}/governance" in said
    assert any(m.startswith("contract ") and "drift: none" in m for m in said)
    assert any(m.startswith("draining (pid ") for m in said)  # the stop said so, as JSON too
    assert all(d["level"] in ("INFO", "WARNING") and d["ts"].endswith("+00:00") for d in lines)


@pytest.mark.parametrize("signals", [("SIGTERM",), ("SIGINT",), ("SIGTERM", "SIGTERM"), ("SIGINT", "SIGTERM")],
                         ids="+".join)
def test_a_signal_stops_the_server_and_its_postgres(embedded, tmp_path, signals):
    srv = _start_embedded(embedded, tmp_path / "signals")
    postmaster = _postmaster(embedded)
    assert srv.proc.pid in _users(embedded)
    for name in signals:
        srv.proc.send_signal(getattr(signal, name))
        time.sleep(0.05)
    rc = srv.proc.wait(timeout=60)
    assert rc == 0, srv.stderr()[-3000:]
    assert "Traceback" not in srv.stderr()
    assert _gone_within(postmaster, 20), "the embedded PostgreSQL outlived the server that started it"
    assert _users(embedded) == []


def test_a_killed_server_leaves_postgres_to_the_next_one_which_stops_it(embedded, tmp_path):
    first = _start_embedded(embedded, tmp_path / "first")
    postmaster = _postmaster(embedded)
    first.proc.kill()
    first.proc.wait(timeout=30)
    assert _alive(postmaster) and _users(embedded) == [first.proc.pid]  # nobody could take it off the list
    second = _start_embedded(embedded, tmp_path / "second")
    assert _postmaster(embedded) == postmaster and _users(embedded) == [second.proc.pid]  # the dead forgotten
    second.stop_cleanly()
    assert _gone_within(postmaster, 20)


# ---------------------------------------------------------------- draining


def test_sigterm_drains_finishing_what_runs_and_refusing_what_comes(pg_dsn, tmp_path):
    srv = start_hostile_server("drain", pg_dsn, tmp_path / "drain", ONTOOS_DRAIN_TIMEOUT="20")
    slow = {"dataset": "sleepy", "fields": ["id", "label"], "order_by": ["id"], "limit": 10}  # ~2.2 s
    answers: dict[str, object] = {}

    def in_flight():
        answers["slow"] = request(srv, "POST", "/api/v1/explore", body=json.dumps(slow), who="pat")

    worker = threading.Thread(target=in_flight)
    worker.start()
    time.sleep(0.6)  # the exploration runs
    srv.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 5
    while "draining" not in srv.stderr() and time.monotonic() < deadline:
        time.sleep(0.02)
    refused = request(srv, "POST", "/api/v1/explore", body=json.dumps({"dataset": "workloads", "fields": ["name"]}))
    ready = request(srv, "GET", "/readyz", who=None)
    alive = request(srv, "GET", "/healthz", who=None)
    worker.join(timeout=30)
    rc = srv.proc.wait(timeout=60)

    finished = answers["slow"]
    assert finished.status == 200 and len(finished.json["data"]["rows"]) == 10
    assert refused.status == 503 and refused.headers["retry-after"] == "1"
    assert refused.headers["connection"] == "close"
    assert (refused.json["error"]["subtype"], refused.json["error"]["code"]) == ("SHUTTING_DOWN", "EX603")
    assert refused.json["error"]["hint"]
    assert ready.status == 503 and ready.json["ready"] is False and ready.json["draining"] is True
    assert alive.status == 200 and alive.json["alive"] is True
    assert rc == 0 and "Traceback" not in srv.stderr()
    with psycopg.connect(srv.audit_dsn) as conn:
        events = conn.execute("SELECT principal, outcome, error_subtype FROM ontoos_audit.events "
                              "WHERE surface = 'rest' ORDER BY at").fetchall()
    assert ("pat", "ok", None) in events
    assert sum(1 for _, _, subtype in events if subtype == "SHUTTING_DOWN") == 1


# ---------------------------------------------------------------- killed outright


@pytest.mark.parametrize("spooled", [True, False], ids=["spool", "memory-only"])
def test_a_server_killed_outright_loses_no_audit_event_the_next_start_writes_them(pg_dsn, tmp_path, spooled):
    """SIGKILL while the audit store is stalled (its events table locked, as a slow or failing primary
    would hold it): what the server answered is in its spool, and the next server to start writes it,
    each event once. Memory-only (ONTOOS_AUDIT_SPOOL=off), the same events are gone: the premise."""
    spool = str(tmp_path / "spool") if spooled else "off"
    first = start_hostile_server("killed", pg_dsn, tmp_path / "first", ONTOOS_AUDIT_SPOOL=spool)
    ask = json.dumps({"dataset": "workloads", "fields": ["name"], "limit": 1})
    warm = request(first, "POST", "/api/v1/explore", body=ask)
    seen = lambda conn, ids: conn.execute("SELECT count(*) FROM ontoos_audit.events WHERE id = ANY(%s)",  # noqa: E731
                                          (ids,)).fetchone()[0]
    with psycopg.connect(first.audit_dsn) as conn:
        deadline = time.monotonic() + 20
        while not seen(conn, [warm.json["meta"]["exploration_id"]]) and time.monotonic() < deadline:
            time.sleep(0.05)  # the writer is connected and has written once
            conn.rollback()
        conn.execute("LOCK TABLE ontoos_audit.events IN EXCLUSIVE MODE")  # writes wait; reads go on
        answers = [request(first, "POST", "/api/v1/explore", body=ask) for _ in range(12)]
        assert [a.status for a in answers] == [200] * 12
        ids = [a.json["meta"]["exploration_id"] for a in answers]
        time.sleep(0.5)  # the writer's batch is in flight, waiting for the lock
        first.proc.kill()
        first.proc.wait(timeout=30)
        assert seen(conn, ids) == 0
    # the lock is gone with the transaction; a server starts again on the same machine and store
    second = start_hostile_server("again", pg_dsn, tmp_path / "second", ONTOOS_AUDIT_SPOOL=spool,
                                  ONTOOS_AUDIT_DSN=first.audit_dsn)
    try:
        with psycopg.connect(first.audit_dsn, autocommit=True) as conn:
            deadline = time.monotonic() + (20 if spooled else 3)
            while seen(conn, ids) < len(ids) and time.monotonic() < deadline:
                time.sleep(0.1)
            written = conn.execute("SELECT id FROM ontoos_audit.events WHERE id = ANY(%s)", (ids,)).fetchall()
    finally:
        second.stop_cleanly()
    assert sorted(r[0] for r in written) == (sorted(ids) if spooled else [])
    if spooled:
        assert "12 events left unwritten by ended process" in second.stderr()
        assert list((tmp_path / "spool").rglob("*.jsonl")) == []
