"""Cursors' digests and tokens: the same from one version of the service to the next (a deployment
rolls its processes one at a time, and a cursor minted by one is opened by another)."""

from __future__ import annotations

import hashlib
import json
import uuid

import pytest

from ontoos_explore import cursors
from ontoos_explore.cursors import Cursors, Page, _b64, batches_digest

BATCHES = {"source_batch": {"k8s": "b-2026-12-01", "gitlab": "b-2026-11-30"}}


def canonical(found) -> str:
    """The digest as every version has defined it: of the canonical JSON (sorted keys)."""
    return hashlib.sha256(json.dumps(found, sort_keys=True).encode()).hexdigest()[:16]


def test_the_digest_is_of_the_canonical_text_whatever_the_order_or_the_kept_digests() -> None:
    reordered = {"source_batch": dict(reversed(list(BATCHES["source_batch"].items())))}
    assert batches_digest(BATCHES) == batches_digest(reordered) == canonical(BATCHES["source_batch"])
    other = {"source_batch": {"k8s": "b-2026-12-02", "gitlab": "b-2026-11-30"}}
    assert batches_digest(other) == canonical(other["source_batch"]) != batches_digest(BATCHES)
    assert batches_digest(None) == batches_digest({"source_batch": {}}) == ""


def test_more_sets_than_the_kept_digests_stay_right() -> None:
    sets = [{"source_batch": {"k8s": f"b-{i}", "gitlab": "g"}} for i in range(cursors._text_digest.cache_info().maxsize + 50)]
    for _ in range(2):
        assert [batches_digest(s) for s in sets] == [canonical(s["source_batch"]) for s in sets]


def test_a_number_past_64_bits_has_its_canonical_digest() -> None:
    found = {"source_batch": {"k8s": 2**70}}  # not text: the canonical text, not the kept digests
    assert batches_digest(found) == canonical(found["source_batch"])


def test_a_token_of_the_earlier_text_opens_as_one_minted_now() -> None:
    c = Cursors("a-secret-of-some-length", clock=lambda: 1000.0)
    page = Page("ann as reader", "c0ffee", "f1", "explore workloads fields name limit 5", 5, 2, "d1g", 999.5)
    earlier = json.dumps({"v": 1, "p": page.principal, "c": page.contract, "f": page.fingerprint, "q": page.question,
                          "o": page.offset, "n": page.number, "b": page.batches, "t": page.issued},
                         separators=(",", ":"), ensure_ascii=False).encode()
    token = f"{_b64(earlier)}.{c._sign(earlier)}"
    assert c.open(token, "ann as reader", "c0ffee") == page == c.open(c.mint(page), "ann as reader", "c0ffee")


def test_values_that_are_not_text_get_their_own_canonical_digest() -> None:
    none, nan = {"source_batch": {"k8s": None}}, {"source_batch": {"k8s": float("nan")}}
    assert batches_digest(none) == canonical(none["source_batch"])
    assert batches_digest(nan) == canonical(nan["source_batch"]) != batches_digest(none)
    with pytest.raises(TypeError):  # as the canonical text refuses it
        batches_digest({"source_batch": {"k8s": uuid.uuid4()}})
