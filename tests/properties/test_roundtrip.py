"""Rendering an exploration and parsing it back gives the same IR, in both forms."""

from __future__ import annotations

from hypothesis import given, settings

from ontoos_explore.grammar.forms import from_json
from ontoos_explore.grammar.parser import parse_text
from ontoos_explore.grammar.render import to_json_form, to_text

from .strategies import explorations


@settings(max_examples=300, derandomize=True, deadline=None)
@given(explorations())
def test_text_roundtrip(e):
    assert parse_text(to_text(e)).model_dump() == e.model_dump()


@settings(max_examples=300, derandomize=True, deadline=None)
@given(explorations())
def test_json_roundtrip(e):
    assert from_json(to_json_form(e)).model_dump() == e.model_dump()
