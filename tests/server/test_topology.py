"""The service as deployed: two `ontoos serve --http` processes in front of a primary and two hot
standbys (tests/topology.py: real PostgreSQL streaming replication on loopback), under load.

The processes read the lake from the standbys (a libpq multi-host DSN, prefer-standby, the primary
last) and write the audit, the shared rate limits and nothing else to the primary. While 32 clients
keep asking (each client sends to the processes in turn and, as a load balancer would, moves to the
other when one refuses the connection), each test takes a part away and brings it back:

- a standby stopped and started: every request is answered, and answered right (the rows the
  primary itself gives);
- a server process sent SIGTERM and started again: each request gets its answer or a clean 503
  SHUTTING_DOWN with Retry-After;
- a server process killed outright (SIGKILL) and started again: its queued audit events are written
  by the process started in its place (from its spool on local disk);
- the primary restarted: the reads go on from the standbys, the audit waits for it.

In every case the audit reconciles exactly: the ids of the events recorded are the ids of the
answers the clients received, each once. Also here: a rate limit holds across the two processes, and
a registry change written through one is served by the other within two seconds.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import psycopg
import pytest
import yaml

from tests.conftest import DEMO_SCALE, DEMO_SEED
from tests import serving
from tests.server.test_hostile_support import PREFIX, request, start_hostile_server, token
from tests.named_queries import WORKLOADS_OF_A_KIND
from tests.topology import Postgres, read_dsn

CLIENTS = 32
QUESTION = {"dataset": "workloads", "fields": ["name", "namespace"], "filter": "kind = 'Deployment'",
            "order_by": "name", "limit": 7}
REGISTRY_ENTRY = WORKLOADS_OF_A_KIND


@dataclass
class Deployment:
    primary: Postgres
    standbys: list[Postgres]
    servers: list  # tests.serving.Server, one per process (a restarted one replaces its entry)
    audit_dsn: str
    expected: list  # the rows QUESTION answers, read on the primary
    start: dict = field(default_factory=dict)  # how to start a process again: start_hostile_server's arguments


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    from ontoos_explore.engine import demo_data

    primary = Postgres.initdb("primary").start()
    parts = [primary]
    try:
        with psycopg.connect(primary.dsn(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE lake")
            conn.execute("CREATE DATABASE topology_audit")
        lake, audit = primary.dsn("lake"), primary.dsn("topology_audit")
        with psycopg.connect(lake) as conn:
            demo_data.ensure(conn, scale=DEMO_SCALE, seed=DEMO_SEED)
        standbys = [primary.basebackup(f"standby{i}").start() for i in (1, 2)]
        parts += standbys
        root = tmp_path_factory.mktemp("topology")
        registry = root / "queries.yaml"
        registry.write_text(yaml.safe_dump({"version": 1, "queries": [REGISTRY_ENTRY]}))
        start = {"pg_dsn": lake, "read_dsn": read_dsn([*standbys, primary], "lake", balance=True),
                 "config_extra": {"max_in_flight": 64}, "args": ("--queries", str(registry)),
                 "ONTOOS_AUDIT_DSN": audit, "ONTOOS_SECRET": "topology-" + "s" * 32,
                 "ONTOOS_SHARED_LIMITS": "on", "ONTOOS_MCP_STATELESS": "on", "ONTOOS_DRAIN_TIMEOUT": "10"}
        servers = [start_hostile_server(f"process{i}", workdir=root / f"process{i}", **start) for i in (1, 2)]
        for s in standbys:
            s.wait_replayed(primary)  # the grants the servers' start applied
        first = request(servers[0], "POST", "/api/v1/explore", body=json.dumps(QUESTION))
        assert first.status == 200, first.text
        with psycopg.connect(lake) as conn:
            (kinds,) = conn.execute("SELECT count(*) FROM lake.k8s_workloads WHERE kind = 'Deployment' "
                                    "AND NOT is_deleted").fetchone()
        assert len(first.json["data"]["rows"]) == min(7, kinds) > 0
        dep = Deployment(primary, standbys, servers, audit, first.json["data"]["rows"], {**start, "root": root})
        yield dep
        for s in dep.servers:
            s.stop_cleanly()
    finally:
        for part in reversed(parts):
            part.destroy()


class Clients:
    """CLIENTS threads asking QUESTION of the processes in turn until stopped; every reply kept."""

    def __init__(self, dep: Deployment) -> None:
        self.dep = dep
        self.replies: list[tuple[int, dict, dict]] = []  # (status, headers, body)
        self.unanswered = 0  # connections refused or closed before any answer: asked of the other process
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._ask, args=(i,), daemon=True) for i in range(CLIENTS)]

    def __enter__(self) -> Clients:
        for t in self._threads:
            t.start()
        time.sleep(1.0)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)

    def _ask(self, i: int) -> None:
        body = json.dumps(QUESTION).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token('alice')}"}
        turn = i
        while not self._stop.is_set():
            srv = self.dep.servers[turn % len(self.dep.servers)]
            turn += 1
            conn = http.client.HTTPConnection(srv.host, srv.port, timeout=30)
            try:
                conn.request("POST", "/api/v1/explore", body=body, headers=headers)
                r = conn.getresponse()
                reply = (r.status, {k.lower(): v for k, v in r.getheaders()}, json.loads(r.read()))
            except (ConnectionError, http.client.RemoteDisconnected, http.client.IncompleteRead):  # cut off by a kill
                with self._lock:
                    self.unanswered += 1
                time.sleep(0.05)
                continue
            finally:
                conn.close()
            with self._lock:
                self.replies.append(reply)

    def ids(self) -> Counter:
        return Counter(body["meta"]["exploration_id"] for _, _, body in self.replies)


def _check_answers(dep: Deployment, clients: Clients, allow_503: bool = False) -> Counter:
    statuses = Counter(status for status, _, _ in clients.replies)
    assert statuses[200] > 200, statuses
    for status, headers, body in clients.replies:
        if status == 200:
            assert body["data"]["rows"] == dep.expected  # no answer is wrong
            assert body["meta"]["evidence"]["replica"]["standby"] is True  # and each was read on a standby
        else:
            assert allow_503 and status == 503, (status, body)
            assert body["error"]["subtype"] == "SHUTTING_DOWN" and headers.get("retry-after") == "1", (headers, body)
    return statuses


def _audited(dep: Deployment, since: float) -> Counter:
    with psycopg.connect(dep.audit_dsn) as conn:
        rows = conn.execute("SELECT id FROM ontoos_audit.events WHERE surface = 'rest' AND at >= to_timestamp(%s) "
                            "AND (principal = 'alice' OR error_subtype = 'SHUTTING_DOWN')",  # refused before auth
                            (since,)).fetchall()
    return Counter(r[0] for r in rows)


def _reconciled(dep: Deployment, clients: Clients, since: float, timeout: float = 60) -> None:
    """The audit holds exactly the answers given, once each (waiting for queues that wait for the primary)."""
    answered = clients.ids()
    assert max(answered.values()) == 1  # every answer an exploration of its own
    deadline = time.monotonic() + timeout
    while (recorded := _audited(dep, since)) != answered and time.monotonic() < deadline:
        time.sleep(0.5)
    assert set(recorded) == set(answered), (len(recorded), len(answered),
                                            len(set(recorded) - set(answered)), len(set(answered) - set(recorded)))


def _standby_sessions(part: Postgres) -> int:
    with psycopg.connect(part.dsn(), autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = 'lake' "
                            "AND application_name = 'ontoos-explore'").fetchone()[0]


def test_reads_come_from_the_standbys_and_the_primary_only_takes_writes(deployment):
    for srv in deployment.servers:
        for _ in range(10):
            assert request(srv, "POST", "/api/v1/explore", body=json.dumps(QUESTION)).status == 200
    assert sum(_standby_sessions(s) for s in deployment.standbys) > 0
    assert _standby_sessions(deployment.primary) == 0


def test_a_rate_limit_holds_across_the_processes(deployment):
    body = json.dumps({"dataset": "workloads", "fields": ["name"], "limit": 1})
    statuses = [request(deployment.servers[i % 2], "POST", "/api/v1/explore", body=body, who="max").status
                for i in range(8)]  # max: a burst of 3, whichever process is asked
    assert sorted(statuses) == [200] * 3 + [429] * 5


@pytest.mark.anyio
async def test_a_registry_change_through_one_process_is_served_by_the_other(deployment):
    from tests.server.test_workers import mcp

    one, other = deployment.servers

    async def tools(srv) -> set[str]:
        async with mcp(srv, "auto") as client:
            return {t.name for t in (await client.list_tools()).tools if t.name.startswith("ontoos_q_")}

    async with mcp(one, "auto") as client:
        ran = await client.call_tool("ontoos_q_kinds", {"kind": "Deployment"})
    assert ran.is_error is False and ran.structured_content["data"]["rows"]
    assert await tools(other) == {"ontoos_q_kinds"}
    registry = deployment.start["args"][1]
    data = yaml.safe_load(open(registry))
    data["queries"].append({**REGISTRY_ENTRY, "id": "kinds_again", "title": "Workloads of a kind, again"})
    with open(registry, "w") as f:  # an edit, as the CLI or a dashboard writes it
        yaml.safe_dump(data, f)
    changed = time.monotonic()
    while await tools(other) != {"ontoos_q_kinds", "ontoos_q_kinds_again"}:
        assert time.monotonic() - changed < 2.0, "the other process did not serve the new entry within 2 s"
    async with mcp(other, "legacy") as client:
        run = await client.call_tool("ontoos_q_kinds_again", {"kind": "Job"})
    assert run.is_error is False and run.structured_content["data"]["rows"]


@pytest.mark.parametrize("mode, which", [("fast", 0), ("immediate", 1)], ids=["stopped", "crashing"])
def test_a_standby_taken_away_under_load_and_brought_back(deployment, mode, which):
    """pg_ctl stop -m fast (a supervisor's stop) or -m immediate (a crash), then started again."""
    since = time.time()  # the earlier tests' clients have all had their answers
    victim = deployment.standbys[which]
    with Clients(deployment) as clients:
        victim.stop(mode)
        time.sleep(3.0)
        victim.start()
        victim.wait_replayed(deployment.primary)
        time.sleep(1.0)
    assert clients.unanswered == 0
    _check_answers(deployment, clients)
    _reconciled(deployment, clients, since)


def test_a_server_process_sent_sigterm_under_load_and_started_again(deployment):
    since = time.time()  # the earlier tests' clients have all had their answers
    victim = deployment.servers[1]
    start = {k: v for k, v in deployment.start.items() if k != "root"}
    with Clients(deployment) as clients:
        victim.stop_cleanly()  # SIGTERM: drains, flushes its audit queue, exits 0
        time.sleep(2.0)
        deployment.servers[1] = start_hostile_server("process2-again", workdir=deployment.start["root"] / "again",
                                                     port=victim.port, **start)
        time.sleep(2.0)
    statuses = _check_answers(deployment, clients, allow_503=True)
    assert clients.unanswered > 0 or statuses[503] > 0  # the process was away a while: some asked the other
    _reconciled(deployment, clients, since)


def test_a_server_process_killed_outright_under_load_and_started_again(deployment):
    """SIGKILL: nothing drains, and the events its writer had queued are in its spool; the process
    started in its place writes them. Every answer a client received is in the audit, once; beyond
    them, at most the requests the kill cut off before their answers arrived."""
    since = time.time()  # the earlier tests' clients have all had their answers
    victim = deployment.servers[0]
    start = {k: v for k, v in deployment.start.items() if k != "root"}
    with Clients(deployment) as clients:
        victim.proc.kill()
        victim.proc.wait(timeout=30)
        time.sleep(1.0)
        deployment.servers[0] = start_hostile_server("process1-again", workdir=deployment.start["root"] / "again1",
                                                     port=victim.port, **start)
        time.sleep(2.0)
    _check_answers(deployment, clients)
    assert clients.unanswered > 0  # the process was away a while: some asked the other
    answered = clients.ids()
    deadline = time.monotonic() + 60
    while not set(answered) <= set(recorded := _audited(deployment, since)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert set(answered) <= set(recorded), len(set(answered) - set(recorded))
    assert max(recorded.values()) == 1
    assert len(set(recorded) - set(answered)) <= clients.unanswered  # answered by the server, cut off on the way


def test_the_primary_restarted_under_load(deployment):
    since = time.time()  # the earlier tests' clients have all had their answers
    with Clients(deployment) as clients:
        deployment.primary.restart()
        time.sleep(3.0)
    assert clients.unanswered == 0
    _check_answers(deployment, clients)
    _reconciled(deployment, clients, since)
    for s in deployment.standbys:  # replication resumed
        s.wait_replayed(deployment.primary)


def _doctor_env(srv, dsn: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
    return {**env, "ONTOOS_DSN": dsn, "ONTOOS_AUDIT_DSN": srv.audit_dsn, "ONTOOS_ROLE_PREFIX": PREFIX,
            "ONTOOS_CONTRACT": str(srv.workdir / "contract.yaml")}


def test_answers_read_on_a_standby_say_so_and_how_far_behind_it_is(deployment, tmp_path):
    """Replay paused on a standby while the primary publishes a new batch: an answer read there names the
    batch its rows came from (the standby's), says it was read on a standby, and how far behind; `doctor`
    on that standby says the same. Read on the primary, the new batch and no replica."""
    standby, primary = deployment.standbys[0], deployment.primary
    start = {k: v for k, v in deployment.start.items() if k not in ("root", "read_dsn", "args")}
    behind = start_hostile_server("on-standby", workdir=tmp_path / "standby", read_dsn=standby.dsn("lake"), **start)
    with psycopg.connect(standby.dsn(), autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_pause()")
    try:
        ask = lambda srv: request(srv, "POST", "/api/v1/explore", body=json.dumps(QUESTION)).json  # noqa: E731
        before = ask(behind)["meta"]["evidence"]
        assert before["replica"] == {"standby": True, "replay_lag_seconds": 0.0}  # caught up when paused
        with psycopg.connect(primary.dsn("lake"), autocommit=True) as conn:
            conn.execute("INSERT INTO lake.publish_log (source, batch_id, collected_at, published_at, as_of) "
                         "VALUES ('k8s', 'k8s-newer', now(), now(), now())")
        time.sleep(1.5)
        lagging = ask(behind)["meta"]["evidence"]
        doctor = subprocess.run([serving.ontoos_executable(), "doctor", "--json"], capture_output=True, text=True,
                                timeout=120, env=_doctor_env(behind, standby.dsn("lake")))
    finally:
        with psycopg.connect(standby.dsn(), autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_resume()")
        behind.stop_cleanly()
    assert lagging["source_batch"] == before["source_batch"] and lagging["source_batch"]["k8s"] != "k8s-newer"
    assert lagging["replica"]["standby"] is True and lagging["replica"]["replay_lag_seconds"] >= 1.0
    (database,) = [c for c in json.loads(doctor.stdout)["checks"] if c["name"] == "database"]
    assert database["details"][0]["standby"] is True and database["details"][0]["replay_lag_s"] >= 1.0, database
    standby.wait_replayed(primary)
    with psycopg.connect(primary.dsn("lake"), autocommit=True) as conn:  # no test after this one sees it
        conn.execute("DELETE FROM lake.publish_log WHERE batch_id = 'k8s-newer'")
    on_primary = start_hostile_server("on-primary", workdir=tmp_path / "primary", read_dsn=primary.dsn("lake"), **start)
    try:
        evidence = request(on_primary, "POST", "/api/v1/explore", body=json.dumps(QUESTION)).json["meta"]["evidence"]
    finally:
        on_primary.stop_cleanly()
    assert evidence["replica"] is None and evidence["source_batch"] == before["source_batch"]
