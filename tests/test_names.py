"""Names: identifiers, ASCII-only folding, did-you-mean."""

from __future__ import annotations

import pytest

from ontoos_explore.names import close_matches, did_you_mean, fold, is_identifier


@pytest.mark.parametrize("name", ["a", "_x", "Abc_9", "a" * 63])
def test_identifiers(name):
    assert is_identifier(name)


@pytest.mark.parametrize("name", ["", "9a", "a-b", "a.b", "a b", "a" * 64, "ä", "\u212a", None, 3])  # U+212A: the Kelvin sign
def test_not_identifiers(name):
    assert not is_identifier(name)


def test_fold_is_ascii_only():
    assert fold("WorkLoads") == "workloads"
    assert fold("STRASSE") == "strasse"
    assert fold("Ä") == "Ä" and fold("\u212a") == "\u212a"  # PostgreSQL would not fold these either


def test_close_matches_keep_a_clear_winner_alone():
    assert close_matches("namspace", ["name", "namespace", "kind"]) == ["namespace"]
    assert close_matches("NME", ["name", "namespace"]) == ["name"]
    assert close_matches("zzz", ["name", "namespace"]) == []
    assert close_matches("containr", ["containers", "container_id"]) == ["containers", "container_id"]


def test_did_you_mean_lists_only_the_candidates_given():
    hint, single = did_you_mean("replica", ["replicas", "name"], "readable columns of w")
    assert single == "replicas" and "did you mean 'replicas'?" in hint and "readable columns of w: name, replicas" in hint
    hint, single = did_you_mean("x", [], "readable datasets")
    assert single is None and hint == "there are no readable datasets"


def test_long_listings_are_cut():
    hint, _ = did_you_mean("q", [f"c{i:03}" for i in range(100)], "columns")
    assert "(60 more)" in hint
