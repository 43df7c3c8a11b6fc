"""Lookup (lookup.py): any name -> what it is among what the role may read; nothing outside it is found,
and a name outside it is answered exactly as one the contract does not have."""

from __future__ import annotations

import pytest
import yaml

from ontoos_explore.contract import parse_contract
from ontoos_explore.errors import Codes, ExploreError
from ontoos_explore.lookup import lookup

from .conftest import ROOT


def kinds(found) -> list[tuple]:
    return [(m["kind"], m.get("dataset") or m.get("name") or m.get("relation"), m.get("value") or m.get("column"))
            for m in found["matches"]]


def test_a_bare_column_name_finds_every_readable_dataset_that_has_it(demo):
    found = lookup(demo, "viewer", "NameSpace")
    assert kinds(found) == [("column", "projects", "namespace"), ("column", "workloads", "namespace")]
    assert found["matches"][1] == {"kind": "column", "dataset": "workloads", "column": "namespace", "type": "text",
                                   "status": "ok"}


def test_a_full_column_name_an_enum_value_and_a_relation(demo):
    [kind] = lookup(demo, "viewer", "workloads.kind")["matches"]
    assert kind["type"] == "enum" and kind["values"] == ["Deployment", "StatefulSet", "DaemonSet", "CronJob", "Job"]
    assert kinds(lookup(demo, "viewer", "statefulset")) == [("enum_value", "workloads", "StatefulSet")]
    [rel] = lookup(demo, "analyst", "cluster_hosts")["matches"]
    assert rel == {"kind": "relation", "relation": "cluster_hosts", "from": "workloads", "to": "hosts",
                   "cardinality": "many_to_many", "note": rel["note"], "status": "ok"} and "cluster" in rel["note"]


def test_a_dataset_is_described_and_a_relation_of_the_same_name_listed_beside_it(demo):
    found = lookup(demo, "viewer", "containers")
    assert [m["kind"] for m in found["matches"]] == ["dataset", "relation"]
    assert {c["name"] for c in found["matches"][0]["columns"]} >= {"name", "cpu_millis"}


@pytest.mark.parametrize("name", ["hosts", "hostname", "ssh_private_key", "env_dump", "is_deleted", "aws",
                                  "cluster_hosts", "hosts.hostname", "workloads.env_dump", "connection_password"])
def test_what_the_viewer_may_not_read_is_answered_as_a_name_the_contract_does_not_have(demo, name):
    """The viewer's answer for each name equals its answer from a contract that has none of what the
    viewer may not read: no dataset of another read set, no secret column, and its hidden columns under
    names no one would guess (the always-filters need them)."""
    data = yaml.safe_load((ROOT / "contracts" / "demo.yaml").read_text())
    keep = set(data["read_sets"]["published"])
    data["datasets"] = {k: v for k, v in data["datasets"].items() if k in keep}
    for ds in data["datasets"].values():
        renamed = {k: f"zzq{i}" for i, (k, c) in enumerate(ds["columns"].items()) if c.get("hidden")}
        ds["columns"] = {renamed.get(k, k): c for k, c in ds["columns"].items() if not c.get("secret")}
        for rule in ds.get("always_filter", []):
            rule["column"] = renamed.get(rule["column"], rule["column"])
    data["relations"] = {k: r for k, r in data["relations"].items() if r["from"] in keep and r["to"] in keep}
    for ds in data["datasets"].values():
        ds["exists_with"] = [r for r in ds.get("exists_with", []) if r in data["relations"]]
    data["read_sets"] = {"published": sorted(keep)}
    data["roles"] = {"viewer": data["roles"]["viewer"]}
    bare = parse_contract(yaml.safe_dump(data))
    with pytest.raises(ExploreError) as here:
        lookup(demo, "viewer", name)
    with pytest.raises(ExploreError) as nowhere:
        lookup(bare, "viewer", name)
    assert here.value.error_code is Codes.UNKNOWN_NAME
    assert (here.value.message, here.value.hint) == (nowhere.value.message, nowhere.value.hint)


def test_an_unknown_name_suggests_only_readable_names(demo):
    with pytest.raises(ExploreError) as e:
        lookup(demo, "viewer", "nmespace")
    assert "did you mean 'namespace'?" in e.value.hint and "hosts" not in e.value.hint


def test_ontoos_describe_on_a_terminal_and_as_json(capsys, monkeypatch):
    import json

    from ontoos_explore.cli import main

    monkeypatch.delenv("ONTOOS_CONTRACT", raising=False)
    assert main(["describe", "--role", "viewer", "--format", "table", "kind"]) == 0
    assert capsys.readouterr().out == "column workloads.kind: enum (Deployment|StatefulSet|DaemonSet|CronJob|Job)\n"
    assert main(["describe", "--role", "viewer", "--format", "table", "workload"]) == 0
    assert capsys.readouterr().out.startswith("relation workload: containers -> workloads (many_to_one)")
    assert main(["describe", "--role", "viewer", "hostname"]) == 2
    out = json.loads(capsys.readouterr().out)
    assert out["error"]["code"] == "EX209" and "hosts" not in json.dumps(out)
