"""Rows of hidden parents do not leak through their children: the property, on the demo lakehouse.

For random explorations rooted at a dataset that exists only with its parents (`exists_with`),
for every role: the compiled query, run as the role's database role on the demo lakehouse,
answers exactly what the same exploration answers under the contract without `exists_with`, run
on a copy of the lakehouse from which the rows of hidden parents' children were deleted
(`hidden_rows.prune`, written from the contract by hand). So no returned row, and no count, sum
or distinct value, comes from a child of a row the contract hides, along the whole chain.

Both answers come from `limit + 1` rows: they are compared whole (as multisets: an order may
leave ties) when neither is truncated, and must agree on being truncated otherwise.
"""

from __future__ import annotations

import psycopg
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ontoos_explore import ExploreError, compile_exploration, load_contract
from ontoos_explore.engine import demo_data

from ..conftest import DEMO_SCALE, DEMO_SEED, ROOT
from ..databases import new_database
from .hidden_rows import prune, without_exists_with
from .strategies import contract_explorations

DEMO = load_contract(ROOT / "contracts" / "demo.yaml")
FLAT = without_exists_with(yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text(encoding="utf-8")))
CHILDREN = sorted(d.name for d in DEMO.datasets.values() if d.exists_with)
SETTINGS = dict(derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))

# Explorations over children written by hand: every one is compared whole (none is truncated).
WRITTEN = [
    # the attack: a viewer counting containers per workload_id, to find the deleted workloads
    ("viewer", "explore containers fields workload_id, count() as n where workload_id <= 90 group by workload_id"),
    ("admin", "explore containers fields workload_id, count() as n group by workload_id"),
    ("admin", "explore containers via workload fields workload.project_id, count() group by workload.project_id"),
    ("admin", "explore workloads via containers fields namespace, count() as n group by namespace"),
    ("admin", "explore workloads fields project_id, count() group by project_id"),
    ("admin", "explore archives fields project_id, count(distinct commit_sha) group by project_id"),
    ("admin", "explore repo_stats fields project_id, open_mrs"),
    ("admin", "explore images via archive fields archive.project_id, count() group by archive.project_id"),
    ("admin", "explore configs fields workload_id, count() where workload_id <= 150 group by workload_id"),
    ("admin", "explore table_refs fields archive_id, count() where access = 'write' and archive_id <= 250 group by archive_id"),
    ("admin", "explore table_refs via table fields table.database_id, count() where confidence >= 0.5 group by table.database_id"),
    ("analyst", "explore containers via image fields image.archive_id, sum(cpu_millis) group by image.archive_id"),
]


@pytest.fixture(scope="module")
def pruned_dsn(pg_dsn):
    """A database of its own holding the demo lakehouse without the rows of hidden parents' children."""
    dsn = new_database(pg_dsn, "pruned")
    with psycopg.connect(dsn) as conn:
        demo_data.ensure(conn, scale=DEMO_SCALE, seed=DEMO_SEED)
    with psycopg.connect(dsn) as conn:
        gone = prune(conn, DEMO)
    assert all(gone[name] > 0 for name in CHILDREN), gone  # every child had rows to hide
    return dsn


def rows_of(dsn: str, q, db_role: str | None) -> list[tuple]:
    with psycopg.connect(dsn, cursor_factory=psycopg.RawCursor) as conn:
        with conn.transaction(force_rollback=True):
            if db_role:
                conn.execute(f'SET LOCAL ROLE "{db_role}"')  # the grants: the third wall, as the executor runs it
            return conn.execute(q.sql, q.params).fetchall()


def same_answer(role: str, source, pg_dsn: str, pruned: str) -> bool:
    """Compare the two answers; True when they were compared whole."""
    q = compile_exploration(source, DEMO, role)
    flat = compile_exploration(source, FLAT, role)
    assert (q.normalized, q.fingerprint, q.columns) == (flat.normalized, flat.fingerprint, flat.columns)
    got, want = rows_of(pg_dsn, q, f"ontoos_q_{role}"), rows_of(pruned, flat, None)
    truncated = len(got) > q.limit
    assert truncated == (len(want) > q.limit), (q.normalized, len(got), len(want))
    if not truncated:
        assert sorted(got, key=repr) == sorted(want, key=repr), q.normalized
    return not truncated


@pytest.mark.parametrize("role,source", WRITTEN, ids=[f"{r}-{i}" for i, (r, _) in enumerate(WRITTEN)])
def test_written_explorations_of_children_answer_as_if_hidden_parents_had_none(role, source, pg_dsn, pruned_dsn):
    assert same_answer(role, source, pg_dsn, pruned_dsn), "compared whole"


@settings(max_examples=150, **SETTINGS)
@given(data=st.data())
def test_random_explorations_of_children_answer_as_if_hidden_parents_had_none(data, pg_dsn, pruned_dsn):
    role = data.draw(st.sampled_from(sorted(DEMO.roles)))
    exploration = data.draw(contract_explorations(DEMO, roots=CHILDREN))
    try:
        compile_exploration(exploration, DEMO, role)
    except ExploreError as err:
        # refused alike: exists_with changes no refusal
        with pytest.raises(ExploreError) as flat:
            compile_exploration(exploration, FLAT, role)
        assert flat.value.to_envelope()["error"] == err.to_envelope()["error"]
        assume(False)
    same_answer(role, exploration, pg_dsn, pruned_dsn)
