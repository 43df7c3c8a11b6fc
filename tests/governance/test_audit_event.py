"""Audit events from answers: what was asked is taken from the answer, never parsed again."""

from __future__ import annotations

from ontoos_explore import compile_exploration
from ontoos_explore.compiler.fingerprint import of_shape
from ontoos_explore.envelope import Answer
from ontoos_explore.errors import ExploreError
from ontoos_explore.governance.audit import event_for

import pytest


def _refused(source, demo):
    with pytest.raises(ExploreError) as caught:
        compile_exploration(source, demo, "analyst", cache=None)
    return Answer.refusal(caught.value)


def test_a_policy_refusal_carries_its_parsed_exploration_to_the_audit(demo):
    answer = _refused("explore WORKLOADS fields env_dump where namespace = 'x'", demo)
    assert answer.exploration is not None and answer.error.reason == "SECRET_COLUMN_DENIED"
    # the source is not given: everything the event says comes from the answer
    event = event_for(answer, principal="p", role="analyst", surface="mcp", source=None, contract=demo)
    assert event.dataset == "workloads" and event.outcome == "refused"
    assert event.exploration == "explore WORKLOADS fields env_dump where namespace = 'x'"
    assert event.fingerprint == of_shape("explore workloads fields env_dump where namespace = ?")


def test_the_same_refused_question_with_other_values_has_one_fingerprint(demo):
    a = _refused("explore workloads fields env_dump where namespace = 'x'", demo)
    b = _refused({"dataset": "workloads", "fields": ["env_dump"], "filter": "namespace = 'y'"}, demo)
    ea, eb = (event_for(x, principal="p", role="analyst", surface="rest", source=None, contract=demo) for x in (a, b))
    assert ea.fingerprint == eb.fingerprint and len(ea.fingerprint) == 16 and ":" not in ea.fingerprint


def test_a_source_that_does_not_parse_is_recorded_as_it_came(demo):
    answer = _refused("explore workloads fields", demo)
    assert answer.exploration is None
    event = event_for(answer, principal="p", role="analyst", surface="cli", source="explore workloads fields",
                      contract=demo)
    assert (event.dataset, event.exploration, event.fingerprint) == (None, "explore workloads fields", None)
    assert event.error_code == "EX101"
