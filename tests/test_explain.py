"""Explain (explain.py) on real PostgreSQL: the plan an agent can act on, by contract names only, without
reading rows, and the refusal running it would get."""

from __future__ import annotations

import json

import pytest
import yaml

from ontoos_explore.contract import load_contract
from ontoos_explore.errors import ExploreError
from ontoos_explore.explain import explain, is_named
from ontoos_explore.service import Explorer

from .conftest import ROOT, executor_for

pytestmark = pytest.mark.anyio


async def test_a_fanning_relation_and_a_clamped_limit_are_explained_with_what_to_do(pg_dsn, demo):
    async with executor_for(pg_dsn, demo) as executor:
        plan = await explain(Explorer(demo, executor),
                             "explore workloads via containers fields name, containers.name limit 5000", "analyst")
    assert [d["name"] for d in plan["datasets"]] == ["workloads", "containers"]
    [rel] = plan["relations"]
    assert (rel["name"], rel["cardinality"], rel["repeats_rows"]) == ("containers", "one_to_many", True)
    assert plan["limit"] == {"asked": 5000, "applied": 500, "clamped": True}
    assert plan["cost"] == {"class": "low", "within_budget": True}
    assert any("repeats once per containers row" in a for a in plan["advice"])
    assert any("lowered to 500" in a for a in plan["advice"])
    shown = json.dumps(plan)
    for hidden in ("projects", "is_deleted", "env_dump", "project_id = ", "Total Cost"):
        assert hidden not in shown, hidden  # no parent the contract joins, no hidden column, no planner figure


async def test_over_the_cost_budget_says_what_to_filter_never_the_figure(pg_dsn, tmp_path):
    data = yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text())
    data["roles"]["analyst"]["max_cost"] = 1
    path = tmp_path / "tight.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    tight = load_contract(path)
    async with executor_for(pg_dsn, tight) as executor:
        plan = await explain(Explorer(tight, executor), {"dataset": "workloads", "fields": ["name"]}, "analyst")
    assert plan["cost"] == {"class": "over", "within_budget": False}
    assert plan["advice"][0].startswith("over the cost budget: filter workloads")


async def test_explain_refuses_what_running_would_refuse(pg_dsn, demo):
    async with executor_for(pg_dsn, demo) as executor:
        with pytest.raises(ExploreError) as e:
            await explain(Explorer(demo, executor), {"dataset": "hosts", "fields": ["name"]}, "viewer")
    assert e.value.code == "EX202"  # outside the viewer's read sets: as a dataset that does not exist


async def test_a_named_query_is_explained_with_its_params(pg_dsn, demo, tmp_path):
    from tests.engine.test_evidence_read import config_keys

    registry = config_keys(tmp_path, demo)
    async with executor_for(pg_dsn, demo) as executor:
        plan = await explain(Explorer(demo, executor), {"query": "config_keys"}, "analyst", registry)
    assert plan["kind"] == "named_query" and plan["query"] == "config_keys"
    assert [d["name"] for d in plan["datasets"]] == ["configs"] and plan["limit"]["applied"] == 5


def test_a_named_query_is_any_id_the_text_form_never_is():
    assert is_named({"query": "config_keys", "params": {}}) and is_named({"query": "config_keys"})
    assert is_named({"query": "pods-by-ns"}) and is_named({"query": "explore_workloads"})  # ids a registry may give
    assert not is_named({"query": "explore workloads fields name"})
    assert not is_named({"query": "  EXPLORE\nworkloads fields name"})
    assert not is_named({"query": "config_keys", "limit": 3})


def test_ontoos_explain_an_exploration_and_a_named_query(pg_dsn, demo, tmp_path, capsys, monkeypatch):
    from ontoos_explore.cli import main
    from tests.engine.test_evidence_read import config_keys

    config_keys(tmp_path, demo)  # writes tmp_path/queries.yaml
    monkeypatch.delenv("ONTOOS_CONTRACT", raising=False)
    code = main(["explain", "--role", "analyst", "--dsn", pg_dsn, "-q", "explore workloads fields name limit 9"])
    plan = json.loads(capsys.readouterr().out)["data"]
    assert code == 0 and plan["kind"] == "exploration" and plan["limit"] == {"asked": 9, "applied": 9, "clamped": False}
    code = main(["explain", "--role", "analyst", "--dsn", pg_dsn, "--named", "config_keys",
                 "--queries", str(tmp_path / "queries.yaml")])
    plan = json.loads(capsys.readouterr().out)["data"]
    assert code == 0 and plan["kind"] == "named_query" and plan["datasets"][0]["name"] == "configs"
    assert main(["explain", "--role", "analyst", "--dsn", pg_dsn, "--named", "x", "-p", "novalue"]) == 2
    assert "-p takes NAME=VALUE" in json.loads(capsys.readouterr().out)["error"]["message"]
    assert main(["explain", "--role", "analyst", "--dsn", pg_dsn, "-q", "explore hosts fields hostname",
                 "-p", "a=b"]) == 2
    assert "goes with --named" in json.loads(capsys.readouterr().out)["error"]["message"]
    assert main(["explain", "--role", "analyst", "--dsn", pg_dsn, "--named", "config_keys", "-q", "x"]) == 2
    assert "not both" in json.loads(capsys.readouterr().out)["error"]["message"]
