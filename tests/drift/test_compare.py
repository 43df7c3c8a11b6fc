"""Drift, the comparison (drift/compare.py) on catalogs built by hand: each kind of finding, and what
each makes unavailable, by its rules."""

from __future__ import annotations

import pytest

from ontoos_explore.contract import PUBLISH_LOG_COLUMNS
from ontoos_explore.drift import Catalog, compare
from ontoos_explore.drift.compare import ACCEPTS, ROWS_UNDECIDED, _reads_as
from ontoos_explore.engine import grants

PG = {"text": ("text", "S"), "enum": ("character varying(20)", "S"), "integer": ("bigint", "N"),
      "numeric": ("numeric(12,2)", "N"), "boolean": ("boolean", "B"), "date": ("date", "D"),
      "timestamp": ("timestamp with time zone", "D")}
PREFIX = "p_"


def catalog_for(contract, drop: tuple = (), retype: dict | None = None, grants_of=None) -> Catalog:
    """What a database exactly as the contract describes it has; `drop`: tables (schema, table) or
    columns (schema, table, column) it lacks; `retype`: (schema, table, column) -> (type, category)."""
    tables: dict = {}
    for ds in contract.datasets.values():
        tables[(ds.schema_name, ds.table_name)] = {c.name: PG[c.type] for c in ds.columns.values()}
    log = contract.evidence
    tables[(log.schema_name, log.table_name)] = {c: PG["timestamp"] if c.endswith("_at") or c == "as_of" else PG["text"]
                                                 for c in PUBLISH_LOG_COLUMNS}
    for (*where, column), found in (retype or {}).items():
        tables[tuple(where)][column] = found
    for item in drop:
        if len(item) == 2:
            tables.pop(item)
        else:
            tables[item[:2]].pop(item[2])
    expected = grants.expected(contract, PREFIX)
    return Catalog(tables, frozenset(expected), grants_of(expected) if grants_of else expected)


def drift_of(contract, **kw):
    return compare(contract, catalog_for(contract, **kw), prefix=PREFIX, query_roles=True,
                   expected_grants=grants.expected(contract, PREFIX))


def test_a_database_as_described_has_no_finding(demo):
    d = drift_of(demo)
    assert d.findings == () and not d.drifted and d.summary().startswith("drift: none")


@pytest.mark.parametrize("kind, found, reads", [
    ("text", ("character varying(255)", "S"), True), ("text", ("integer", "N"), False),
    ("integer", ("smallint", "N"), True), ("integer", ("numeric", "N"), False),
    ("numeric", ("double precision", "N"), True), ("numeric", ("text", "S"), False),
    ("enum", ("mood", "E"), True), ("boolean", ("integer", "N"), False),
    ("timestamp", ("timestamp without time zone", "D"), True), ("timestamp", ("date", "D"), False),
    ("date", ("date", "D"), True),
])
def test_which_database_types_each_contract_type_reads(kind, found, reads):
    assert _reads_as(kind, found) is reads
    assert set(ACCEPTS) == set(PG)  # every contract type has its rule


def test_a_missing_always_filter_column_degrades_its_dataset_and_every_child_down_the_chain(demo):
    d = drift_of(demo, drop=[("lake", "k8s_workloads", "is_deleted")])
    assert d.column("workloads", "is_deleted") is not None
    assert d.dataset("workloads") == ROWS_UNDECIDED
    # containers and configs exist with workloads; images do not (they exist with archives)
    assert {"workloads", "containers", "configs"} <= set(d.datasets) and d.dataset("images") is None
    assert d.dataset("projects") is None  # the parent is untouched


def test_a_mistyped_join_column_degrades_the_relations_on_it_not_the_datasets(demo):
    d = drift_of(demo, retype={("lake", "hosts", "cluster"): ("integer", "N")})
    assert d.relation("cluster_hosts") == "a column it joins on is unavailable"
    assert d.dataset("hosts") is None and d.dataset("workloads") is None
    assert d.column("hosts", "cluster") == "its type in the database no longer reads as text"  # no type name


def test_a_parent_relation_that_is_degraded_degrades_the_child(demo):
    d = drift_of(demo, drop=[("lake", "k8s_containers", "workload_id")])  # containers' join to its workload
    assert d.relation("workload") is not None and d.dataset("containers") == ROWS_UNDECIDED
    # the same reason as an always-filter's: nothing says the dataset has a parent, or which
    assert d.dataset("containers") == drift_of(demo, drop=[("lake", "k8s_workloads", "is_deleted")]).dataset("workloads")
    # a relation into a dataset degraded by its parent is marked too (after the fixed point)
    assert d.relation("image") == "a dataset it joins is unavailable"


def test_grants_are_compared_both_ways_and_a_missing_role_is_found(demo):
    def tamper(expected):
        out = {role: dict(tables) for role, tables in expected.items()}
        hosts = ("lake", "hosts")
        out[f"{PREFIX}admin"][hosts] = out[f"{PREFIX}admin"][hosts] - {"hostname"}
        out[f"{PREFIX}viewer"][hosts] = frozenset({"ssh_private_key"})  # a secret, readable by the database
        return out

    d = compare(demo, catalog_for(demo, grants_of=tamper), prefix=PREFIX, query_roles=True,
                expected_grants=grants.expected(demo, PREFIX))
    messages = {(f.kind, f.place): f.message for f in d.findings}
    assert "cannot read lake.hosts (hostname)" in messages[("grant_missing", ("roles", "admin"))]
    assert "can read lake.hosts (ssh_private_key)" in messages[("grant_extra", ("roles", "viewer"))]
    assert not d.datasets and not d.columns  # reported, never degraded
    usage = {role: frozenset({"lake"}) for role in grants.expected(demo, PREFIX)}
    usage[f"{PREFIX}viewer"] = frozenset()
    members = frozenset(grants.expected(demo, PREFIX)) - {f"{PREFIX}admin"}
    base = catalog_for(demo)
    d = compare(demo, Catalog(base.tables, base.roles, base.grants, usage, members), prefix=PREFIX,
                query_roles=True, expected_grants=grants.expected(demo, PREFIX))
    messages = {(f.kind, f.place): f.message for f in d.findings}
    assert set(messages) == {("grant_missing", ("roles", "viewer")), ("grant_missing", ("roles", "admin"))}
    assert "has no USAGE on schema lake" in messages[("grant_missing", ("roles", "viewer"))]
    assert "cannot SET ROLE p_admin" in messages[("grant_missing", ("roles", "admin"))]
    gone = Catalog(catalog_for(demo).tables, frozenset(), {})
    d = compare(demo, gone, prefix=PREFIX, query_roles=True, expected_grants=grants.expected(demo, PREFIX))
    assert {f.kind for f in d.findings} == {"missing_role"} and len(d.findings) == len(demo.roles)
    assert compare(demo, gone, prefix=PREFIX, query_roles=False).findings == ()  # no query roles: not compared


def test_a_publish_log_that_moved_is_reported_not_degraded(demo):
    d = drift_of(demo, retype={("lake", "publish_log", "published_at"): ("text", "S")})
    [f] = d.findings
    assert f.kind == "publish_log" and "published_at is text, not timestamp" in f.message
    assert not d.datasets
    d = drift_of(demo, drop=[("lake", "publish_log")])
    assert [f.message for f in d.findings] == ["lake.publish_log does not exist: answers say their freshness is unknown"]


def test_counts_show_how_much_never_which(demo):
    d = drift_of(demo, drop=[("lake", "hosts")])
    assert d.counts() == {"findings": 1, "degraded_datasets": 1, "degraded_columns": 0, "degraded_relations": 2}
    assert "hosts" not in str(d.counts())


def test_a_roles_notice_says_whether_what_it_may_read_drifted_and_nothing_else(demo):
    from ontoos_explore.drift import LakeState

    secret_gone = LakeState(demo, drift=drift_of(demo, drop=[("lake", "hosts", "ssh_private_key")]))
    assert secret_gone.notice["schema_drift"] is True  # something drifted: what /readyz says too
    assert all(secret_gone.notice_for(r)["schema_drift"] is False for r in demo.roles)  # a secret column
    hosts_gone = LakeState(demo, drift=drift_of(demo, drop=[("lake", "hosts")]))
    assert hosts_gone.notice_for("analyst")["schema_drift"] is True  # hosts is the analyst's
    assert hosts_gone.notice_for("viewer")["schema_drift"] is False  # not the viewer's
    assert hosts_gone.notice_for(None) == hosts_gone.notice
    assert set(hosts_gone.notice_for("viewer")) == {"min_cli_version", "schema_drift", "contract_hash"}


def test_notices_installed_by_overlapping_servers_do_not_undo_each_other():
    from ontoos_explore import envelope
    from ontoos_explore.envelope import Answer, install_notice
    from ontoos_explore.errors import Codes, InputError

    def said() -> dict | None:
        return Answer.refusal(InputError(Codes.INVALID_REQUEST, "x")).envelope.get("_notice")

    before = list(envelope._installed)
    remove_a = install_notice(lambda: {"contract_hash": "a"})
    remove_b = install_notice(lambda: {"contract_hash": "b"})
    assert said() == {"contract_hash": "b"}
    remove_a()  # out of order: b's stays
    assert said() == {"contract_hash": "b"}
    remove_b()
    assert envelope._installed == before  # neither is left behind
    remove_a = install_notice(lambda: {"contract_hash": "a"})
    remove_b = install_notice(lambda: {"contract_hash": "b"})
    remove_b()
    assert said() == {"contract_hash": "a"}  # the one still running
    remove_a()
    own = Answer.refusal(InputError(Codes.INVALID_REQUEST, "x"), notice={"contract_hash": "mine"})
    assert own.envelope["_notice"] == {"contract_hash": "mine"}
