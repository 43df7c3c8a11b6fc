"""The registry in PostgreSQL (governance/store_db.py, ONTOOS_REGISTRY=database), on real PostgreSQL.

- What one store writes another reads, with a new version; before any write, the seed (or nothing).
- Changes from several stores at once are serialized by the row's lock: none is lost.
- A server's store reads through its watcher: a change written elsewhere is served within 2 s, and
  with the database away the last document read goes on being served.
- `ontoos queries import FILE` / `export` from the CLI.
- Two real server processes in directories of their own (no file in common): an import from the
  CLI is served by both within 2 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
import yaml

from ontoos_explore.governance.store import DEMO_REGISTRY, LiveRegistry, RegistryFileError, UNCHANGED
from ontoos_explore.governance.store_db import DatabaseStore
from tests import serving
from tests.databases import new_database
from tests.governance.helpers import in_threads
from tests.named_queries import WORKLOADS_OF_A_KIND


def _entry(ident: str) -> dict:
    return {**WORKLOADS_OF_A_KIND, "id": ident, "title": f"Workloads of a kind ({ident})"}


@pytest.fixture
def registry_dsn(pg_dsn) -> str:
    return new_database(pg_dsn, "registry")


def test_what_one_store_writes_another_reads_and_before_that_the_seed(registry_dsn):
    one, other = DatabaseStore(registry_dsn, seed=DEMO_REGISTRY), DatabaseStore(registry_dsn)
    seeded, version = one.read()
    assert version is None and seeded == yaml.safe_load(DEMO_REGISTRY.read_text())
    assert other.read() == ({}, None)  # no seed: nothing yet
    one.add(_entry("first"))
    data, v1 = other.read()
    assert [q["id"] for q in data["queries"]] == [q["id"] for q in seeded["queries"]] + ["first"]  # seed + change
    other.update("first", lambda q: q.update(status="retired"))
    data, v2 = one.read()
    assert v2 == v1 + 1 and data["queries"][-1]["status"] == "retired"
    assert one.update("first", lambda q: UNCHANGED)["status"] == "retired"
    assert one.read()[1] == v2  # nothing written


def test_changes_from_many_stores_at_once_are_all_kept(registry_dsn):
    stores = [DatabaseStore(registry_dsn) for _ in range(4)]
    assert in_threads(lambda i: stores[i % 4].add(_entry(f"q{i}")), 12) == []
    data, version = stores[0].read()
    assert sorted(q["id"] for q in data["queries"]) == sorted(f"q{i}" for i in range(12)) and version == 12


def test_a_server_serves_a_change_written_elsewhere_within_two_seconds(registry_dsn, demo):
    writer = DatabaseStore(registry_dsn)
    writer.write({"version": 1, "queries": [_entry("kinds")]})
    live = LiveRegistry(DatabaseStore(registry_dsn), demo)
    live.watch()
    assert set(live.entries) == {"kinds"}
    writer.add(_entry("kinds_again"))
    changed = time.monotonic()
    try:
        while set(live.entries) != {"kinds", "kinds_again"}:
            assert time.monotonic() - changed < 2.0, "not served within 2 s"
            time.sleep(0.02)
    finally:
        live.store.stop()


def test_with_its_database_away_the_registry_is_refused_cleanly_and_a_server_keeps_what_it_read(registry_dsn, demo):
    down = DatabaseStore("postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
    with pytest.raises(RegistryFileError) as refused:
        down.read()
    assert "cannot be reached" in refused.value.message and "nobody" not in refused.value.message
    store = DatabaseStore(registry_dsn)
    store.write({"version": 1, "queries": [_entry("kinds")]})
    live = LiveRegistry(store, demo)
    live.watch()
    assert set(live.entries) == {"kinds"}
    store.dsn = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"  # the database goes away
    time.sleep(0.8)
    try:
        assert set(live.entries) == {"kinds"}  # still served, nothing raised
    finally:
        store.stop()
    unwatched = LiveRegistry(DatabaseStore(store.dsn), demo)  # a CLI's: asked each time, and away
    assert unwatched.entries == {} and "cannot be reached" in unwatched.error.message


def test_a_forked_worker_starts_from_what_its_parent_read_even_with_the_database_away(registry_dsn, demo):
    """The parent reads before it forks and starts no thread; the child watches from the parent's document."""
    import multiprocessing

    store = DatabaseStore(registry_dsn)
    store.write({"version": 1, "queries": [_entry("kinds")]})
    live = LiveRegistry(store, demo)
    assert set(live.entries) == {"kinds"} and store._watcher is None  # no thread before the fork
    store.dsn = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"

    def child(out):
        live.watch()
        time.sleep(0.6)  # the watcher fails to reach the database a few times
        out.put(sorted(live.entries))

    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    proc = ctx.Process(target=child, args=(out,))
    proc.start()
    try:
        assert out.get(timeout=30) == ["kinds"]
    finally:
        proc.join(timeout=30)


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([serving.ontoos_executable(), *args], capture_output=True, text=True, timeout=120, env=env)


def test_the_cli_imports_a_file_into_the_database_and_exports_it(registry_dsn, pg_dsn, tmp_path):
    source = tmp_path / "reviewed.yaml"
    source.write_text(yaml.safe_dump({"version": 1, "queries": [_entry("kinds"), {**_entry("bad"), "sql": "DELETE"}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
    env.update({"ONTOOS_REGISTRY": "database", "ONTOOS_AUDIT_DSN": registry_dsn, "ONTOOS_DSN": pg_dsn,
                "ONTOOS_AUDIT": "off"})
    done = _cli(env, "queries", "import", str(source))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)["data"]
    assert out["imported"] == 2 and [s["id"] for s in out["skipped"]] == ["bad"]
    listed = json.loads(_cli(env, "queries", "list").stdout)["data"]["queries"]
    assert [q["id"] for q in listed] == ["kinds"]
    doctor = json.loads(_cli(env, "doctor", "--json").stdout)
    (registry,) = [c for c in doctor["checks"] if c["name"] == "registry"]
    assert {d["id"]: d["status"] for d in registry["details"]} == {"bad": "invalid", "kinds": "ok"}
    exported = _cli(env, "queries", "export")
    assert yaml.safe_load(exported.stdout) == yaml.safe_load(source.read_text())
    missing = _cli(env, "queries", "import", str(tmp_path / "nothing.yaml"))
    assert missing.returncode == 2 and "no such file" in missing.stdout + missing.stderr
    assert "Traceback" not in missing.stderr
    no_dsn = _cli({k: v for k, v in env.items() if k not in ("ONTOOS_AUDIT_DSN", "ONTOOS_DSN")}, "queries", "list")
    assert no_dsn.returncode != 0 and "ONTOOS_AUDIT_DSN" in no_dsn.stdout + no_dsn.stderr
    assert "Traceback" not in no_dsn.stderr


def test_two_servers_with_no_file_in_common_serve_an_import_within_two_seconds(pg_dsn, tmp_path):
    from tests.server.test_hostile_support import request, start_hostile_server

    audit = new_database(pg_dsn, "audit")
    servers = [start_hostile_server(f"registry-{i}", pg_dsn, tmp_path / f"s{i}", ONTOOS_AUDIT_DSN=audit,
                                    ONTOOS_REGISTRY="database") for i in (0, 1)]
    try:
        listed = lambda srv: {q["id"] for q in request(srv, "GET", "/api/v1/queries").json["data"]["queries"]}  # noqa: E731
        assert [listed(s) for s in servers] == [set(), set()]
        source = tmp_path / "reviewed.yaml"
        source.write_text(yaml.safe_dump({"version": 1, "queries": [_entry("kinds")]}))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
        env.update({"ONTOOS_REGISTRY": "database", "ONTOOS_AUDIT_DSN": audit, "ONTOOS_DSN": pg_dsn,
                    "ONTOOS_CONTRACT": str(servers[0].workdir / "contract.yaml"), "ONTOOS_AUDIT": "off"})
        assert _cli(env, "queries", "import", str(source)).returncode == 0
        changed = time.monotonic()
        while any(listed(s) != {"kinds"} for s in servers):
            assert time.monotonic() - changed < 2.0, "not served by both within 2 s"
            time.sleep(0.05)
        ran = request(servers[1], "POST", "/api/v1/queries/kinds/run", body=json.dumps({"params": {"kind": "Job"}}))
        assert ran.status == 200 and ran.json["data"]["rows"]
    finally:
        for srv in servers:
            srv.stop_cleanly()


def test_an_import_mends_a_registry_file_that_cannot_be_read(tmp_path, pg_dsn):
    """The default file registry, broken by a hand edit: import writes over it without reading it first."""
    broken, good = tmp_path / "queries.yaml", tmp_path / "reviewed.yaml"
    broken.write_text("queries: [unclosed\n")
    good.write_text(yaml.safe_dump({"version": 1, "queries": [_entry("kinds")]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONTOOS_")}
    env.update({"ONTOOS_QUERIES": str(broken), "ONTOOS_DSN": pg_dsn, "ONTOOS_AUDIT": "off"})
    assert _cli(env, "queries", "list").returncode != 0  # the premise: it cannot be read
    done = _cli(env, "queries", "import", str(good))
    assert done.returncode == 0, done.stdout + done.stderr
    assert [q["id"] for q in json.loads(_cli(env, "queries", "list").stdout)["data"]["queries"]] == ["kinds"]
