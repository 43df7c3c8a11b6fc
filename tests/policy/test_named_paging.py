"""A named query pages only when its ORDER BY makes the order of its rows total (golden cases in
cases/named_paging.yaml), and a page's SQL is the entry's with its OFFSET moved on."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from ontoos_explore.allowed import allowed_for_read_sets
from ontoos_explore.guard import check
from ontoos_explore.policy.named_paging import order_is_total, with_offset

CASES = yaml.safe_load((Path(__file__).parents[1] / "cases" / "named_paging.yaml").read_text())["cases"]


def verdict(sql, contract):
    found = check(sql, allowed_for_read_sets(contract, tuple(contract.read_sets), 100))
    assert found.ok, found.violations  # a case the guard refuses would say nothing of paging
    return found


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_order_is_total(case, demo):
    assert order_is_total(case["sql"], verdict(case["sql"], demo), demo) is case["total"]


def test_a_table_whose_dataset_declares_no_key_leaves_the_order_partial(demo):
    sql = "SELECT h.hostname FROM lake.hosts h ORDER BY h.host_id LIMIT 5"
    keyless = demo.model_copy(update={"datasets": {**demo.datasets,
                                                   "hosts": demo.datasets["hosts"].model_copy(update={"key": ()})}})
    assert order_is_total(sql, verdict(sql, demo), demo) is True
    assert order_is_total(sql, verdict(sql, keyless), keyless) is False


@pytest.mark.parametrize("sql, offset, ends", [
    ("SELECT h.hostname FROM lake.hosts h ORDER BY h.host_id LIMIT 5", 10, "LIMIT 5 OFFSET 10"),
    ("SELECT h.hostname FROM lake.hosts h ORDER BY h.host_id LIMIT 5 OFFSET 3", 10, "LIMIT 5 OFFSET 13"),
    ("SELECT h.hostname FROM lake.hosts h WHERE h.region = $1 ORDER BY h.host_id LIMIT 5", 5, "LIMIT 5 OFFSET 5"),
])
def test_with_offset_moves_the_offset_on_and_keeps_the_rest(sql, offset, ends, demo):
    paged = with_offset(sql, offset)
    assert paged.endswith(ends)
    before, after = verdict(sql, demo), verdict(paged, demo)
    unplaced = lambda v: [dataclasses.replace(c, location=None) for c in v.conjuncts]  # noqa: E731 - printed anew
    assert (after.columns, after.placed, after.ranges, unplaced(after)) == (
        before.columns, before.placed, before.ranges, unplaced(before))
