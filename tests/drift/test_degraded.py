"""Drift against real PostgreSQL: what moved is found with its place in the contract, and refused
clearly (DEGRADED, never EX905) while everything that did not move keeps answering; what is outside
the caller's read sets answers exactly as a name that does not exist."""

from __future__ import annotations

import asyncio
import contextlib
import re

import psycopg
import pytest

from ontoos_explore import drift
from ontoos_explore.catalog import describe_dataset, list_datasets
from ontoos_explore.drift import LakeState, Watcher
from ontoos_explore.engine.settings import Settings
from ontoos_explore.service import Explorer

from ..conftest import ROOT, executor_for
from ..databases import demo_database
from .conftest import PREFIX

pytestmark = pytest.mark.anyio
CONTRACT = str(ROOT / "contracts" / "demo.yaml")


async def lake_of(dsn, contract, **settings) -> tuple[LakeState, drift.Catalog]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        catalog, found = await drift.inspect(conn, contract, Settings(dsn=dsn, role_prefix=PREFIX, **settings))
    return LakeState(contract, drift=found), catalog


async def test_the_demo_as_loaded_has_no_drift(pg_dsn, demo):
    lake, catalog = await lake_of(pg_dsn, demo)
    assert lake.drift.findings == () and lake.drift.checked_at is not None
    assert lake.notice == {"min_cli_version": "0.1.0", "schema_drift": False, "contract_hash": demo.hash}
    assert catalog.version and catalog.standby is False


async def test_every_planted_change_is_found_with_its_place_in_the_contract(drifted_dsn, demo):
    lake, _ = await lake_of(drifted_dsn, demo)
    found = {(f.kind, ".".join(f.place)): f for f in lake.drift.findings}
    assert set(found) == {
        ("missing_table", "datasets.databases.relation"),
        ("missing_column", "datasets.hosts.columns.region"),
        ("type_mismatch", "datasets.workloads.columns.replicas"),
        ("grant_missing", "roles.analyst"),
    }
    lines = (ROOT / "contracts" / "demo.yaml").read_text().splitlines()
    for f in found.values():  # file:line points at the key it names
        path, line = f.where.rsplit(":", 1)
        assert path.endswith("demo.yaml")
        assert f.place[-1] + ":" in lines[int(line) - 1], (f.where, lines[int(line) - 1])
    assert "is text, not integer" in found[("type_mismatch", "datasets.workloads.columns.replicas")].message
    assert "cannot read lake.hosts (hostname)" in found[("grant_missing", "roles.analyst")].message
    assert set(lake.drift.datasets) == {"databases"}
    assert set(lake.drift.columns) == {("hosts", "region"), ("workloads", "replicas")}
    assert set(lake.drift.relations) == {"database", "host"}  # both join the dropped table
    assert lake.notice["schema_drift"] is True
    assert re.match(r"drift: 4 finding\(s\) \(1 grant_missing, 1 missing_column, 1 missing_table, "
                    r"1 type_mismatch\); 1 dataset\(s\), 2 column\(s\), 2 relation\(s\) degraded", lake.drift.summary())


@pytest.mark.parametrize("ask, role, message", [
    ("explore databases fields name", "analyst", "dataset 'databases' is unavailable: its table does not exist"),
    ("explore hosts fields hostname, region", "admin", "column 'region' of hosts is unavailable: the column does not exist"),
    ("explore workloads fields name, replicas", "viewer", "column 'replicas' of workloads is unavailable: its type "
                                                          "in the database no longer reads as integer"),
    ("explore workloads fields name where replicas > 2", "viewer", "column 'replicas' of workloads"),
    ("explore tables via database fields table_name", "analyst", "dataset 'databases' is unavailable"),
])
async def test_what_moved_is_refused_clearly_naming_it(drifted_dsn, demo, ask, role, message):
    lake, _ = await lake_of(drifted_dsn, demo)
    async with executor_for(drifted_dsn, demo) as executor:
        answer = await Explorer(demo, executor, lake=lake).explore(ask, role)
    err = answer.envelope["error"]
    assert (err["type"], err["subtype"], err["code"], answer.status) == ("policy", "DEGRADED", "EX702", 503)
    assert message in err["message"] and "ontoos doctor" in err["hint"]


@pytest.mark.parametrize("ask, role", [
    ("explore hosts fields hostname, cluster limit 3", "admin"),  # hosts without the dropped column
    ("explore workloads fields name, namespace limit 3", "viewer"),  # workloads without the retyped one
    ("explore tables fields table_name limit 3", "analyst"),  # a dataset beside the dropped table
    ("explore containers fields name limit 3", "viewer"),  # a child of workloads: its parent still hides rows
])
async def test_everything_that_did_not_move_keeps_answering(drifted_dsn, demo, ask, role):
    lake, _ = await lake_of(drifted_dsn, demo)
    async with executor_for(drifted_dsn, demo) as executor:
        answer = await Explorer(demo, executor, lake=lake).explore(ask, role)
    assert answer.ok, answer.envelope
    assert len(answer.envelope["data"]["rows"]) == 3


async def test_without_the_drift_check_the_same_question_fails_in_the_database(drifted_dsn, demo):
    """Why degrading matters: the refusal above is what EX905 (or EX904) would have been."""
    async with executor_for(drifted_dsn, demo) as executor:
        answer = await Explorer(demo, executor).explore("explore databases fields name", "analyst")
    assert answer.envelope["error"]["code"] in ("EX905", "EX904")


async def test_a_degraded_name_outside_the_read_sets_answers_as_a_missing_one(drifted_dsn, demo):
    lake, _ = await lake_of(drifted_dsn, demo)
    async with executor_for(drifted_dsn, demo) as executor:
        explorer = Explorer(demo, executor, lake=lake)
        degraded = await explorer.explore("explore databases fields name", "viewer")  # not the viewer's
        missing = await explorer.explore("explore nosuchdata fields name", "viewer")
    shown = [{k: v for k, v in a.envelope["error"].items() if k != "retry_with"} for a in (degraded, missing)]
    assert shown[0]["code"] == "EX202"
    assert shown[0] == {k: (v.replace("nosuchdata", "databases") if isinstance(v, str) else v)
                        for k, v in shown[1].items()}
    assert [d["name"] for d in list_datasets(demo, "viewer", lake.drift)["datasets"]] == sorted(
        d.name for d in demo.readable_datasets(demo.role("viewer")))  # listed as before, no status of others


async def test_the_catalog_marks_what_is_degraded_and_why(drifted_dsn, demo):
    lake, _ = await lake_of(drifted_dsn, demo)
    listed = {d["name"]: d for d in list_datasets(demo, "admin", lake.drift)["datasets"]}
    assert listed["databases"]["status"] == "degraded" and "does not exist" in listed["databases"]["reason"]
    assert listed["hosts"]["status"] == "ok" and "reason" not in listed["hosts"]
    hosts = describe_dataset(demo, "admin", "hosts", lake.drift)
    columns = {c["name"]: c for c in hosts["columns"]}
    assert columns["region"]["status"] == "degraded" and columns["hostname"]["status"] == "ok"
    tables = describe_dataset(demo, "analyst", "tables", lake.drift)
    assert {r["name"]: r["status"] for r in tables["relations"]}["database"] == "degraded"


async def test_named_queries_that_touch_what_moved_are_listed_degraded_and_refused(drifted_dsn, demo, tmp_path):
    import yaml

    from ontoos_explore.governance.registry import Registry

    entries = [
        {"id": "db_names", "title": "Database names", "status": "approved", "read_sets": ["engineering"],
         "columns": ["name"], "max_rows": 5, "sql": "SELECT d.name AS name FROM lake.databases AS d LIMIT 6"},
        {"id": "host_names", "title": "Host clusters", "status": "approved", "read_sets": ["engineering"],
         "columns": ["cluster"], "max_rows": 5, "sql": "SELECT h.cluster AS cluster FROM lake.hosts AS h LIMIT 6"},
    ]
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"queries": entries}))
    registry = Registry.load(path, demo)
    assert registry.problems == []
    lake, _ = await lake_of(drifted_dsn, demo)
    assert lake.named_refusal(registry.entries["db_names"]).startswith("dataset 'databases' is unavailable")
    assert lake.named_refusal(registry.entries["host_names"]) is None
    async with executor_for(drifted_dsn, demo) as executor:
        explorer = Explorer(demo, executor, lake=lake)
        refused = await registry.run(explorer, "admin", "db_names", {})
        answered = await registry.run(explorer, "admin", "host_names", {})
    assert refused.envelope["error"]["code"] == "EX702" and answered.ok
    from ontoos_explore.server.config import Principal
    from ontoos_explore.server.tools import Tools

    async with executor_for(drifted_dsn, demo) as executor:
        tools = Tools(demo, Explorer(demo, executor, lake=lake), registry)
        listed = await tools.call("ontoos_queries", {}, Principal("ann", "admin"), "mcp")
        catalog = await tools.call("ontoos_catalog", {}, Principal("ann", "admin"), "mcp")
    statuses = {q["id"]: (q["status"], q.get("reason", "")) for q in listed.envelope["data"]["queries"]}
    assert statuses["host_names"] == ("ok", "")
    assert statuses["db_names"][0] == "degraded" and "dataset 'databases' is unavailable" in statuses["db_names"][1]
    assert {d["name"]: d["status"] for d in catalog.envelope["data"]["datasets"]}["databases"] == "degraded"


@contextlib.asynccontextmanager
async def watching(pg_dsn, demo, name: str, interval_s: float):
    """A Watcher running on a demo lake of its own, compared clean first: (its dsn, lake, watcher)."""
    dsn = demo_database(pg_dsn, name, demo)
    settings = Settings(dsn=dsn, role_prefix=PREFIX, drift_interval_s=interval_s)
    async with executor_for(dsn, demo) as executor:
        lake = LakeState(demo)
        lake.update(await drift.check(executor.pool, demo, settings))
        assert not lake.drift.drifted
        watcher = Watcher(lake, executor.pool, dsn, settings)
        task = asyncio.create_task(watcher.run())
        try:
            yield dsn, lake, watcher
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def until_drifted(lake) -> None:
    for _ in range(100):
        if lake.drift.drifted:
            return
        await asyncio.sleep(0.05)


async def test_a_watcher_compares_again_on_notify(pg_dsn, demo):
    async with watching(pg_dsn, demo, "notify", 0) as (dsn, lake, watcher):  # no timer: only NOTIFY
        with psycopg.connect(dsn, autocommit=True) as conn:
            for _ in range(200):  # until its LISTEN is in place
                if conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                "AND query = 'LISTEN ontoos_reload'").fetchone()[0]:
                    break
                await asyncio.sleep(0.05)
            conn.execute("ALTER TABLE lake.hosts DROP COLUMN vcpus")
            for _ in range(5):  # sent together: one comparison
                conn.execute("NOTIFY ontoos_reload")
        await until_drifted(lake)
        await asyncio.sleep(1.5)  # past the gap: the other four made no comparison of their own
    assert set(lake.drift.columns) == {("hosts", "vcpus")} and lake.notice["schema_drift"] is True
    assert watcher.checks == 1


async def test_a_watcher_compares_again_on_its_timer_with_no_notify(pg_dsn, demo):
    async with watching(pg_dsn, demo, "timer", 1) as (dsn, lake, watcher):
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ALTER TABLE lake.hosts DROP COLUMN vcpus")  # and nobody says so
        await until_drifted(lake)
    assert set(lake.drift.columns) == {("hosts", "vcpus")} and watcher.checks >= 1


async def test_a_database_that_cannot_be_reached_is_not_checked_and_says_so(demo, tmp_path):
    settings = Settings(dsn=f"host={tmp_path} port=1 connect_timeout=1", pool_timeout_s=0.5)
    async with executor_for(settings.dsn, demo, pool_timeout_s=0.5) as executor:
        found = await drift.check(executor.pool, demo, settings)
    assert found.checked_at is None and not found.drifted
    assert found.summary().startswith("drift: not checked (the database could not be reached")


async def test_a_precision_or_a_domain_is_not_drift_and_a_lost_schema_usage_is(pg_dsn, demo):
    dsn = demo_database(pg_dsn, "typmod", demo,
                        "ALTER TABLE lake.k8s_workloads ALTER COLUMN created_at TYPE timestamp(3) with time zone",
                        "CREATE DOMAIN lake.name_d AS varchar(200)",
                        "ALTER TABLE lake.k8s_workloads ALTER COLUMN namespace TYPE lake.name_d",
                        "ALTER TABLE lake.publish_log ALTER COLUMN published_at TYPE timestamp(0) with time zone")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"REVOKE USAGE ON SCHEMA lake FROM {PREFIX}viewer")
    lake, catalog = await lake_of(dsn, demo)
    assert catalog.table("lake", "k8s_workloads")["namespace"] == ("character varying", "S")  # the domain's base
    assert [(f.kind, f.place) for f in lake.drift.findings] == [("grant_missing", ("roles", "viewer"))]
    assert "has no USAGE on schema lake" in lake.drift.findings[0].message
    assert not lake.drift.columns and not lake.drift.datasets
