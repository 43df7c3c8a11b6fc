"""Drift against real PostgreSQL: what moved is found with its place in the contract, and refused
clearly (DEGRADED, never EX905) while everything that did not move keeps answering; what is outside
the caller's read sets answers exactly as a name that does not exist."""

from __future__ import annotations

import asyncio
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
    ("explore workloads fields name, replicas", "viewer", "column 'replicas' of workloads is unavailable: the column "
                                                          "is text in the database, not integer"),
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


async def test_a_watcher_compares_again_on_notify(pg_dsn, demo):
    dsn = demo_database(pg_dsn, "notify", demo)
    settings = Settings(dsn=dsn, role_prefix=PREFIX, drift_interval_s=0)  # no timer: only NOTIFY
    async with executor_for(dsn, demo) as executor:
        lake = LakeState(demo)
        lake.update(await drift.check(executor.pool, demo, settings))
        assert not lake.drift.drifted
        task = asyncio.create_task(Watcher(lake, executor.pool, dsn, settings).run())
        try:
            await asyncio.sleep(0.5)  # LISTEN is in place
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("ALTER TABLE lake.hosts DROP COLUMN vcpus")
                conn.execute("NOTIFY ontoos_reload")
            for _ in range(100):
                if lake.drift.drifted:
                    break
                await asyncio.sleep(0.05)
        finally:
            task.cancel()
    assert set(lake.drift.columns) == {("hosts", "vcpus")} and lake.notice["schema_drift"] is True


async def test_a_database_that_cannot_be_reached_is_not_checked_and_says_so(demo, tmp_path):
    settings = Settings(dsn=f"host={tmp_path} port=1 connect_timeout=1", pool_timeout_s=0.5)
    async with executor_for(settings.dsn, demo, pool_timeout_s=0.5) as executor:
        found = await drift.check(executor.pool, demo, settings)
    assert found.checked_at is None and not found.drifted
    assert found.summary().startswith("drift: not checked (the database could not be reached")
