"""The pipeline and the Python API: three forms, one SQL."""

from __future__ import annotations

import pytest

import ontoos_explore
from ontoos_explore import ExploreError, compile_exploration
from ontoos_explore.grammar.forms import from_flags
from ontoos_explore.grammar.parser import parse_text

TEXT = ("explore workloads via containers fields name, count() as n, sum(containers.cpu_millis) as cpu "
        "where namespace = 'prod-fp' and replicas > 2 and kind in ('Deployment', 'StatefulSet') "
        "group by name order by cpu desc, name limit 20")
JSON = {"dataset": "workloads", "relations": ["containers"],
        "fields": ["name", "count() as n", "sum(containers.cpu_millis) as cpu"],
        "filter": [{"field": "namespace", "op": "=", "value": "prod-fp"},
                   {"field": "replicas", "op": ">", "value": 2},
                   {"field": "kind", "op": "in", "value": ["Deployment", "StatefulSet"]}],
        "group_by": ["name"], "order_by": ["-cpu", "name"], "limit": 20}
FLAGS = dict(dataset="workloads", fields=["name,count() as n", "sum(containers.cpu_millis) as cpu"],
             filters=["namespace=prod-fp", "replicas > 2", "kind in ('Deployment', 'StatefulSet')"],
             relations=["containers"], group_by=["name"], order_by=["-cpu,name"], limit=20)


def test_three_forms_compile_to_byte_identical_sql(demo):
    text = compile_exploration(TEXT, demo, "analyst")
    json_ = compile_exploration(JSON, demo, "analyst")
    flags = compile_exploration(from_flags(**FLAGS), demo, "analyst")
    assert text.sql.encode() == json_.sql.encode() == flags.sql.encode()
    assert text.params == json_.params == flags.params == ("prod-fp", 2, "Deployment", "StatefulSet", False, False)
    assert text.fingerprint == json_.fingerprint == flags.fingerprint
    assert text.normalized == json_.normalized == flags.normalized


def test_public_api_is_importable_from_the_package():
    for name in ("load_contract", "compile_exploration", "ExploreError", "CompiledQuery", "Contract"):
        assert hasattr(ontoos_explore, name)


def test_compiled_query_shape(demo):
    q = compile_exploration(TEXT, demo, "analyst")
    assert q.columns == ("name", "n", "cpu")
    assert q.limit == 20 and q.sql.endswith("LIMIT 21")
    assert q.plan.role == "analyst" and q.plan.timeout_ms == demo.role("analyst").timeout_ms
    assert [s.caller for s in q.slots] == [True, True, True, True, False, False]
    # the last: the always-filter of the workload's project, which workloads exist with
    assert [s.column for s in q.slots] == ["namespace", "replicas", "kind", "kind", "is_deleted", "project.is_deleted"]
    assert q.to_json()["params"] == ["prod-fp", 2, "Deployment", "StatefulSet", False, False]


def test_an_exploration_object_is_accepted(demo):
    e = parse_text("explore workloads fields name limit 3")
    assert compile_exploration(e, demo, "viewer").sql == compile_exploration(
        "explore workloads fields name limit 3", demo, "viewer").sql


def test_role_names_are_case_insensitive_and_unknown_roles_refused(demo):
    assert compile_exploration("explore workloads fields name", demo, "ANALYST").plan.role == "analyst"
    with pytest.raises(ExploreError) as info:
        compile_exploration("explore workloads fields name", demo, "analist")
    assert (info.value.type, info.value.subtype) == ("auth", "AUTH_SCOPE_DENIED")
    assert "'analyst'" in info.value.hint


def test_the_role_decides_what_exists(demo):
    """The same question is answered for one role and refused as unknown for another."""
    q = "explore hosts fields hostname where provider = 'aws' limit 5"
    assert compile_exploration(q, demo, "analyst").sql
    with pytest.raises(ExploreError) as info:
        compile_exploration(q, demo, "viewer")
    assert info.value.subtype == "UNKNOWN_DATASET" and info.value.reason == "OUT_OF_SCOPE"
    assert "hosts" not in info.value.hint


def test_error_envelope_carries_meta(demo):
    with pytest.raises(ExploreError) as info:
        compile_exploration("explore workloads fields nope", demo, "analyst")
    env = info.value.to_envelope(exploration_id="x1", contract_hash=demo.hash)
    assert env["ok"] is False and env["meta"] == {"exploration_id": "x1", "contract_hash": demo.hash}
    assert set(env["error"]) >= {"type", "subtype", "code", "message", "hint", "position"}


def test_a_request_checked_whole_by_its_surface_is_not_checked_again():
    """check_json runs once per request: `Tools` checks the arguments whole and hands the JSON form on
    as CheckedJSON, which the reader takes as checked; a plain dict is checked by the reader itself."""
    from ontoos_explore.errors import ExploreError
    from ontoos_explore.grammar.forms import from_json
    from ontoos_explore.grammar.limits import CheckedJSON

    nested: object = 1
    for _ in range(18):
        nested = [nested]
    deep = {"dataset": "workloads", "fields": ["name"], "x": nested}
    with pytest.raises(ExploreError) as checked:
        from_json(deep)
    assert "16 levels" in checked.value.message
    with pytest.raises(ExploreError) as read:
        from_json(CheckedJSON(deep))
    assert "unknown key" in read.value.message or "has no" in read.value.message
