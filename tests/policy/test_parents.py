"""Rows of hidden parents do not leak through their children (exists_with).

A dataset that `exists_with` a to-one relation has rows only while the parent row meets it and
passes the parent's always-filters (and its own parents, up the chain). Checked here:

- the demo contract declares it for every readable child of a dataset that hides rows;
- every source of an exploration is joined to its parents (aliases p0, p1, ...) with their
  always-filters, a caller's join to the same parent row is reused, and the exploration's text,
  shape, fingerprint, budgets, notes and plan are exactly those of the contract without
  exists_with: the joins are the contract's, like the always-filters;
- nothing of a parent becomes nameable: every refusal is byte for byte the one the contract
  without exists_with gives, and a parent outside the role's read sets is answered as a dataset
  that does not exist, while its join and always-filter columns join the role's allowed set
  (and nothing else of it);
- on the demo lakehouse, the attack (a viewer counting containers per workload_id to find the
  deleted workloads, and so the deleted projects) answers as if they did not exist.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from ontoos_explore import ExploreError, compile_exploration, load_contract
from ontoos_explore.allowed import allowed_for_role
from ontoos_explore.catalog import describe_dataset
from ontoos_explore.contract import TO_ONE, parse_contract
from ontoos_explore.names import fold

from tests.named_queries import CONFIG_KEYS_FROM, KEPT
from tests.properties.hidden_rows import count_existing, without_exists_with

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "cases"
RAW: dict[str, Any] = yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text(encoding="utf-8"))
DEMO = load_contract(ROOT / "contracts" / "demo.yaml")
FLAT = without_exists_with(RAW)
GOLDEN = yaml.safe_load((CASES / "golden.yaml").read_text())


def crew_contract(without: str | None = None):
    """The demo with a role `crew` that reads containers and images only: their parents (workloads,
    projects, archives) are outside its read sets. `without`: a dataset never declared (nor anything
    naming it), for the answers a missing dataset gets."""
    data = copy.deepcopy(RAW)
    data["read_sets"]["crew"] = ["containers", "images"]
    data["roles"]["crew"] = {"read_sets": ["crew"], "max_rows": 50, "max_relations": 2}
    if without:
        del data["datasets"][without]
        data["relations"] = {k: r for k, r in data["relations"].items() if without not in (r["from"], r["to"])}
        data["read_sets"] = {k: [d for d in v if d != without] for k, v in data["read_sets"].items()}
        for ds in data["datasets"].values():  # exists_with naming a relation that went
            ds["exists_with"] = [r for r in ds.get("exists_with", []) if r in data["relations"]]
            if not ds["exists_with"]:
                del ds["exists_with"]
        for _ in data["datasets"]:  # and, up the chains, parents that no longer hide rows
            hides = {k for k, d in data["datasets"].items() if d.get("always_filter") or d.get("exists_with")}
            for ds in data["datasets"].values():
                kept = [r for r in ds.get("exists_with", []) if data["relations"][r]["to"] in hides]
                if "exists_with" in ds and kept != ds["exists_with"]:
                    ds["exists_with"] = kept
                    if not kept:
                        del ds["exists_with"]
    return parse_contract(yaml.safe_dump(data, sort_keys=False), source="<crew>")


CREW = crew_contract()


def error(source, contract, role) -> str:
    with pytest.raises(ExploreError) as ei:
        compile_exploration(source, contract, role)
    return json.dumps(ei.value.to_envelope()["error"], sort_keys=True)


# ---------------------------------------------------------------- the demo contract


def test_the_demo_children_exist_with_their_parents():
    assert {d: [r.name for r in DEMO.parents_of(d)] for d in DEMO.datasets if DEMO.parents_of(d)} == {
        "repo_stats": ["stats_project"], "workloads": ["project"], "containers": ["workload"],
        "images": ["archive"], "archives": ["archive_project"], "table_refs": ["ref_archive"],
        "configs": ["config_workload"],
    }


def test_every_readable_child_of_a_dataset_that_hides_rows_exists_with_it():
    """A child: a dataset with a to-one relation to a parent that hides rows (an always-filter or
    parents of its own), unless the parent exists with it (projects -> stats: repo stats exist with
    their project). The one exception, containers -> image, is a reference, checked on the data."""
    hiding = {fold(d.name) for d in DEMO.datasets.values() if d.always_filter or d.exists_with}
    readable = {fold(d) for role in DEMO.roles.values() for d in DEMO.scope(role)}
    children = set()
    for rel in DEMO.relations.values():
        back = any(fold(r.to) == fold(rel.from_) for r in DEMO.parents_of(rel.to))  # the parent is its child
        if rel.cardinality in TO_ONE and fold(rel.to) in hiding and fold(rel.from_) in readable and not back:
            children.add((rel.from_, rel.name))
    declared = {(d, r.name) for d in DEMO.datasets for r in DEMO.parents_of(d)}
    assert children - declared == {("containers", "image")}
    assert declared <= children


def test_no_container_refers_to_an_image_that_does_not_exist(pg_dsn):
    """containers -> image is not an exists_with (a container exists with its workload; its image is a
    reference); on the demo data no container that exists runs an image that does not."""
    with psycopg.connect(pg_dsn) as conn:
        containers, images = DEMO.dataset("containers"), DEMO.dataset("images")
        from psycopg import sql

        from tests.properties.hidden_rows import exists, table
        hidden = conn.execute(sql.SQL(
            "SELECT count(*) FROM {} AS c WHERE {} AND NOT EXISTS (SELECT 1 FROM {} AS i WHERE i.image_id = c.image_id "
            "AND {})").format(table(containers), exists(DEMO, containers, "c"), table(images),
                              exists(DEMO, images, "i", 1))).fetchone()[0]
    assert hidden == 0


# ---------------------------------------------------------------- the SQL


def test_a_child_is_joined_up_its_chain_with_each_parents_filter():
    q = compile_exploration("explore containers fields name", DEMO, "viewer")
    assert q.sql == (
        'SELECT "t0"."name" AS "name" FROM "lake"."k8s_containers" AS "t0" '
        'INNER JOIN "lake"."k8s_workloads" AS "p0" ON "t0"."workload_id" = "p0"."workload_id" '
        'INNER JOIN "lake"."gitlab_projects" AS "p1" ON "p0"."project_id" = "p1"."project_id" '
        'WHERE "p0"."is_deleted" = $1 AND "p1"."is_deleted" = $2 ORDER BY "t0"."container_id" ASC LIMIT 101')
    assert q.params == (False, False)
    assert [(s.caller, s.dataset, s.name) for s in q.slots] == [
        (False, "workloads", "is_deleted"), (False, "projects", "is_deleted")]
    assert q.parents == ("workloads", "projects") and q.datasets == ("containers",) and q.relations == ()


def test_a_caller_join_to_the_same_parent_row_is_reused():
    # the same relation, followed by the caller: its source is the parent (filtered as a source)
    q = compile_exploration("explore containers via workload fields name, workload.name", DEMO, "viewer")
    assert q.parents == ("projects",)
    assert 'INNER JOIN "lake"."gitlab_projects" AS "p0" ON "t1"."project_id" = "p0"."project_id"' in q.sql
    assert 'WHERE "t1"."is_deleted" = $1 AND "p0"."is_deleted" = $2' in q.sql
    # the child reached from its parent on the same columns: the parent is where it came from
    assert compile_exploration("explore workloads via containers fields name", DEMO, "analyst").parents == ("projects",)
    assert compile_exploration("explore projects via stats fields name", DEMO, "analyst").parents == ()
    assert compile_exploration("explore projects via workloads fields name", DEMO, "analyst").parents == ()


def test_each_source_brings_its_own_parents_in_order():
    q = compile_exploration("explore workloads via containers, image fields name, image.tag", DEMO, "analyst")
    # workloads -> its project; containers reuse t0; images -> archive -> project
    assert q.parents == ("projects", "archives", "projects")
    assert [s.dataset for s in q.slots if not s.caller] == ["workloads", "projects", "projects"]
    joins = [part.split(" ON ")[0] for part in q.sql.split("INNER JOIN ")[1:]]
    assert joins == ['"lake"."k8s_containers" AS "t1"', '"lake"."container_images" AS "t2"',
                     '"lake"."gitlab_projects" AS "p0"', '"lake"."code_archives" AS "p1"', '"lake"."gitlab_projects" AS "p2"']


@pytest.mark.parametrize("case", GOLDEN, ids=[c["id"] for c in GOLDEN])
def test_the_implied_joins_change_the_sql_only(case):
    """Text, shape, fingerprint, columns, datasets, relations, notes, limit and plan are the contract's
    without exists_with; the SQL only gains joins and filters; the same plan gives the same bytes."""
    q, flat = compile_exploration(case["source"], DEMO, case["role"]), compile_exploration(case["source"], FLAT, case["role"])
    same = ("normalized", "shape", "fingerprint", "columns", "datasets", "relations", "notes", "limit", "reads")
    assert {k: getattr(q, k) for k in same} == {k: getattr(flat, k) for k in same}
    # the plan too, but for its evidence: the parents are read, so their sources are the answer's too
    assert dataclasses.replace(q.plan, evidence=None) == dataclasses.replace(flat.plan, evidence=None)
    assert set(flat.plan.evidence.sources) <= set(q.plan.evidence.sources)
    assert q.plan.evidence.sources == tuple(sorted({s for d in (*q.datasets, *q.parents)
                                                    for s in DEMO.dataset(d).sources}))
    assert q.params[:len(flat.params)] == flat.params and all(not s.caller for s in q.slots[len(flat.slots):])
    assert q.sql.count("INNER JOIN") == flat.sql.count("INNER JOIN") + len(q.parents)
    assert compile_exploration(case["source"], DEMO, case["role"]).sql == q.sql


def test_budgets_count_only_what_the_caller_wrote():
    # the viewer follows at most one relation; the implied join to the project is not one
    q = compile_exploration("explore containers via workload fields workload.name", DEMO, "viewer")
    assert q.relations == ("workload",) and q.parents == ("projects",)
    # the parent's row cap (workloads: 1000) does not cap its children; the role's does
    assert compile_exploration("explore containers fields name", DEMO, "admin").limit == 5000
    assert compile_exploration("explore workloads fields name", DEMO, "admin").limit == 1000
    # nor do the parents' cost hints or heaviness
    q = compile_exploration("explore configs fields key where source = 'env'", DEMO, "analyst")
    assert [d for d, _ in q.plan.cost_hints] == ["configs"]


def test_a_heavy_parent_asks_its_children_for_no_filter():
    data = copy.deepcopy(RAW)
    data["datasets"]["workloads"]["heavy"] = True
    heavy = parse_contract(yaml.safe_dump(data, sort_keys=False), "heavy.yaml")
    q = compile_exploration("explore containers fields name", heavy, "viewer")
    assert q.parents == ("workloads", "projects") and q.plan.max_cost == DEMO.role("viewer").max_cost
    assert error("explore workloads fields name", heavy, "viewer")  # the parent itself is heavy


# ---------------------------------------------------------------- nothing of a parent is nameable

NAMING_PARENTS = [
    "explore containers fields p0.name",
    "explore containers fields workload.name",  # not followed
    "explore containers fields project.name",  # starts at workloads, not reached
    "explore containers fields name where p1.is_deleted = true",
    "explore containers fields name where workload.is_deleted = true",
    "explore containers fields name, is_deleted",
    "explore containers via project fields name",
    "explore containers fields name order by workload.created_at",
    "explore containers fields count() group by p0.namespace",
    "explore images via archive_project fields name",
    "explore archives via archive_project fields archive_project.is_deleted",
    "explore repo_stats via stats_project fields stats_project.ci_token",
]


@pytest.mark.parametrize("source", NAMING_PARENTS)
@pytest.mark.parametrize("role", ["viewer", "analyst"])
def test_naming_a_parent_is_refused_as_without_exists_with(source, role):
    assert error(source, DEMO, role) == error(source, FLAT, role)


CREW_REFUSALS = [
    "explore workloads fields name",
    "explore projects fields name",
    "explore containers via workload fields name",
    "explore containers via workload fields workload.name",
    "explore containers fields workload.name",
    "explore containers fields name where workload.is_deleted = false",
    "explore images via archive fields archive.language",
    "explore containers via image, archive fields name",
    "explore containers fields p0.workload_id",
]


@pytest.mark.parametrize("source", CREW_REFUSALS)
def test_a_parent_outside_the_read_sets_is_answered_as_missing(source):
    missing = crew_contract(without="workloads") if "workload" in source else crew_contract(without="archives")
    if source.startswith("explore projects"):
        missing = crew_contract(without="projects")
    assert error(source, CREW, "crew") == error(source, missing, "crew")


def test_a_parent_outside_the_read_sets_still_hides_its_childrens_rows():
    q = compile_exploration("explore containers via image fields name, image.tag", CREW, "crew")
    assert q.parents == ("workloads", "projects", "archives", "projects")
    assert describe_dataset(CREW, "crew", "containers")["relations"] == [
        {"name": "image", "to": "images", "cardinality": "many_to_one", "status": "ok"}]


def test_a_parents_join_and_filter_columns_join_the_allowed_set_and_nothing_else():
    crew = allowed_for_role(CREW, CREW.role("crew")).relations
    assert crew[("lake", "k8s_workloads")] == {"workload_id", "project_id", "is_deleted"}
    assert crew[("lake", "gitlab_projects")] == {"project_id", "is_deleted"}
    assert crew[("lake", "code_archives")] == {"archive_id", "project_id"}
    assert crew[("lake", "k8s_containers")] >= {"workload_id", "image_id"}
    # where the parent is readable, its allowed columns are what they were
    for role in DEMO.roles.values():
        mine, flat = allowed_for_role(DEMO, role).relations, allowed_for_role(FLAT, FLAT.role(role.name)).relations
        assert set(mine) == set(flat)
        for key in flat:
            assert mine[key] >= flat[key]
            extra = mine[key] - flat[key]
            ds = next(d for d in DEMO.datasets.values() if (d.schema_name, d.table_name) == key)
            assert extra <= {f.column for f in ds.always_filter} | {c for r in DEMO.parents_of(ds.name) for c in r.join} | {
                c for d in DEMO.datasets for r in DEMO.parents_of(d) if fold(r.to) == fold(ds.name) for c in r.join.values()}


# ---------------------------------------------------------------- on the demo lakehouse


def run(pg_dsn: str, source: str, role: str) -> tuple[list[tuple], bool]:
    q = compile_exploration(source, DEMO, role)
    with psycopg.connect(pg_dsn, cursor_factory=psycopg.RawCursor) as conn:
        with conn.transaction(force_rollback=True):
            conn.execute(f'SET LOCAL ROLE "ontoos_q_{role}"')
            rows = conn.execute(q.sql, q.params).fetchall()
    return rows[:q.limit], len(rows) > q.limit


def hidden_ids(pg_dsn: str) -> tuple[set[int], set[int], set[int]]:
    """(deleted workloads, live workloads of deleted projects, deleted projects), read directly."""
    with psycopg.connect(pg_dsn) as conn:
        deleted = {r[0] for r in conn.execute("SELECT workload_id FROM lake.k8s_workloads WHERE is_deleted")}
        orphans = {r[0] for r in conn.execute(
            "SELECT w.workload_id FROM lake.k8s_workloads w JOIN lake.gitlab_projects p ON p.project_id = w.project_id "
            "WHERE NOT w.is_deleted AND p.is_deleted")}
        projects = {r[0] for r in conn.execute("SELECT project_id FROM lake.gitlab_projects WHERE is_deleted")}
    assert deleted and orphans and projects  # the demo has something to hide
    return deleted, orphans, projects


def test_the_attack_sees_no_deleted_workload_nor_project(pg_dsn):
    deleted, orphans, projects = hidden_ids(pg_dsn)
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM lake.k8s_containers WHERE workload_id = ANY(%s)",
                            [sorted(deleted | orphans)]).fetchone()[0] > 0  # they have containers
    # a viewer counting containers per workload_id, a slice at a time (its row budget is 100)
    seen: set[int] = set()
    for low in range(0, 1000, 90):
        rows, truncated = run(pg_dsn, f"explore containers fields workload_id, count() where workload_id "
                                      f"between {low + 1} and {low + 90} group by workload_id", "viewer")
        assert not truncated
        seen |= {w for w, _ in rows}
    assert seen and not seen & (deleted | orphans)
    # compared with the workloads it may list: every one it counted containers of is one
    listed: set[int] = set()
    for low in range(0, 1000, 90):
        rows, _ = run(pg_dsn, f"explore workloads fields workload_id where workload_id between {low + 1} and {low + 90}",
                      "viewer")
        listed |= {w for (w,) in rows}
    assert seen <= listed
    # and so for projects, through archives and repo stats
    for source in ("explore archives fields project_id, count() group by project_id",
                   "explore repo_stats fields project_id"):
        rows, truncated = run(pg_dsn, source, "analyst")
        assert not truncated and rows and not {r[0] for r in rows} & projects
    # asked for one hidden id outright, a count answers 0
    for w in sorted(deleted)[:3] + sorted(orphans)[:3]:
        assert run(pg_dsn, f"explore containers fields count() where workload_id = {w}", "viewer")[0] == [(0,)]
        assert run(pg_dsn, f"explore configs fields count() where workload_id = {w}", "analyst")[0] == [(0,)]
    for p in sorted(projects)[:3]:
        assert run(pg_dsn, f"explore archives fields count() where project_id = {p}", "viewer")[0] == [(0,)]
        assert run(pg_dsn, f"explore workloads fields count() where project_id = {p}", "viewer")[0] == [(0,)]


@pytest.mark.parametrize("dataset", sorted(d for d in DEMO.datasets if DEMO.parents_of(d)))
def test_a_childs_count_is_its_rows_with_parents_that_exist(pg_dsn, dataset):
    """Counted by the role that reads it (a filter for a heavy dataset), against the reference written
    from the contract by hand (tests/properties/hidden_rows.py), and below the count of its rows."""
    ds = DEMO.dataset(dataset)
    where = f" where {ds.readable_columns()[0].name} is not null" if ds.heavy else ""
    [(n,)], _ = run(pg_dsn, f"explore {dataset} fields count(){where}", "admin")
    with psycopg.connect(pg_dsn) as conn:
        expected = count_existing(conn, DEMO, ds)
        filtered = count_existing(conn, FLAT, FLAT.dataset(dataset))
    assert n == expected < filtered


# ---------------------------------------------------------------- named queries (hand-written SQL)


def named(sql: str, bind: list, read_sets=("engineering",), columns=("n",)):
    from ontoos_explore.governance.registry import NamedQuery

    return NamedQuery.model_validate({"id": "q", "title": "t", "status": "approved", "read_sets": list(read_sets),
                                      "columns": list(columns), "max_rows": 10, "sql": sql, "bind": bind})


TRUE, FALSE = {"value": True, "type": "boolean"}, {"value": False, "type": "boolean"}


def test_a_parent_outside_the_read_sets_keeps_its_always_filter_in_named_queries():
    """engineering reads configs, not workloads: the allowed set now gives the guard workloads' join and
    filter columns, which must not let a named query count the deleted workloads, nor select them."""
    from ontoos_explore.policy.named import NamedQueryInvalid, verify_named

    counting = "SELECT count(*) AS n FROM lake.k8s_workloads w WHERE w.is_deleted = $1 LIMIT 11"
    with pytest.raises(NamedQueryInvalid, match="the always-filter on workloads.is_deleted must be w.is_deleted = false"):
        verify_named(named(counting, [TRUE]), DEMO)
    with pytest.raises(NamedQueryInvalid, match="k8s_workloads.workload_id is not readable: it may only filter or join"):
        verify_named(named(counting.replace("count(*)", "w.workload_id"), [FALSE]), DEMO)


def _values(slot) -> dict:
    """An enum parameter's values: its column's (a registry entry declares them)."""
    if slot.type != "enum":
        return {}
    return {"values": list(DEMO.dataset(slot.dataset).column(slot.column.rpartition(".")[2]).values)}


def promoted(source: str, role: str):
    """A compiled exploration as promotion writes it: its SQL, caller literals as parameters, contract
    values as constants, read sets holding the datasets it names."""
    q = compile_exploration(source, DEMO, role)
    sets = sorted(s for s, m in DEMO.read_sets.items() if {fold(d) for d in q.datasets} & {fold(x) for x in m})
    from ontoos_explore.governance.registry import NamedQuery

    params = [{"name": f"p{i}", "type": s.type, **_values(s)} for i, s in enumerate(q.slots) if s.caller]
    bind = [f"p{i}" if s.caller else {"value": v, "type": s.type} for i, (s, v) in enumerate(zip(q.slots, q.params))]
    return q, NamedQuery.model_validate({"id": "q", "title": "t", "status": "approved", "read_sets": sets,
                                         "parameters": params, "columns": list(q.columns), "max_rows": q.limit,
                                         "sql": q.sql, "bind": bind})


@pytest.mark.parametrize("source,role", [
    ("explore configs fields key, count() where source = 'env' group by key", "analyst"),
    ("explore table_refs fields file_path where access = 'write'", "admin"),
    ("explore containers via image fields name, image.tag", "viewer"),
])
def test_a_promoted_exploration_of_a_child_verifies_with_its_parents(source, role):
    from ontoos_explore.policy.named import verify_named

    q, entry = promoted(source, role)
    assert q.parents and set(entry.read_sets) <= {"published", "engineering"}
    datasets = verify_named(entry, DEMO).datasets
    # what it reads is what the exploration names: its parents are the contract's joins, read only for
    # their join and filter columns (the registry lists it for every role that may read those datasets)
    assert set(datasets) == set(q.datasets)


KEYS = "SELECT c.key AS key"
C_W = "c.workload_id = w.workload_id"
W_P = "w.project_id = p.project_id"


@pytest.mark.parametrize("sql, says", [
    # the entry's own dataset alone: the entries of deleted workloads (and projects) with it
    (f"{KEYS} FROM lake.config_entries c WHERE c.is_sensitive = $1 LIMIT 11",
     ["it reads configs (lake.config_entries AS c) without its parent workloads",
      "exists_with config_workload", "INNER JOIN lake.k8s_workloads AS <alias> ON c.workload_id = <alias>.workload_id"]),
    # a LEFT JOIN keeps the entries without a workload (a parent filter that NULL passes would keep them)
    (f"{KEYS} FROM lake.config_entries c LEFT JOIN lake.k8s_workloads w ON {C_W} INNER JOIN lake.gitlab_projects p "
     f"ON {W_P} WHERE {KEPT.format(n=1)} LIMIT 11", ["configs (lake.config_entries AS c) without its parent workloads"]),
    # joined on the wrong columns, or on the right ones under OR
    (f"{KEYS} FROM lake.config_entries c INNER JOIN lake.k8s_workloads w ON c.workload_id = w.project_id "
     f"INNER JOIN lake.gitlab_projects p ON {W_P} WHERE {KEPT.format(n=1)} LIMIT 11",
     ["configs (lake.config_entries AS c) without its parent workloads"]),
    (f"{KEYS} FROM lake.config_entries c INNER JOIN lake.k8s_workloads w ON ({C_W} OR $1) "
     f"INNER JOIN lake.gitlab_projects p ON {W_P} WHERE {KEPT.format(n=1)} LIMIT 11",
     ["configs (lake.config_entries AS c) without its parent workloads"]),
    # the chain broken one step up: the workload's project is not joined
    (f"{KEYS} FROM lake.config_entries c INNER JOIN lake.k8s_workloads w ON {C_W} "
     "WHERE c.is_sensitive = $1 AND w.is_deleted = $1 LIMIT 11",
     ["it reads workloads (lake.k8s_workloads AS w) without its parent projects", "exists_with project"]),
    # joined, but the parent's always-filter dropped: the deleted workloads' entries again
    (f"{KEYS} {CONFIG_KEYS_FROM} WHERE c.is_sensitive = $1 AND p.is_deleted = $1 LIMIT 11",
     ["it reads workloads (lake.k8s_workloads AS w) without the contract's always-filter on is_deleted"]),
    # a table read twice: each alias needs its parents (d is joined to nothing)
    (f"{KEYS} {CONFIG_KEYS_FROM} INNER JOIN lake.config_entries d ON d.key = c.key "
     f"WHERE {KEPT.format(n=1)} AND d.is_sensitive = $1 LIMIT 11",
     ["configs (lake.config_entries AS d) without its parent workloads"]),
], ids=["no-parent", "left-joined", "wrong-columns", "under-or", "grandparent-missing", "parent-unfiltered",
        "second-alias"])
def test_a_named_query_reading_a_child_without_its_parents_is_refused(sql, says):
    from ontoos_explore.policy.named import NamedQueryInvalid, verify_named

    with pytest.raises(NamedQueryInvalid) as refused:
        verify_named(named(sql, [FALSE], columns=("key",)), DEMO)
    for part in says:
        assert part in str(refused.value), str(refused.value)


@pytest.mark.parametrize("sql", [
    f"{KEYS} {CONFIG_KEYS_FROM} WHERE {KEPT.format(n=1)} LIMIT 11",
    # the equalities may be written either way round, or in WHERE (FROM a list, or beside an ON)
    f"{KEYS} FROM lake.config_entries c INNER JOIN lake.k8s_workloads w ON w.workload_id = c.workload_id "
    f"INNER JOIN lake.gitlab_projects p ON p.project_id = w.project_id WHERE {KEPT.format(n=1)} LIMIT 11",
    f"{KEYS} FROM lake.config_entries c, lake.k8s_workloads w, lake.gitlab_projects p "
    f"WHERE {C_W} AND {KEPT.format(n=1)} AND {W_P} LIMIT 11",
    f"{KEYS} FROM lake.config_entries c INNER JOIN lake.k8s_workloads w ON c.updated_at IS NOT NULL AND {C_W} "
    f"INNER JOIN lake.gitlab_projects p ON p.is_deleted = $1 AND {W_P} WHERE {KEPT.format(n=1)} LIMIT 11",
    # a LEFT JOIN to a dataset without parents keeps nothing the parents hide
    f"{KEYS} {CONFIG_KEYS_FROM} LEFT JOIN lake.hosts h ON h.hostname = c.key WHERE {KEPT.format(n=1)} LIMIT 11",
], ids=["as-written", "reversed", "in-where", "among-other-conditions", "beside-a-left-join"])
def test_a_named_query_joining_each_parent_on_its_relation_is_accepted(sql):
    from ontoos_explore.policy.named import verify_named

    datasets = verify_named(named(sql, [FALSE], columns=("key",)), DEMO).datasets
    assert "configs" in datasets and not {"workloads", "projects"} & set(datasets)  # only joined and filtered


def test_the_parent_rule_keeps_a_named_query_to_the_rows_an_exploration_sees(pg_dsn):
    """Counted on the lake: the accepted query counts what the contract says exists; the one the rule
    refuses counts the entries of deleted workloads and projects too."""
    counted = f"SELECT count(*) {CONFIG_KEYS_FROM} WHERE {KEPT.format(n=1)}"
    orphaned = "SELECT count(*) FROM lake.config_entries c WHERE c.is_sensitive = $1"
    with psycopg.connect(pg_dsn, cursor_factory=psycopg.RawCursor) as conn:
        [(kept,)] = conn.execute(counted, [False]).fetchall()
        [(all_of_them,)] = conn.execute(orphaned, [False]).fetchall()
        assert kept == count_existing(conn, DEMO, DEMO.dataset("configs")) < all_of_them


def test_a_parent_whose_other_columns_a_named_query_reads_is_one_it_reads():
    q, entry = promoted("explore containers via workload fields name, workload.name", "viewer")
    assert verify_named_datasets(entry) == ("containers", "workloads")  # workload.name: the caller's read
    q, entry = promoted("explore containers via workload fields name where cpu_millis > 1", "viewer")
    assert verify_named_datasets(entry) == ("containers",)  # workloads only joined and filtered, as a parent


def verify_named_datasets(entry) -> tuple[str, ...]:
    from ontoos_explore.policy.named import verify_named

    return verify_named(entry, DEMO).datasets
