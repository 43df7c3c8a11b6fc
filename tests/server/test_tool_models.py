"""The tools' output schema as published: the envelope's keys required, what they hold said in words."""

from __future__ import annotations

import re

from jsonschema import Draft202012Validator

from ontoos_explore.server.tool_models import OUTPUT_SCHEMA, Envelope, output_schema

OK = {"ok": True, "data": {"columns": ["name"], "rows": [["a"]]},
      "meta": {"exploration_id": "e1", "contract_hash": None, "rows": 1}}


def described(schema: dict) -> set[str]:
    """The names the schema's description says (the words before a colon or a parenthesis, and listed)."""
    return set(re.findall(r"[a-z_]+", schema["description"]))


def test_it_is_a_schema_that_requires_what_the_envelope_model_requires() -> None:
    schema = output_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object" and schema["title"] == "Envelope"
    assert schema["required"] == Envelope.model_json_schema()["required"] == ["ok", "data", "meta"]


def test_an_envelope_is_accepted_and_one_without_its_parts_is_not() -> None:
    check = Draft202012Validator(output_schema())
    assert check.is_valid(OK) and check.is_valid({**OK, "_notice": {"schema_drift": False}})
    for part in ("ok", "data", "meta"):
        assert not check.is_valid({k: v for k, v in OK.items() if k != part}), part
    assert not check.is_valid([OK]) and not check.is_valid("ok")


def test_the_description_names_every_part_of_the_envelope_model() -> None:
    words = described(OUTPUT_SCHEMA)
    assert set(Envelope.model_fields) <= words
    assert set(Envelope.model_fields["meta"].annotation.model_fields) <= words


def test_a_copy_each_time() -> None:
    first = output_schema()
    first["required"].append("x")
    first["title"] = "changed"
    assert output_schema() == OUTPUT_SCHEMA and OUTPUT_SCHEMA["required"] == ["ok", "data", "meta"]
