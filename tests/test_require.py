"""Requirements (require.py): a caller's `require` -> met, or CONSISTENCY_UNVERIFIED, by the evidence's rules."""

from __future__ import annotations

import pytest

from ontoos_explore.errors import Codes, ExploreError
from ontoos_explore.evidence import EvidenceSpec, render
from ontoos_explore.grammar.limits import CheckedJSON
from ontoos_explore.require import Require, check, read, split

from .test_evidence import NOW, SPEC, batch

EXACT = render(SPEC, [batch("k8s", 2, 1), batch("gitlab", 3, 1)], consistent=True, now=NOW)  # 3 h old
ESTIMATED = render(SPEC, [batch("k8s", None, 1), batch("gitlab", 3, 1)], consistent=True, now=NOW)
UNKNOWN = render(EvidenceSpec("lake", "publish_log", (), 100, unsourced=("hosts",)), [], consistent=True, now=NOW)
UNVERIFIED = render(SPEC, [batch("k8s", 2, 1), batch("gitlab", 3, 1)], consistent=False, now=NOW)


def refusal(require: Require, evidence) -> ExploreError:
    with pytest.raises(ExploreError) as e:
        check(require, evidence)
    assert e.value.error_code is Codes.CONSISTENCY_UNVERIFIED
    return e.value


@pytest.mark.parametrize("require, evidence", [
    (Require(max_age_s=3 * 3600), EXACT),  # exactly as old as allowed
    (Require(max_age_s=10**6, consistency="fixed_read"), EXACT),
    (Require(consistency="fixed_read"), ESTIMATED),  # no age asked: an estimated one is not refused
    (Require(), UNKNOWN),
    (None, UNKNOWN),
])
def test_evidence_that_meets_the_requirement_passes(require, evidence):
    assert check(require, evidence) is None


def test_data_older_than_required_is_refused_saying_how_old_it_is():
    e = refusal(Require(max_age_s=3600), EXACT)
    assert "collected 10800 s (3.0 h) ago" in e.message and "2026-09-20T09:00:00Z" in e.message
    assert "3600 s required" in e.message and "at least 10800" in e.hint
    assert e.reason == "REQUIREMENT_UNMET"


def test_an_estimated_age_never_meets_a_max_age_because_collection_comes_before_publication():
    e = refusal(Require(max_age_s=10**6), ESTIMATED)  # 3 h by its publish time, far under the requirement
    assert "k8s says only when it published" in e.message and "at least 10800 s (3.0 h) old" in e.message


def test_an_unknown_age_is_refused_with_why_it_is_unknown():
    e = refusal(Require(max_age_s=10**6), UNKNOWN)
    assert "unknown (no source feeds hosts)" in e.message and "without require.max_age_s" in e.hint
    assert "unknown (the evidence is missing)" in refusal(Require(max_age_s=1), None).message


def test_fixed_read_is_refused_when_the_snapshot_is_not_shown():
    e = refusal(Require(consistency="fixed_read"), UNVERIFIED)
    assert "one snapshot" in e.message and '"consistency": "any"' in e.hint
    refusal(Require(consistency="fixed_read"), UNKNOWN)  # unknown evidence is never fixed_read


@pytest.mark.parametrize("value, message, hint", [
    (3600, "'require' must be an object", '"require": {"max_age_s": 3600'),
    ({"max_age": 3600}, "unknown key 'max_age'", "did you mean 'max_age_s'?"),
    ({"max_age_s": -1}, "'require.max_age_s' must be a whole number", '"max_age_s": 3600'),
    ({"max_age_s": 1.5}, "'require.max_age_s' must be a whole number", '"max_age_s": 3600'),
    ({"max_age_s": True}, "'require.max_age_s' must be a whole number", '"max_age_s": 3600'),
    ({"max_age_s": "3600"}, "'require.max_age_s' must be a whole number", '"max_age_s": 3600'),
    ({"consistency": "strong"}, "'require.consistency' must be", "fixed_read"),
])
def test_a_malformed_requirement_is_invalid_request_with_an_example(value, message, hint):
    with pytest.raises(ExploreError) as e:
        read(value)
    assert e.value.error_code is Codes.INVALID_REQUEST
    assert message in e.value.message and hint in e.value.hint


def test_split_takes_the_requirement_out_and_keeps_a_checked_form_checked():
    body = CheckedJSON({"dataset": "workloads", "fields": ["name"], "require": {"max_age_s": 60}})
    rest, require = split(body)
    assert rest == {"dataset": "workloads", "fields": ["name"]} and type(rest) is CheckedJSON
    assert require == Require(max_age_s=60)
    assert split("explore workloads fields name") == ("explore workloads fields name", None)
    assert split({"dataset": "workloads", "require": None})[1] is None
    assert read({"consistency": "fixed_read"}).to_json() == {"consistency": "fixed_read"}
