"""Golden SQL: each exploration in tests/cases/golden.yaml compiles to exactly its SQL."""

from __future__ import annotations

import re

import pytest
import yaml

from ontoos_explore import compile_exploration
from ontoos_explore.compiler import json_value

from ..conftest import CASES

GOLDEN = yaml.safe_load((CASES / "golden.yaml").read_text())


def test_there_are_enough_cases():
    assert len(GOLDEN) >= 30
    assert len({c["id"] for c in GOLDEN}) == len(GOLDEN)


@pytest.mark.parametrize("case", GOLDEN, ids=[c["id"] for c in GOLDEN])
def test_golden(case, demo):
    q = compile_exploration(case["source"], demo, case["role"])
    assert q.sql == case["sql"]
    assert [json_value(p) for p in q.params] == case["params"]
    assert list(q.notes) == case.get("notes", [])
    assert q.contract_hash == demo.hash
    # every parameter appears exactly once, numbered in the order of the text
    assert re.findall(r"\$(\d+)", q.sql) == [str(n) for n in range(1, len(q.params) + 1)]


@pytest.mark.parametrize("case", GOLDEN, ids=[c["id"] for c in GOLDEN])
def test_golden_is_deterministic(case, demo):
    first = compile_exploration(case["source"], demo, case["role"])
    again = compile_exploration(case["source"], demo, case["role"])
    assert (first.sql, first.params, first.fingerprint) == (again.sql, again.params, again.fingerprint)
