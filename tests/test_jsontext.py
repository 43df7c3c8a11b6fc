"""jsontext: orjson's bytes are the standard library's JSON for what an envelope holds, and what
orjson refuses is written (or refused) as the standard library would."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ontoos_explore.jsontext import FastJSONResponse, dumps, dumps_bytes


def stdlib(value) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


scalars = st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False, allow_infinity=False)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(), inner, max_size=6),
                      max_leaves=40)


@settings(max_examples=400, derandomize=True)
@given(values)
def test_what_an_envelope_holds_is_written_as_the_standard_library_writes_it(value):
    written = dumps_bytes(value)
    assert json.loads(written) == json.loads(stdlib(value))
    if "e" not in written.decode() and "." not in written.decode():  # floats aside (both shortest forms)
        assert written == stdlib(value)
    assert dumps(value) == written.decode("utf-8")


@pytest.mark.parametrize("value", [{"n": 10 ** 30}, {1: "one", 2: [3]}, [2 ** 64, -(2 ** 63) - 1]])
def test_what_orjson_refuses_the_standard_library_writes(value):
    assert dumps_bytes(value) == stdlib(value)


def test_what_both_refuse_fails_as_before():
    with pytest.raises(UnicodeEncodeError):
        dumps_bytes({"s": "\ud800"})
    with pytest.raises(TypeError):
        dumps_bytes({"o": object()})


def test_the_response_body_is_the_same_bytes():
    envelope = {"ok": True, "data": {"columns": ["é"], "rows": [[1, "a\u2028b", None, 2.5]]}}
    assert FastJSONResponse(envelope).body == stdlib(envelope)
