"""The tools' schemas as published: `lean` says what pydantic's schema says, with fewer keywords."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from jsonschema import Draft202012Validator

from ontoos_explore.server.tool_models import TOOLS, Envelope, RequireInput, lean, output_schema

SCHEMAS = {"Envelope": Envelope.model_json_schema(), "RequireInput": RequireInput.model_json_schema(),
           **{name: model.model_json_schema() for name, (_, _, model) in TOOLS.items() if model.model_fields}}

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False, width=32),
                    st.sampled_from(["", "x", "workloads", "name = 'a'", "7"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.sampled_from(["a", "max_age_s", "ok"]),
                                                                       inner, max_size=3)), max_leaves=6)


def names(schema: dict) -> list[str]:
    """Every property name anywhere in a schema (its $defs too): the keys an instance is made of."""
    found, stack = set(), [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            found.update(node.get("properties", {}) if isinstance(node.get("properties"), dict) else ())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return sorted(found) + ["not_a_field"]


def instances(schema: dict):
    keys = st.sampled_from(names(schema))
    nested = st.recursive(values, lambda inner: st.dictionaries(keys, inner, max_size=4), max_leaves=8)
    return st.one_of(values, st.dictionaries(keys, nested, max_size=6))


def test_the_output_schema_is_flat_and_still_a_schema() -> None:
    schema = output_schema()
    Draft202012Validator.check_schema(schema)
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text and "anyOf" not in text
    assert schema["properties"]["meta"]["properties"]["exploration_id"] == {"type": ["string", "null"]}
    assert schema["required"] == ["ok", "data", "meta"] and schema["title"] == "Envelope"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(max_examples=150, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_lean_accepts_and_refuses_what_the_full_schema_does(name: str, data) -> None:
    full = SCHEMAS[name]
    schema = lean(full)
    Draft202012Validator.check_schema(schema)
    instance = data.draw(instances(full))
    assert Draft202012Validator(schema).is_valid(instance) == Draft202012Validator(full).is_valid(instance)


def test_an_envelope_is_accepted_and_a_refusal_shape_is_not() -> None:
    check = Draft202012Validator(output_schema())
    ok = {"ok": True, "data": {"rows": [[1]]}, "meta": {"exploration_id": "e1", "contract_hash": None, "rows": 1}}
    assert check.is_valid(ok)
    assert not check.is_valid({**ok, "ok": False})
    assert not check.is_valid({**ok, "meta": {"exploration_id": 7}})
    assert not check.is_valid({"ok": True, "data": {}})


def same_verdicts(schema: dict, instances: list) -> None:
    full, flat = Draft202012Validator(schema), Draft202012Validator(lean(schema))
    for instance in instances:
        assert flat.is_valid(instance) == full.is_valid(instance), (schema, instance)


def test_a_reference_beside_other_keywords_keeps_both() -> None:
    schema = {"$defs": {"N": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/N", "minimum": 3}}}
    assert lean(schema) == {"properties": {"n": {"minimum": 3, "allOf": [{"type": "integer"}]}}}
    same_verdicts(schema, [{"n": 2}, {"n": "a"}, {"n": 4}])
    beside_all_of = {"$defs": {"N": {"type": "integer"}},
                     "properties": {"n": {"$ref": "#/$defs/N", "allOf": [{"minimum": 3}]}}}
    same_verdicts(beside_all_of, [{"n": "a"}, {"n": 2}, {"n": 5}])


def test_values_are_data_and_names_are_names_never_keywords() -> None:
    """const, enum and examples hold instances; patternProperties and the like map names: nothing in them
    is rewritten, whatever it is called."""
    schema = {"$defs": {"N": {"type": "integer"}},
              "properties": {"c": {"const": {"title": "x", "k": 1}}, "e": {"enum": [{"$ref": "#/$defs/N"}]},
                             "x": {"examples": [{"default": 1}]}},
              "patternProperties": {"title": {"type": "integer"}, "default": {"type": "string"}},
              "dependentRequired": {"title": ["default"]}}
    flat = lean(schema)
    assert flat["properties"]["c"] == {"const": {"title": "x", "k": 1}}
    assert flat["properties"]["e"] == {"enum": [{"$ref": "#/$defs/N"}]}
    assert flat["properties"]["x"] == {"examples": [{"default": 1}]}
    assert flat["patternProperties"] == schema["patternProperties"] and flat["dependentRequired"] == {"title": ["default"]}
    same_verdicts(schema, [{"c": {"title": "x", "k": 1}}, {"c": {"k": 1}}, {"title": "s"}, {"title": 3},
                           {"e": {"$ref": "#/$defs/N"}}, {"title": 1}, {"title": 1, "default": "d"}])


def test_additional_properties_true_stays_where_unevaluated_keywords_read_it() -> None:
    schema = {"allOf": [{"additionalProperties": True}], "unevaluatedProperties": False}
    assert lean(schema) == schema
    same_verdicts(schema, [{"x": 1}, {}])


def test_a_schema_it_cannot_say_flat_is_published_as_it_is() -> None:
    recursive = {"$defs": {"T": {"type": "object", "properties": {"child": {"$ref": "#/$defs/T"}}}},
                 "$ref": "#/$defs/T"}
    deep = {"$defs": {"A": {"properties": {"b": {"type": "integer"}}}}, "properties": {
        "b": {"$ref": "#/$defs/A/properties/b"}}}
    assert lean(recursive) is recursive and lean(deep) is deep
