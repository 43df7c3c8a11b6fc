"""Evidence, read with the rows: every answer names the publish log's current batches of what it read,
from the rows' own snapshot, on the demo lake's publish log (written when it was loaded)."""

from __future__ import annotations

import datetime as dt
import json

import psycopg
import pytest

from ontoos_explore.require import Require
from ontoos_explore.service import Explorer

from ..conftest import ROOT, executor_for

pytestmark = pytest.mark.anyio


def current(dsn: str) -> dict[str, tuple[str, dt.datetime | None, dt.datetime]]:
    with psycopg.connect(dsn) as conn:
        return {s: (b, c, p) for s, b, c, p in conn.execute(
            "SELECT DISTINCT ON (source) source, batch_id, collected_at, published_at FROM lake.publish_log "
            "ORDER BY source, published_at DESC")}


def config_keys(tmp_path, demo):
    """A registry of one approved named query reading configs (k8s's, under workloads and projects)."""
    import yaml

    from ontoos_explore.governance.registry import Registry
    from tests.named_queries import CONFIG_KEYS_FROM, KEPT

    entry = {"id": "config_keys", "title": "Config keys", "status": "approved", "read_sets": ["engineering"],
             "columns": ["key"], "max_rows": 5, "sql": f"SELECT c.key AS key {CONFIG_KEYS_FROM} WHERE {KEPT.format(n=1)} "
             "LIMIT 6", "bind": [{"value": False, "type": "boolean"}]}
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"queries": [entry]}))
    registry = Registry.load(path, demo)
    assert registry.problems == []
    return registry


async def test_an_answer_names_the_batches_it_read_and_how_old_they_are(pg_dsn, demo):
    log = current(pg_dsn)
    async with executor_for(pg_dsn, demo) as executor:
        before = dt.datetime.now(dt.timezone.utc)
        answer = await Explorer(demo, executor).explore("explore containers fields name limit 3", "viewer")
        after = dt.datetime.now(dt.timezone.utc)
    assert answer.ok, answer.envelope
    ev = answer.envelope["meta"]["evidence"]
    # containers are k8s's, and exist with their workload (k8s) and its project (gitlab)
    assert ev["source_batch"] == {"gitlab": log["gitlab"][0], "k8s": log["k8s"][0]}
    assert ev["consistency"] == "fixed_read" and ev["freshness"]["class"] == "exact"
    oldest = min(log["gitlab"][1], log["k8s"][1])
    assert ev["collected_at"] == oldest.isoformat().replace("+00:00", "Z")
    assert (before - oldest).total_seconds() - 1 <= ev["freshness"]["age_seconds"] <= (after - oldest).total_seconds()
    assert ev["freshness"]["threshold_seconds"] == 86_400 and ev["freshness"]["fresh"] is True


@pytest.mark.parametrize("source, role, expect", [
    ("explore images fields tag limit 2", "viewer", {"class": "estimated", "fresh": True}),  # registry: publish time only
    ("explore tables fields table_name limit 2", "analyst", {"class": "exact", "fresh": False}),  # cmdb: stale
    ("explore hosts fields hostname limit 2", "analyst", {"class": "unknown", "fresh": None}),  # no source
])
async def test_each_kind_of_freshness_on_the_demo(pg_dsn, demo, source, role, expect):
    async with executor_for(pg_dsn, demo) as executor:
        answer = await Explorer(demo, executor).explore(source, role)
    assert answer.ok, answer.envelope
    freshness = answer.envelope["meta"]["evidence"]["freshness"]
    assert {k: freshness[k] for k in expect} == expect
    assert answer.envelope["meta"]["evidence"]["consistency"] == ("unverified" if expect["class"] == "unknown"
                                                                 else "fixed_read")


async def test_a_new_batch_is_the_next_answers_and_changes_the_fingerprint(pg_dsn, demo):
    ask = "explore workloads fields name limit 1"
    async with executor_for(pg_dsn, demo) as executor:
        explorer = Explorer(demo, executor)
        first = (await explorer.explore(ask, "viewer")).envelope["meta"]["evidence"]
        now = dt.datetime.now(dt.timezone.utc)
        with psycopg.connect(pg_dsn) as conn:
            conn.execute("INSERT INTO lake.publish_log VALUES ('k8s', 'test-newest', %s, %s, %s)", [now, now, now])
        try:
            second = (await explorer.explore(ask, "viewer")).envelope["meta"]["evidence"]
        finally:
            with psycopg.connect(pg_dsn) as conn:
                conn.execute("DELETE FROM lake.publish_log WHERE batch_id = 'test-newest'")
    assert second["source_batch"]["k8s"] == "test-newest" != first["source_batch"]["k8s"]
    assert second["source_batch"]["gitlab"] == first["source_batch"]["gitlab"]
    assert second["batch_fingerprint"] != first["batch_fingerprint"]
    # the oldest collection is gitlab's, before and after: k8s's new batch does not make the answer look newer
    assert second["collected_at"] == first["collected_at"]
    assert second["freshness"]["age_seconds"] >= first["freshness"]["age_seconds"]


async def test_a_named_query_answer_carries_its_evidence_too(pg_dsn, demo, tmp_path):
    registry = config_keys(tmp_path, demo)
    log = current(pg_dsn)
    async with executor_for(pg_dsn, demo) as executor:
        answer = await registry.run(Explorer(demo, executor), "analyst", "config_keys", {})
    assert answer.ok, answer.envelope
    ev = answer.envelope["meta"]["evidence"]
    # configs are k8s's; their workloads (k8s) and projects (gitlab) are the parents they exist with
    assert ev["source_batch"] == {"gitlab": log["gitlab"][0], "k8s": log["k8s"][0]}
    assert ev["consistency"] == "fixed_read" and ev["freshness"]["class"] == "exact"


async def test_a_role_not_granted_the_publish_log_answers_with_its_evidence_unknown(pg_dsn, demo, caplog):
    """`ontoos grants` not run again after the contract named a publish log: the answer still comes,
    its evidence unread (unknown, unverified), and the log says what to run."""
    from ontoos_explore.engine import grants

    prefix = "ontoos_nolog_"
    with psycopg.connect(pg_dsn) as conn:
        grants.apply(conn, demo, prefix)
        conn.execute(f'REVOKE SELECT ON lake.publish_log FROM "{prefix}viewer"')
    try:
        async with executor_for(pg_dsn, demo, role_prefix=prefix) as executor:
            answer = await Explorer(demo, executor).explore("explore workloads fields name limit 2", "viewer")
            again = await Explorer(demo, executor).explore("explore workloads fields name limit 2", "viewer")
    finally:
        with psycopg.connect(pg_dsn) as conn:
            grants.apply(conn, demo, prefix)
    assert answer.ok and again.ok and len(answer.envelope["data"]["rows"]) == 2
    ev = answer.envelope["meta"]["evidence"]
    assert ev["freshness"]["class"] == "unknown" and ev["consistency"] == "unverified" and ev["source_batch"] == {}
    assert "not granted" in ev["freshness"]["unknown_because"]
    warned = [r.getMessage() for r in caplog.records if "cannot read the publish log" in r.getMessage()]
    assert len(warned) == 1 and "run ontoos grants" in warned[0]  # asked once, not per answer


async def test_a_grant_revoked_after_the_check_costs_no_answer(pg_dsn, demo, caplog):
    """The log was readable when checked, then its grant went: the answer is asked again without it."""
    from ontoos_explore.engine import grants

    prefix = "ontoos_lost_"
    with psycopg.connect(pg_dsn) as conn:
        grants.apply(conn, demo, prefix)
    try:
        async with executor_for(pg_dsn, demo, role_prefix=prefix) as executor:
            explorer = Explorer(demo, executor)
            first = await explorer.explore("explore workloads fields name limit 2", "viewer")
            with psycopg.connect(pg_dsn) as conn:
                conn.execute(f'REVOKE SELECT ON lake.publish_log FROM "{prefix}viewer"')
            second = await explorer.explore("explore workloads fields name limit 2", "viewer")
            # the query's own privileges still hold: a real denial is no lost log, and fails as it should
            with psycopg.connect(pg_dsn) as conn:
                conn.execute(f'REVOKE SELECT ON lake.k8s_workloads FROM "{prefix}viewer"')
            denied = await explorer.explore("explore workloads fields name limit 2", "viewer")
    finally:
        with psycopg.connect(pg_dsn) as conn:
            grants.apply(conn, demo, prefix)
    assert first.envelope["meta"]["evidence"]["consistency"] == "fixed_read"
    assert second.ok and second.envelope["data"]["rows"] == first.envelope["data"]["rows"]
    assert second.envelope["meta"]["evidence"]["freshness"]["class"] == "unknown"
    assert any("could not be read" in r.getMessage() for r in caplog.records)
    assert not denied.ok and denied.error.code == "EX904" and "publish_log" not in json.dumps(denied.envelope)


def test_a_parent_outside_the_read_sets_gives_the_evidence_nothing():
    """crew reads containers and images, not their parents: their sources and names stay out."""
    import copy

    import yaml

    from ontoos_explore.contract import parse_contract
    from ontoos_explore.evidence import spec_for

    data = yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text())
    data = copy.deepcopy(data)
    data["read_sets"]["crew"] = ["containers", "images"]
    data["roles"]["crew"] = {"read_sets": ["crew"]}
    crew = parse_contract(yaml.safe_dump(data), "crew.yaml")
    scope = crew.scope(crew.role("crew"))
    assert spec_for(crew, [crew.dataset("containers")], scope).sources == ("k8s",)  # not workloads' k8s, projects' gitlab
    assert spec_for(crew, [crew.dataset("images")], scope).sources == ("registry",)
    assert spec_for(crew, [crew.dataset("containers")], scope).threshold_s == crew.evidence.threshold_s  # not workloads' 24 h


def test_publish_log_text_that_is_no_point_in_time_is_unknown_not_a_failure():
    from ontoos_explore.engine.publish_log import batches

    rows = [("a", "1", "infinity", "2026-12-01 10:00:00+00", None), ("b", "2", None, "infinity", None),
            ("c", "3", "2026-12-01 09:00:00", "2026-12-01 10:00:00", None)]
    found = batches(rows)
    assert [(b.source, b.collected_at) for b in found] == [("a", None)]  # b and c have no published time it can age


async def test_a_requirement_the_evidence_meets_returns_the_rows_and_one_it_cannot_meet_none(pg_dsn, demo):
    ask = {"dataset": "workloads", "fields": ["name"], "limit": 2}
    async with executor_for(pg_dsn, demo) as executor:
        explorer = Explorer(demo, executor)
        met = await explorer.explore({**ask, "require": {"max_age_s": 10**8, "consistency": "fixed_read"}}, "viewer")
        unmet = await explorer.explore({**ask, "require": {"max_age_s": 60}}, "viewer")
        stale = await explorer.explore("explore tables fields table_name limit 2", "analyst",
                                       require=Require(max_age_s=86_400))  # cmdb: 80 h old
    assert met.ok and len(met.envelope["data"]["rows"]) == 2
    assert not unmet.ok and "data" not in unmet.envelope
    assert unmet.envelope["error"]["subtype"] == "CONSISTENCY_UNVERIFIED" and unmet.status == 412
    age = unmet.envelope["meta"]["evidence"]["freshness"]["age_seconds"]
    assert f"collected {age} s" in unmet.envelope["error"]["message"]  # how old, as the evidence says
    assert unmet.envelope["meta"]["evidence"]["source_batch"] == met.envelope["meta"]["evidence"]["source_batch"]
    assert not stale.ok and "older than the 86400 s required" in stale.envelope["error"]["message"]


async def test_a_dry_run_carries_the_evidence_it_would_read_and_is_held_to_a_requirement(pg_dsn, demo):
    log = current(pg_dsn)
    async with executor_for(pg_dsn, demo) as executor:
        explorer = Explorer(demo, executor)
        plan = await explorer.explore("explore workloads fields name limit 2", "viewer", dry_run=True)
        refused = await explorer.explore("explore hosts fields hostname limit 2", "analyst", dry_run=True,
                                         require=Require(max_age_s=10**8))
        snapshot = await explorer.explore("explore workloads fields name limit 2", "viewer", dry_run=True,
                                          require=Require(consistency="fixed_read"))
    assert plan.ok and plan.envelope["meta"]["dry_run"] is True
    assert plan.envelope["meta"]["evidence"]["source_batch"] == {"gitlab": log["gitlab"][0], "k8s": log["k8s"][0]}
    assert plan.envelope["meta"]["evidence"]["consistency"] == "unverified"  # no rows were read with them
    assert not refused.ok and "no source feeds hosts" in refused.envelope["error"]["message"]
    assert snapshot.envelope["error"]["code"] == "EX701"


async def test_a_retry_offered_keeps_the_callers_requirement(pg_dsn, demo):
    async with executor_for(pg_dsn, demo) as executor:
        explorer = Explorer(demo, executor)
        answer = await explorer.explore({"dataset": "workloads", "fields": ["nmae"],
                                         "require": {"max_age_s": 60, "consistency": "fixed_read"}}, "viewer")
        explicit = await explorer.explore({"dataset": "workloads", "fields": ["nmae"]}, "viewer",
                                          require=Require(max_age_s=5))
    assert answer.envelope["error"]["retry_with"] == {
        "dataset": "workloads", "fields": ["name"], "require": {"max_age_s": 60, "consistency": "fixed_read"}}
    assert explicit.envelope["error"]["retry_with"]["require"] == {"max_age_s": 5, "consistency": "any"}


async def test_a_named_query_is_held_to_a_requirement_too(pg_dsn, demo, tmp_path):
    registry = config_keys(tmp_path, demo)
    async with executor_for(pg_dsn, demo) as executor:
        explorer = Explorer(demo, executor)
        refused = await registry.run(explorer, "analyst", "config_keys", {}, Require(max_age_s=1))
        met = await registry.run(explorer, "analyst", "config_keys", {}, Require(consistency="fixed_read"))
    assert not refused.ok and refused.envelope["error"]["code"] == "EX701" and "data" not in refused.envelope
    assert met.ok and met.envelope["data"]["rows"]


async def test_the_rows_and_their_batches_come_from_one_snapshot(pg_dsn, demo, tmp_path):
    """A batch published while the query runs (after its snapshot) is not the answer's evidence: the
    rows were read without it, so naming it would claim data the answer does not have. Under READ
    COMMITTED the evidence statement, coming after the query, would see it."""
    import asyncio

    import yaml

    from ontoos_explore.contract import load_contract
    from tests.databases import demo_database

    data = yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text())
    data["datasets"]["slow"] = {"relation": "lake.slow", "sources": ["k8s"],
                                "columns": {"id": {"type": "integer"}, "label": {"type": "text"}}}
    data["read_sets"]["engineering"].append("slow")
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    contract = load_contract(path)
    dsn = demo_database(pg_dsn, "snapshot", contract,
                        "CREATE VIEW lake.slow AS SELECT 1 AS id, 'x'::text AS label FROM pg_sleep(0.6)")
    ask = "explore slow fields id, label limit 1"
    async with executor_for(dsn, contract) as executor:
        explorer = Explorer(contract, executor)
        before = (await explorer.explore(ask, "analyst")).envelope["meta"]["evidence"]["source_batch"]["k8s"]
        running = asyncio.ensure_future(explorer.explore(ask, "analyst"))
        await asyncio.sleep(0.3)  # the query is sleeping in its snapshot
        now = dt.datetime.now(dt.timezone.utc)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO lake.publish_log VALUES ('k8s', 'published-meanwhile', %s, %s, %s)",
                         [now, now, now])
        during = await running
        after = await explorer.explore(ask, "analyst")
    assert during.ok and during.envelope["meta"]["evidence"]["consistency"] == "fixed_read"
    assert during.envelope["meta"]["evidence"]["source_batch"]["k8s"] == before  # the snapshot's batch
    assert after.envelope["meta"]["evidence"]["source_batch"]["k8s"] == "published-meanwhile"


def test_the_current_batches_statement_reads_sources_named_with_quotes_as_they_are(pg_dsn):
    """The sources are written into the statement as literals (no array to adapt on every answer): a
    name holding a quote reads its own batch, and no other."""
    from ontoos_explore.engine.publish_log import batches, current_batches_sql

    with psycopg.connect(pg_dsn) as conn:  # rolled back at the end of the block
        conn.execute("INSERT INTO lake.publish_log (source, batch_id, collected_at, published_at, as_of) VALUES "
                     "('it''s', 'quoted-1', NULL, now(), NULL), ('it', 'plain-1', NULL, now(), NULL)")
        found = batches(conn.execute(current_batches_sql("lake", "publish_log", ("it's", "k8s"))).fetchall())
        none = conn.execute(current_batches_sql("lake", "publish_log", ())).fetchall()
        conn.rollback()
    assert {b.source: b.batch_id for b in found}.keys() == {"it's", "k8s"}
    assert {b.source: b.batch_id for b in found}["it's"] == "quoted-1"
    assert none == []
