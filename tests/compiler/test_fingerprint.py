"""Fingerprint: equal for the same question with other values, different for another shape."""

from __future__ import annotations

import pytest

from ontoos_explore import compile_exploration


def fp(demo, source, role="analyst"):
    return compile_exploration(source, demo, role).fingerprint


SAME = [
    ("explore workloads fields name where namespace = 'a' limit 5",
     "explore workloads fields name where namespace = 'b' limit 50"),
    ("explore workloads fields name where replicas between 1 and 2",
     "EXPLORE WORKLOADS FIELDS NAME WHERE REPLICAS BETWEEN 7 AND 9"),
    ("explore workloads fields name where kind in ('Job', 'CronJob')",
     "explore workloads fields name where kind in ('Deployment', 'DaemonSet')"),
    ("explore workloads fields name where replicas = 3",
     {"dataset": "workloads", "fields": ["name"], "filter": [{"field": "replicas", "op": "=", "value": 9}]}),
    ("explore workloads fields name where replicas = 3",
     "explore workloads fields name where replicas = '4'"),  # typed by the column: the same slot
]

DIFFERENT = [
    ("explore workloads fields name where namespace = 'a'", "explore workloads fields name where cluster = 'a'"),
    ("explore workloads fields name where namespace = 'a'", "explore workloads fields name where namespace != 'a'"),
    ("explore workloads fields name where namespace = 'a'", "explore workloads fields name, kind where namespace = 'a'"),
    ("explore workloads fields name where kind in ('Job')", "explore workloads fields name where kind in ('Job', 'CronJob')"),
    ("explore workloads fields name", "explore workloads fields name as n"),
    ("explore workloads fields name order by name", "explore workloads fields name order by name desc"),
    ("explore workloads fields name", "explore workloads via containers fields name"),
    ("explore workloads fields name where namespace = 'a' and kind = 'Job'",
     "explore workloads fields name where namespace = 'a' or kind = 'Job'"),
    ("explore workloads fields count()", "explore workloads fields count(name)"),
]


@pytest.mark.parametrize("a, b", SAME)
def test_same_question_other_values(demo, a, b):
    assert fp(demo, a) == fp(demo, b)


@pytest.mark.parametrize("a, b", DIFFERENT)
def test_other_shape(demo, a, b):
    assert fp(demo, a) != fp(demo, b)


def test_fingerprint_does_not_depend_on_the_role(demo):
    q = "explore workloads fields name where namespace = 'a'"
    assert fp(demo, q, "viewer") == fp(demo, q, "admin")


def test_shape_and_normalized_text(demo):
    q = compile_exploration("explore Workloads fields NAME where namespace = 'it''s' and replicas > 2 limit 5", demo, "analyst")
    assert q.shape == "explore workloads fields name where namespace = ? and replicas > ?"
    assert q.normalized == "explore workloads fields name where namespace = 'it''s' and replicas > 2 limit 5"
    # the normalized text is itself a valid exploration with the same SQL
    assert compile_exploration(q.normalized, demo, "analyst").sql == q.sql
