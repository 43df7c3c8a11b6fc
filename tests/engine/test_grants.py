"""The third wall: database roles whose column grants are exactly the guard's allowed set (a child's
parents' join and always-filter columns included, even outside the role's read sets)."""

from __future__ import annotations

import psycopg
import pytest
import yaml

from ontoos_explore import compile_exploration
from ontoos_explore.allowed import allowed_for_role
from ontoos_explore.contract import parse_contract
from ontoos_explore.engine import grants

from ..conftest import ROOT


def privileges(dsn: str, db_role: str) -> set[tuple[str, str, str]]:
    with psycopg.connect(dsn) as conn:
        return set(conn.execute(
            "SELECT table_schema, table_name, column_name FROM information_schema.column_privileges "
            "WHERE grantee = %s AND privilege_type = 'SELECT'", [db_role]).fetchall())


def expected(contract, role_name: str) -> set[tuple[str, str, str]]:
    """The guard's allowed set, and the publish log's five columns (every role here reads a dataset
    with sources: its answers read their evidence as it)."""
    allowed = allowed_for_role(contract, contract.role(role_name))
    log = {("lake", "publish_log", c) for c in ("source", "batch_id", "collected_at", "published_at", "as_of")}
    return {(s, t, c) for (s, t), cols in allowed.relations.items() for c in cols} | log


def test_a_role_reading_no_dataset_with_sources_gets_nothing_of_the_publish_log(demo):
    data = yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text())
    data["read_sets"]["ops"] = ["hosts"]
    data["roles"]["ops"] = {"read_sets": ["ops"]}
    ops = parse_contract(yaml.safe_dump(data), "demo.yaml")
    statements = [stmt.as_string(None) for role, stmt in grants.role_statements(ops, "p_") if role == "p_ops"]
    assert not [s for s in statements if "publish_log" in s]
    assert [s for s in statements if s.startswith("GRANT SELECT")] == [
        'GRANT SELECT ("cluster", "decommissioned", "host_id", "hostname", "instance_type", "launched_at", '
        '"memory_gb", "provider", "region", "vcpus") ON "lake"."hosts" TO "p_ops"']


def test_script_names_every_role_and_no_secret(demo):
    text = grants.script(demo, "ontoos_q_")
    for role in demo.roles:
        assert f'CREATE ROLE "ontoos_q_{role}" NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL;' in text
    secrets = {c.name for d in demo.datasets.values() for c in d.columns.values() if c.secret}
    grant_lines = [line for line in text.splitlines() if line.startswith("GRANT SELECT")]
    assert grant_lines
    for line in grant_lines:
        for secret in secrets:
            assert f'"{secret}"' not in line, line


def test_the_script_can_be_applied_twice(pg_dsn, demo):
    """`ontoos grants | psql` run again (a new read set, a second DBA) changes nothing and fails nowhere."""
    from tests.databases import new_database

    dsn = new_database(pg_dsn, "grants_twice")
    text = grants.script(demo, "ontoos_g2_")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA lake")
        from ontoos_explore.engine import demo_data

        demo_data.ensure(conn, scale=0.05, seed=1)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(text)
        first = privileges(dsn, "ontoos_g2_analyst")
        conn.execute(text)  # again: the roles exist, the grants are the same
    assert first == privileges(dsn, "ontoos_g2_analyst") == expected(demo, "analyst")


@pytest.mark.parametrize("role", ["viewer", "analyst", "admin"])
def test_applied_grants_equal_the_allowed_set(pg_dsn, demo, role):
    assert privileges(pg_dsn, f"ontoos_q_{role}") == expected(demo, role)


def test_the_query_role_cannot_read_a_secret_column(pg_dsn):
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("SET ROLE ontoos_q_analyst")
        assert conn.execute("SELECT count(name) FROM lake.k8s_workloads").fetchone()[0] > 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT env_dump FROM lake.k8s_workloads LIMIT 1")
        conn.rollback()
        conn.execute("SET ROLE ontoos_q_analyst")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT w FROM lake.k8s_workloads w LIMIT 1")  # a whole-row reference reads everything
        conn.rollback()
        conn.execute("SET ROLE ontoos_q_viewer")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT hostname FROM lake.hosts LIMIT 1")  # outside the viewer's read sets


def test_apply_is_idempotent_and_revokes_what_the_contract_drops(pg_dsn):
    data = yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text())
    narrow = parse_contract(yaml.safe_dump(data), "demo.yaml")
    prefix = "ontoos_g_"
    with psycopg.connect(pg_dsn) as conn:
        grants.apply(conn, narrow, prefix)
    with psycopg.connect(pg_dsn) as conn:
        grants.apply(conn, narrow, prefix)  # twice: the same
    assert privileges(pg_dsn, f"{prefix}analyst") == expected(narrow, "analyst")
    del data["datasets"]["hosts"]["columns"]["region"]
    changed = parse_contract(yaml.safe_dump(data), "demo.yaml")
    with psycopg.connect(pg_dsn) as conn:
        grants.apply(conn, changed, prefix)
    after = privileges(pg_dsn, f"{prefix}analyst")
    assert ("lake", "hosts", "region") not in after and after == expected(changed, "analyst")


def test_a_role_is_granted_its_childrens_parent_columns_even_outside_its_read_sets(pg_dsn):
    """exists_with: a role reading containers and images, but none of their parents (workloads, projects,
    archives), is granted SELECT on the parents' join and always-filter columns, so its queries hide the
    children of hidden parents, and on nothing else of them."""
    data = yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text())
    data["read_sets"]["crew"] = ["containers", "images"]
    data["roles"]["crew"] = {"read_sets": ["crew"], "max_rows": 50}
    crew = parse_contract(yaml.safe_dump(data), "demo.yaml")
    prefix = "ontoos_e_"
    with psycopg.connect(pg_dsn) as conn:
        grants.apply(conn, crew, prefix)
    granted = privileges(pg_dsn, f"{prefix}crew")
    assert granted == expected(crew, "crew")
    assert {c for s, t, c in granted if t == "k8s_workloads"} == {"workload_id", "project_id", "is_deleted"}
    assert {c for s, t, c in granted if t == "gitlab_projects"} == {"project_id", "is_deleted"}
    assert {c for s, t, c in granted if t == "code_archives"} == {"archive_id", "project_id"}
    q = compile_exploration("explore containers via image fields name, image.tag where cpu_millis > 100", crew, "crew")
    assert q.parents == ("workloads", "projects", "archives", "projects")
    with psycopg.connect(pg_dsn, cursor_factory=psycopg.RawCursor) as conn:
        conn.execute(f'SET ROLE "{prefix}crew"')
        assert conn.execute(q.sql, q.params).fetchall()
        for hidden in ("SELECT name FROM lake.k8s_workloads LIMIT 1", "SELECT path FROM lake.gitlab_projects LIMIT 1",
                       "SELECT commit_sha FROM lake.code_archives LIMIT 1"):
            conn.rollback()
            conn.execute(f'SET ROLE "{prefix}crew"')
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(hidden)
