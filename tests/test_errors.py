"""Errors: the code registry and the envelope shape, pinned."""

from __future__ import annotations

import json
import re

from ontoos_explore.errors import (
    AUTH,
    INTERNAL,
    NETWORK,
    POLICY,
    VALIDATION,
    BindError,
    Codes,
    InternalError,
    Position,
    all_codes,
    all_rows,
)


def test_codes_are_unique_and_well_formed():
    codes = all_codes()
    assert len({c.code for c in codes}) == len(codes)
    for c in all_rows():
        assert re.fullmatch(r"EX[1-9]\d\d", c.code)
        assert c.type in (VALIDATION, AUTH, POLICY, NETWORK, INTERNAL)
        assert re.fullmatch(r"[A-Z_]+", c.subtype)


def test_rows_that_share_a_code_share_its_meaning():
    """A code is one meaning to callers; rows that reuse it differ only in how a transport answers."""
    first = {c.code: c for c in all_codes()}
    for row in all_rows():
        assert (row.type, row.subtype) == (first[row.code].type, first[row.code].subtype), row
    shared = [r for r in all_rows() if r is not first[r.code]]
    assert shared and all((r.status, r.rpc) != (first[r.code].status, first[r.code].rpc) or r.title != first[r.code].title
                          for r in shared)


def test_every_row_says_how_each_surface_answers_it():
    for row in all_rows():
        assert 400 <= row.status <= 599, row
        assert row.rpc in (-32700, -32600, -32000), row
        assert row.exit == (2 if row.type in (VALIDATION, POLICY, AUTH) else 1), row
    assert Codes.NO_TOKEN.status == 401 and Codes.NOT_REVIEWER.status == 403
    assert Codes.INPUT_TOO_LARGE.status == Codes.BODY_TOO_LARGE.status == 413
    assert (Codes.BODY_NOT_JSON.status, Codes.BODY_TOO_SLOW.status) == (415, 408)
    assert Codes.RATE_LIMITED.status == Codes.FLOODED.status == Codes.TOO_MANY_SESSIONS.status == 429
    assert (Codes.TIME_BUDGET.status, Codes.UPSTREAM_UNAVAILABLE.status, Codes.CANCELLED.status) == (504, 503, 499)
    assert Codes.JSON_UNREADABLE.rpc == Codes.JSON_TOO_LARGE.rpc == -32700


def test_code_ranges_follow_the_stage():
    ranges = {"EX1": VALIDATION, "EX2": VALIDATION, "EX3": VALIDATION, "EX4": POLICY, "EX5": AUTH, "EX6": NETWORK,
              "EX7": POLICY, "EX9": INTERNAL}
    for c in all_codes():
        assert c.type == ranges[c.code[:3]], c
    assert {c.subtype for c in all_codes() if c.code.startswith("EX4")} == {"QUERY_BUDGET_EXCEEDED"}


def test_envelope_shape():
    err = BindError(Codes.UNKNOWN_FIELD, "'x' is not a readable column of w", hint="did you mean 'y'?",
                    position=Position(1, 31), retry_with={"dataset": "w", "fields": ["y"]}, reason="SECRET_COLUMN_DENIED")
    env = err.to_envelope(exploration_id="e1", contract_hash="h", unused=None)
    assert env == {
        "ok": False,
        "error": {"type": "validation", "subtype": "UNKNOWN_FIELD", "code": "EX201",
                  "message": "'x' is not a readable column of w", "hint": "did you mean 'y'?",
                  "position": {"line": 1, "column": 31}, "retry_with": {"dataset": "w", "fields": ["y"]}},
        "meta": {"exploration_id": "e1", "contract_hash": "h"},
    }
    assert "SECRET_COLUMN_DENIED" not in json.dumps(env)
    assert err.reason == "SECRET_COLUMN_DENIED"


def test_internal_errors_say_nothing_of_the_failure():
    err = InternalError(reason="KeyError")
    env = err.to_envelope()
    assert env["error"]["subtype"] == "INTERNAL_ERROR" and "KeyError" not in json.dumps(env)
