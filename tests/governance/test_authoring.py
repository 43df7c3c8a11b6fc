"""The registry in its authors' format: `:name` placeholders, typed params with defaults and enums, nested
params, constants, budgets, roles; the shipped demo registry; and its entries run on real PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest
import yaml

from ontoos_explore.engine.executor import Executor
from ontoos_explore.errors import ExploreError
from ontoos_explore.governance.authoring import authored, normalize, to_dollar
from ontoos_explore.governance.registry import Registry, matching
from ontoos_explore.governance.store import DEMO_REGISTRY, RegistryStore, store_for
from ontoos_explore.policy.named import NamedQueryInvalid
from ontoos_explore.service import Explorer

pytestmark = pytest.mark.anyio

KEPT = {"name": "kept", "type": "boolean", "value": False}
WORKLOADS = {
    "id": "workloads_of", "title": "Workloads of a namespace", "domain": "ops", "read_sets": ["published"],
    "params": [{"name": "namespace", "type": "string", "required": True},
               {"name": "kind", "type": "enum", "values": ["Deployment", "StatefulSet", "Job"], "default": "Deployment"}],
    "constants": [KEPT],
    "budget": {"timeout_s": 2, "max_rows": 40},
    "sql": "SELECT w.name AS name, w.kind AS kind FROM lake.k8s_workloads AS w "
           "INNER JOIN lake.gitlab_projects AS p ON p.project_id = w.project_id "
           "WHERE w.namespace = :namespace AND w.kind = :kind AND w.is_deleted = :kept AND p.is_deleted = :kept "
           "ORDER BY w.workload_id LIMIT 41",
}


def registry(tmp_path, demo, *entries, version=1) -> Registry:
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"version": version, "queries": list(entries)}), encoding="utf-8")
    return Registry.load(path, demo)


@pytest.fixture
async def explorer(pool, demo):
    p, settings = pool
    yield Explorer(demo, Executor(p, settings))


# ================================================================ placeholders


def test_placeholders_are_read_as_postgresql_reads_the_text():
    sql = ("SELECT ':x' AS s, a::int AS \"b:x\" FROM t -- :nope\n"
           "WHERE a = :x AND b = :w.from AND c = :x AND d = $$:nope$$ AND e = :w.to::date")
    out, order = to_dollar(sql)
    assert order == ["x", "w.from", "w.to"]  # one $n per name, numbered as first written
    assert out == ("SELECT ':x' AS s, a::int AS \"b:x\" FROM t -- :nope\n"
                   "WHERE a = $1 AND b = $2 AND c = $1 AND d = $$:nope$$ AND e = $3::date")


def test_a_colon_that_continues_what_comes_before_it_is_no_placeholder():
    out, order = to_dollar("SELECT a[1:n] AS s FROM t WHERE b = (:x) AND c = 'y':z LIMIT 2")
    assert (out, order) == ("SELECT a[1:n] AS s FROM t WHERE b = ($1) AND c = 'y':z LIMIT 2", ["x"])


def test_a_hand_written_dollar_parameter_is_refused_in_the_authors_format():
    with pytest.raises(NamedQueryInvalid, match="write parameters as :name"):
        to_dollar("SELECT a FROM t WHERE a = $1 LIMIT 2")


def test_an_entry_normalizes_to_the_sql_that_runs_and_back():
    running = normalize(WORKLOADS)
    assert running["bind"] == ["namespace", "kind", {"value": False, "type": "boolean"}]
    assert ":" not in running["sql"].replace("::", "") and running["sql"].count("$3") == 2
    assert (running["max_rows"], running["timeout_ms"], running["status"]) == (40, 2000, "approved")
    assert running["columns"] == ["name", "kind"]  # read off the SELECT list
    assert [p["type"] for p in running["parameters"]] == ["text", "enum"]
    assert [p["required"] for p in running["parameters"]] == [True, False]  # a default makes it optional
    again = normalize(authored(running))  # what promotion writes loads to the same SQL and bindings
    assert (again["sql"], again["bind"], again["parameters"]) == (running["sql"], running["bind"], running["parameters"])


@pytest.mark.parametrize("change, says", [
    ({"sql": WORKLOADS["sql"].replace(":kind", ":sort")}, "the SQL's :sort is neither a parameter nor a constant"),
    ({"budget": {"max_row": 5}}, "budget has no field 'max_row'"),
    ({"auth": {"roles": ["visitor"]}}, "auth names role 'visitor'"),
    ({"risk": "write"}, "risk: Input should be 'read'"),
    ({"params": [WORKLOADS["params"][0], {"name": "kind", "type": "enum"}]}, "enum without values"),
    ({"params": [{"name": "bad name", "type": "string"}]}, "must be an identifier"),
    ({"sql": "SELECT w.name, count(w.kind) FROM lake.k8s_workloads AS w WHERE w.namespace = :namespace "
             "GROUP BY w.name LIMIT 11", "constants": []}, "name the SELECT list's item 2"),
], ids=["unknown-placeholder", "budget-typo", "unknown-role", "write-risk", "enum-no-values", "bad-name",
        "unnamed-column"])
def test_a_broken_authored_entry_is_skipped_naming_why(tmp_path, demo, change, says):
    reg = registry(tmp_path, demo, {**WORKLOADS, **change})
    assert reg.entries == {} and says in reg.problems[0][1], reg.problems


def test_status_defaults_to_approved_in_the_authors_format_and_pending_in_the_older_one(tmp_path, demo):
    legacy = normalize(WORKLOADS)
    legacy.pop("status")
    assert registry(tmp_path, demo, WORKLOADS).entries["workloads_of"].status == "approved"
    assert registry(tmp_path, demo, {**WORKLOADS, "status": "pending"}).visible("analyst") == []
    assert registry(tmp_path, demo, legacy, version=None).entries["workloads_of"].status == "pending"


# ================================================================ what callers see


def test_nested_parameters_make_a_nested_schema():
    entry = {**WORKLOADS, "params": [
        {"name": "from", "parent": "window", "type": "timestamp", "required": True},
        {"name": "window.to", "type": "timestamp"},
        {"name": "kind", "type": "enum", "values": ["Job"], "default": "Job"}]}
    from ontoos_explore.governance.registry import NamedQuery

    schema = NamedQuery.model_validate({**normalize({**entry, "sql": "SELECT w.name AS name FROM t AS w LIMIT 2"})}) \
        .params_schema()
    assert schema == {
        "type": "object", "additionalProperties": False, "required": ["window"],
        "properties": {
            "window": {"type": "object", "additionalProperties": False, "required": ["from"],
                       "properties": {"from": {"type": "string", "format": "date-time"},
                                      "to": {"type": "string", "format": "date-time"}}},
            "kind": {"type": "string", "enum": ["Job"], "default": "Job"}}}


def test_auth_roles_narrow_who_may_run_it(tmp_path, demo):
    reg = registry(tmp_path, demo, {**WORKLOADS, "auth": {"roles": ["admin"]}})
    assert [q.id for q in reg.visible("admin")] == ["workloads_of"]
    assert reg.visible("analyst") == [] and reg.visible("viewer") == []  # all three may read workloads


def test_the_demo_registry_loads_whole_and_is_filtered_by_domain_and_words(demo):
    reg = Registry.load(DEMO_REGISTRY, demo)
    assert reg.problems == []
    approved = [q for q in reg.entries.values() if q.status == "approved"]
    assert len(approved) >= 6
    assert any(len(q.datasets) > 1 for q in approved)  # joins
    assert any("count(" in q.sql for q in approved)  # aggregates
    assert any(p.type == "enum" for q in approved for p in q.parameters)
    assert any("." in p.name for q in approved for p in q.parameters)  # a nested parameter
    analyst = reg.visible("analyst")
    assert [q.id for q in matching(analyst, "ops")] == [q.id for q in analyst if q.domain == "ops"] != []
    assert [q.id for q in matching(analyst, None, "TABLE touches")] == ["table_change_blast_radius"]
    assert matching(analyst, "fault", "hosts") == []
    viewer = {q.id for q in reg.visible("viewer")}
    assert "hosts_by_provider" not in viewer and "table_change_blast_radius" not in viewer  # engineering's


def test_the_demo_contracts_default_registry_is_the_demo_one_until_it_is_written(tmp_path, monkeypatch, demo):
    monkeypatch.chdir(tmp_path)
    store = store_for(tmp_path / "queries.yaml", None)  # a path named on purpose: only itself
    assert store.entries() == []
    store = store_for("queries.yaml", None)
    assert [q["id"] for q in store.entries()] == [q["id"] for q in RegistryStore(DEMO_REGISTRY).entries()]
    assert store_for("queries.yaml", "contract.yaml").entries() == []  # another contract: not the demo's queries
    store.add({**WORKLOADS})
    written = yaml.safe_load((tmp_path / "queries.yaml").read_text(encoding="utf-8"))
    assert written["version"] == 1 and written["queries"][-1]["id"] == "workloads_of"
    assert len(written["queries"]) == len(RegistryStore(DEMO_REGISTRY).entries()) + 1
    assert DEMO_REGISTRY.read_text(encoding="utf-8").count("id: workloads_of\n") == 0  # the shipped file untouched


# ================================================================ running them


async def test_defaults_apply_and_enums_are_checked(tmp_path, demo, explorer):
    reg = registry(tmp_path, demo, WORKLOADS)
    default = await reg.run(explorer, "analyst", "workloads_of", {"namespace": "prod"})
    said = await reg.run(explorer, "analyst", "workloads_of", {"namespace": "prod", "kind": "Deployment"})
    other = await reg.run(explorer, "analyst", "workloads_of", {"namespace": "prod", "kind": "StatefulSet"})
    assert default.ok and other.ok
    rows = default.envelope["data"]["rows"]
    assert rows and rows == said.envelope["data"]["rows"] and {r[1] for r in rows} == {"Deployment"}
    assert {r[1] for r in other.envelope["data"]["rows"]} <= {"StatefulSet"}
    with pytest.raises(ExploreError) as bad:
        await reg.run(explorer, "analyst", "workloads_of", {"namespace": "prod", "kind": "Pod"})
    assert bad.value.code == "EX301" and "Deployment" in bad.value.hint


async def test_a_nested_parameter_binds_from_an_object_or_a_dotted_name(demo, explorer):
    reg = Registry.load(DEMO_REGISTRY, demo)
    window = {"from": "2026-01-01T00:00:00Z", "to": "2026-07-01T00:00:00Z"}
    nested = await reg.run(explorer, "viewer", "images_built_in_window", {"window": window, "language": "go"})
    dotted = await reg.run(explorer, "viewer", "images_built_in_window",
                           {"window.from": window["from"], "window.to": window["to"], "language": "go"})
    assert nested.ok, nested.envelope
    rows = nested.envelope["data"]["rows"]
    assert rows and rows == dotted.envelope["data"]["rows"]
    low, high = (dt.datetime.fromisoformat(window[k].replace("Z", "+00:00")) for k in ("from", "to"))
    assert all(low <= dt.datetime.fromisoformat(r[2]) < high for r in rows)
    with pytest.raises(ExploreError) as missing:
        await reg.run(explorer, "viewer", "images_built_in_window", {"window": {"from": window["from"]}})
    assert missing.value.code == "EX102" and "window.to" in missing.value.message


async def test_every_demo_query_runs_for_a_role_that_may_with_its_examples(demo, explorer):
    reg = Registry.load(DEMO_REGISTRY, demo)
    for q in reg.visible("admin"):
        params: dict = {}
        for p in q.parameters:
            if p.required:
                params[p.name] = p.examples[0] if p.examples else p.values[0]
        answer = await reg.run(explorer, "admin", q.id, params)
        assert answer.ok, (q.id, answer.envelope)
        assert answer.envelope["data"]["columns"] == list(q.columns)
        assert answer.envelope["data"]["rows"], q.id  # the demo lakehouse has rows for every example


def test_queries_list_filters_the_demo_registry_by_domain_and_words(tmp_path, monkeypatch, capsys):
    import json

    from ontoos_explore import cli

    for k in ("ONTOOS_CONTRACT", "ONTOOS_QUERIES"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.chdir(tmp_path)  # no queries.yaml here: the demo contract's default reads the demo registry
    assert cli.main(["queries", "list", "--domain", "ops"]) == 0
    listed = json.loads(capsys.readouterr().out)["data"]["queries"]
    assert [q["id"] for q in listed] == ["workloads_in_namespace", "hosts_by_provider"]
    assert {q["domain"] for q in listed} == {"ops"}
    assert cli.main(["queries", "list", "-q", "window images"]) == 0
    assert [q["id"] for q in json.loads(capsys.readouterr().out)["data"]["queries"]] == ["images_built_in_window"]
    assert not (tmp_path / "queries.yaml").exists()  # reading never writes it
